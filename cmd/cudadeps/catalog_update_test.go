package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
)

// redistServer serves product redist directories in NVIDIA's layout from
// 127.0.0.1: a listing page per product and the manifests it links.
type redistServer struct {
	mu    sync.Mutex
	files map[string][]byte // "cudnn/redistrib_9.27.0.json" → bytes
	srv   *httptest.Server
}

func newRedistServer(t *testing.T) *redistServer {
	s := &redistServer{files: map[string][]byte{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		product, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/redist/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		if rest == "" {
			var names []string
			for k := range s.files {
				if p, name, _ := strings.Cut(k, "/"); p == product {
					names = append(names, name)
				}
			}
			if len(names) == 0 {
				http.NotFound(w, r)
				return
			}
			fmt.Fprintf(w, "<html><head><title>Index of /compute/%s/redist</title></head><body><pre>\n", product)
			for _, n := range names {
				fmt.Fprintf(w, "<a href='%s'>%s</a>  2026-09-29 12:00  5.2K\n", n, n)
			}
			fmt.Fprint(w, "</pre></body></html>\n")
			return
		}
		data, ok := s.files[product+"/"+rest]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *redistServer) put(key string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[key] = data
}

// whichCuDNN answers `catalog which libcudnn.so.9` for CUDA 13 on x86_64, with no flags but those.
func whichCuDNN(t *testing.T) (version, url string) {
	t.Helper()
	stdout, stderr, code := cli(t, "catalog", "which", "libcudnn.so.9", "--platform", "linux-x86_64", "--cuda", "13", "--json")
	if code != 0 {
		t.Fatalf("which: exit %d: %s", code, stderr)
	}
	var m struct{ Version, URL string }
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatal(err)
	}
	return m.Version, m.URL
}

func TestCatalogUpdateFromLocalServer(t *testing.T) {
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	builtin, _ := whichCuDNN(t)

	// A cuDNN release newer than any built in, in NVIDIA's format: the
	// newest real manifest with its version moved on.
	file, label := newestManifest(t, "cudnn")
	real, err := os.ReadFile(repoFile(t, "catalog/manifests/"+file))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(real, &top); err != nil {
		t.Fatal(err)
	}
	var cudnn struct{ Version string }
	if err := json.Unmarshal(top["cudnn"], &cudnn); err != nil {
		t.Fatal(err)
	}
	nextLabel := "9.99.0"
	nextVersion := nextLabel + ".7"
	next := bytes.ReplaceAll(real, []byte(cudnn.Version), []byte(nextVersion))
	next = bytes.ReplaceAll(next, []byte(`"release_label": "`+label+`"`), []byte(`"release_label": "`+nextLabel+`"`))
	if bytes.Equal(next, real) || !bytes.Contains(next, []byte(nextLabel)) {
		t.Fatal("the newer manifest was not made")
	}

	srv := newRedistServer(t)
	srv.put("cudnn/redistrib_"+label+".json", real)
	srv.put("cudnn/redistrib_"+nextLabel+".json", next)
	stdout, stderr, code := cli(t, "catalog", "update", "--mirror", srv.srv.URL, "--json")
	if code != 0 {
		t.Fatalf("update: exit %d: %s", code, stderr)
	}
	var res struct {
		Layer     string
		Manifests []string
		New       []catalog.NewRelease
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Manifests) != 2 || !strings.HasPrefix(res.Layer, data) {
		t.Errorf("update result %+v", res)
	}
	found := false
	for _, n := range res.New {
		found = found || (n.Component == "cudnn" && n.Version == nextVersion)
		if n.Version != nextVersion {
			t.Errorf("reported as new: %+v (it is built in)", n)
		}
	}
	if !found {
		t.Errorf("cudnn %s not reported as new: %+v", nextVersion, res.New)
	}

	// The next command, without flags, uses the new release, from the
	// server that listed it.
	version, url := whichCuDNN(t)
	if version != nextVersion || !strings.HasPrefix(url, srv.srv.URL+"/cudnn/redist/cudnn/linux-x86_64/") {
		t.Fatalf("after update: %s %s (built in: %s)", version, url, builtin)
	}
	layer, err := os.ReadFile(catalog.UserLayerFile(filepath.Join(data, "cudadeps")))
	if err != nil {
		t.Fatal(err)
	}

	// A broken manifest there: the update fails and the layer stays.
	srv.put("cudnn/redistrib_9.100.0.json", next[:len(next)/2])
	if _, stderr, code := cli(t, "catalog", "update", "--mirror", srv.srv.URL); code != 1 || !strings.Contains(stderr, "redistrib_9.100.0.json") || !strings.Contains(stderr, "still in force") {
		t.Errorf("broken manifest: exit %d: %s", code, stderr)
	}
	// Offline: the same.
	srv.srv.Close()
	if _, stderr, code := cli(t, "catalog", "update", "--mirror", srv.srv.URL); code != 1 || !strings.Contains(stderr, "still in force") {
		t.Errorf("offline: exit %d: %s", code, stderr)
	}
	if v, _ := whichCuDNN(t); v != nextVersion {
		t.Errorf("after failed updates: %s, want %s", v, nextVersion)
	}
	after, err := os.ReadFile(catalog.UserLayerFile(filepath.Join(data, "cudadeps")))
	if err != nil || !bytes.Equal(after, layer) {
		t.Errorf("a failed update changed the layer (%v)", err)
	}
	entries, _ := os.ReadDir(filepath.Join(data, "cudadeps"))
	if len(entries) != 2 { // current and the one layer directory
		t.Errorf("left in the data directory: %v", entries)
	}
}
