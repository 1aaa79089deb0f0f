// Package mirrortest builds NVIDIA-layout redistributable archives of generated ELF libraries, serves them from 127.0.0.1 and writes a catalog layer for them, for end-to-end tests.
package mirrortest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/cudadeps/cudadeps/internal/elfwrite"
)

// Archive is one component archive in NVIDIA's redist layout:
// NAME-archive/lib/..., NAME-archive/LICENSE.
type Archive struct {
	Component string // e.g. "libcudss"
	Product   string // e.g. "cudss"
	Version   string // e.g. "0.8.0.10"
	Platform  string // e.g. "linux-x86_64"
	Variant   string // "cuda13" or ""
	// Libs are the files under lib/, by name; each is written with its
	// machine defaulting to Machine.
	Libs map[string]elfwrite.Spec
	// Links are symlinks under lib/: name → target.
	Links   map[string]string
	Machine elf.Machine
	// Raw are more files under lib/, by name, written as given (libraries
	// taken from an environment); their names are their sonames.
	Raw map[string][]byte
	// ListedAs is the platform the catalog layer lists the archive for,
	// when not Platform: a layer that misnames an archive's platform.
	ListedAs string
}

func (a Archive) name() string {
	n := fmt.Sprintf("%s-%s-%s", a.Component, a.Platform, a.Version)
	if a.Variant != "" {
		n += "_" + a.Variant
	}
	return n + "-archive"
}

// RelativePath is where the archive lies under the mirror.
func (a Archive) RelativePath() string {
	return a.Component + "/" + a.Platform + "/" + a.name() + ".tar.xz"
}

// Sonames are the sonames of the archive's libraries.
func (a Archive) Sonames() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range a.Libs {
		if s.Soname != "" && !seen[s.Soname] {
			seen[s.Soname] = true
			out = append(out, s.Soname)
		}
	}
	for n := range a.Raw {
		if base := path.Base(n); strings.Contains(base, ".so") && !seen[base] {
			seen[base] = true
			out = append(out, base)
		}
	}
	sort.Strings(out)
	return out
}

// Mirror serves archives over HTTP on 127.0.0.1.
type Mirror struct {
	URL string // ends with "/"
	Dir string // the files served
	// Catalog is a catalog layer (for --catalog) naming every archive.
	Catalog string

	server *httptest.Server
	mu     sync.Mutex
	hits   map[string]int
}

// Requests returns how many requests each served path received.
func (m *Mirror) Requests() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.hits {
		out[k] = v
	}
	return out
}

// Total is the number of requests served.
func (m *Mirror) Total() int {
	n := 0
	for _, v := range m.Requests() {
		n += v
	}
	return n
}

// Build writes the archives into dir and a catalog layer next to them,
// without serving them (for file:// mirrors).
func Build(t testing.TB, dir string, archives []Archive) string {
	t.Helper()
	var cat strings.Builder
	cat.WriteString("format: 1\nproducts:\n")
	products := map[string]bool{}
	for _, a := range archives {
		if !products[a.Product] {
			products[a.Product] = true
			fmt.Fprintf(&cat, "  %s:\n    title: %s (test)\n    base_url: https://developer.download.nvidia.com/compute/%s/redist/\n", a.Product, a.Product, a.Product)
		}
	}
	cat.WriteString("components:\n")
	byComp := map[string][]Archive{}
	var comps []string
	for _, a := range archives {
		if _, ok := byComp[a.Component]; !ok {
			comps = append(comps, a.Component)
		}
		byComp[a.Component] = append(byComp[a.Component], a)
	}
	for _, c := range comps {
		as := byComp[c]
		var all []string
		for _, a := range as {
			all = append(all, a.Sonames()...)
		}
		fmt.Fprintf(&cat, "  %s:\n    product: %s\n    title: %s (test)\n    license: test\n    sonames: [%s]\n    releases:\n", c, as[0].Product, c, strings.Join(uniq(all), ", "))
		writeReleases(t, dir, &cat, as)
	}
	catPath := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catPath, []byte(cat.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return catPath
}

// writeReleases writes one component's archives into dir and their
// releases into the catalog layer: one release per version, with an
// archive per platform.
func writeReleases(t testing.TB, dir string, cat *strings.Builder, as []Archive) {
	t.Helper()
	sort.SliceStable(as, func(i, j int) bool { return as[i].Version < as[j].Version })
	lastVersion := ""
	for _, a := range as {
		data := a.build(t)
		p := filepath.Join(dir, filepath.FromSlash(a.RelativePath()))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		listed := a.Platform
		if a.ListedAs != "" {
			listed = a.ListedAs
		}
		if a.Version != lastVersion {
			fmt.Fprintf(cat, "      - version: %s\n        archives:\n", a.Version)
			lastVersion = a.Version
		}
		fmt.Fprintf(cat, "          - platform: %s\n", listed)
		if a.Variant != "" {
			fmt.Fprintf(cat, "            cuda_variant: %s\n", a.Variant)
		}
		fmt.Fprintf(cat, "            path: %s\n            sha256: %s\n            size: %d\n            sonames: [%s]\n",
			a.RelativePath(), hex.EncodeToString(sum[:]), len(data), strings.Join(a.Sonames(), ", "))
	}
}

// Serve builds the archives and serves them from 127.0.0.1 until the test
// ends.
func Serve(t testing.TB, archives []Archive) *Mirror {
	t.Helper()
	m := &Mirror{Dir: t.TempDir(), hits: map[string]int{}}
	m.Catalog = Build(t, m.Dir, archives)
	files := http.FileServer(http.Dir(m.Dir))
	m.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.hits[r.URL.Path]++
		m.mu.Unlock()
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(m.server.Close)
	m.URL = m.server.URL + "/"
	return m
}

func uniq(list []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// build returns the .tar.xz bytes of the archive.
func (a Archive) build(t testing.TB) []byte {
	t.Helper()
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	top := a.name() + "/"
	mtime := time.Unix(1700000000, 0)
	dir := func(name string) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
	}
	file := func(name string, data []byte, mode int64) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	dir(top)
	dir(top + "lib/")
	file(top+"LICENSE", []byte("test license\n"), 0o644)
	names := make([]string, 0, len(a.Libs))
	for n := range a.Libs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		spec := a.Libs[n]
		if spec.Machine == elf.EM_NONE {
			spec.Machine = a.Machine
		}
		data, err := elfwrite.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		if d := path.Dir(n); d != "." {
			dir(top + "lib/" + d + "/")
		}
		file(top+"lib/"+n, data, 0o755)
	}
	raw := make([]string, 0, len(a.Raw))
	for n := range a.Raw {
		raw = append(raw, n)
	}
	sort.Strings(raw)
	for _, n := range raw {
		if d := path.Dir(n); d != "." {
			dir(top + "lib/" + d + "/")
		}
		file(top+"lib/"+n, a.Raw[n], 0o755)
	}
	links := make([]string, 0, len(a.Links))
	for n := range a.Links {
		links = append(links, n)
	}
	sort.Strings(links)
	for _, n := range links {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: top + "lib/" + n, Linkname: a.Links[n], Mode: 0o777, ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := xz.NewWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(tarBuf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
