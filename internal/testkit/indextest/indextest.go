// Package indextest builds wheels and serves them from a Python simple index (PEP 691 JSON or PEP 503 HTML) on 127.0.0.1, for tests.
package indextest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/wheelwrite"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// Wheel is one wheel file: a project at a version with its tags and files.
type Wheel = wheelwrite.Wheel

// Index serves wheels on 127.0.0.1: URL/PROJECT/ lists a project's files,
// URL/../files/NAME serves one.
type Index struct {
	// URL is the simple index's URL, ending in "/simple/".
	URL string
	// HTML makes the index answer in PEP 503 HTML (no sizes) whatever the
	// client asks for.
	HTML bool
	// CoreMetadata makes the index serve each wheel's METADATA beside it
	// (PEP 658, PEP 714) and say so on the project page.
	CoreMetadata bool

	server *httptest.Server
	mu     sync.Mutex
	files  map[string][]byte   // file name → bytes (NAME.metadata: the wheel's METADATA)
	byProj map[string][]string // normalized project → file names
	hashes map[string]string   // file name → the sha256 the index states
	hits   map[string]int      // path → requests
	// forbidden, when set, is failed by every request.
	forbidden testing.TB
}

// Forbid makes every later request fail t: an index that must not be
// asked any more.
func (ix *Index) Forbid(t testing.TB) {
	ix.mu.Lock()
	ix.forbidden = t
	ix.mu.Unlock()
}

// Serve builds the wheels and serves them; the server stops with the test.
func Serve(t testing.TB, wheels ...Wheel) *Index {
	t.Helper()
	ix := &Index{files: map[string][]byte{}, byProj: map[string][]string{}, hashes: map[string]string{}, hits: map[string]int{}}
	for _, w := range wheels {
		name := w.Filename()
		data, err := w.Build()
		if err != nil {
			t.Fatal(err)
		}
		ix.files[name] = data
		ix.files[name+".metadata"] = w.MetadataFile()
		sum := sha256.Sum256(data)
		ix.hashes[name] = hex.EncodeToString(sum[:])
		p := pymeta.NormalizeName(w.Project)
		ix.byProj[p] = append(ix.byProj[p], name)
	}
	ix.server = httptest.NewServer(http.HandlerFunc(ix.serve))
	t.Cleanup(ix.server.Close)
	ix.URL = ix.server.URL + "/simple/"
	return ix
}

// File returns a served file's bytes.
func (ix *Index) File(name string) []byte { return ix.files[name] }

// StateSHA256 makes the index state sum as the sha256 of the file name.
func (ix *Index) StateSHA256(name, sum string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.hashes[name] = sum
}

// Downloads is how many times files were downloaded (GET of a file).
func (ix *Index) Downloads() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := 0
	for p, c := range ix.hits {
		if strings.HasPrefix(p, "GET /files/") {
			n += c
		}
	}
	return n
}

// Requests is how many requests the index answered.
func (ix *Index) Requests() int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n := 0
	for _, c := range ix.hits {
		n += c
	}
	return n
}

func (ix *Index) serve(w http.ResponseWriter, r *http.Request) {
	ix.mu.Lock()
	ix.hits[r.Method+" "+r.URL.Path]++
	forbidden := ix.forbidden
	ix.mu.Unlock()
	if forbidden != nil {
		forbidden.Errorf("the package index was asked for %s %s, which nothing may ask for now", r.Method, r.URL.Path)
		http.Error(w, "forbidden by the test", http.StatusForbidden)
		return
	}
	if name, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
		data, ok := ix.files[name]
		if !ok || strings.HasSuffix(name, ".metadata") && !ix.CoreMetadata {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
		return
	}
	project, ok := strings.CutPrefix(r.URL.Path, "/simple/")
	project = strings.TrimSuffix(project, "/")
	names := ix.byProj[project]
	if !ok || len(names) == 0 {
		http.NotFound(w, r)
		return
	}
	ix.mu.Lock()
	hashes := map[string]string{}
	for _, n := range names {
		hashes[n] = ix.hashes[n]
	}
	ix.mu.Unlock()
	if !ix.HTML && strings.Contains(r.Header.Get("Accept"), "application/vnd.pypi.simple.v1+json") {
		type file struct {
			Filename     string            `json:"filename"`
			URL          string            `json:"url"`
			Hashes       map[string]string `json:"hashes"`
			Size         int               `json:"size"`
			CoreMetadata any               `json:"core-metadata,omitempty"`
		}
		page := struct {
			Meta  map[string]string `json:"meta"`
			Name  string            `json:"name"`
			Files []file            `json:"files"`
		}{Meta: map[string]string{"api-version": "1.1"}, Name: project}
		for _, n := range names {
			f := file{Filename: n, URL: "../../files/" + n, Hashes: map[string]string{"sha256": hashes[n]}, Size: len(ix.files[n])}
			if ix.CoreMetadata {
				sum := sha256.Sum256(ix.files[n+".metadata"])
				f.CoreMetadata = map[string]string{"sha256": hex.EncodeToString(sum[:])}
			}
			page.Files = append(page.Files, f)
		}
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		_ = json.NewEncoder(w).Encode(page)
		return
	}
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html><body>\n")
	for _, n := range names {
		attr := ""
		if ix.CoreMetadata {
			sum := sha256.Sum256(ix.files[n+".metadata"])
			attr = ` data-core-metadata="sha256=` + hex.EncodeToString(sum[:]) + `"`
		}
		fmt.Fprintf(w, "<a href=\"../../files/%s#sha256=%s\"%s>%s</a><br>\n", html.EscapeString(n), hashes[n], attr, html.EscapeString(n))
	}
	fmt.Fprintf(w, "</body></html>\n")
}
