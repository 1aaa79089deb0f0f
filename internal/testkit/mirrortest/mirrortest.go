// Package mirrortest serves NVIDIA-layout redistributable archives of generated ELF libraries (see redistwrite) from 127.0.0.1, with a catalog layer naming them, for end-to-end tests.
package mirrortest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/redistwrite"
)

// Archive is one component archive in NVIDIA's redist layout.
type Archive = redistwrite.Archive

// Mirror serves archives over HTTP on 127.0.0.1.
type Mirror struct {
	URL string // ends with "/"
	Dir string // the files served
	// Catalog is a catalog layer (for --catalog) naming every archive.
	Catalog string

	server    *httptest.Server
	mu        sync.Mutex
	hits      map[string]int
	forbidden testing.TB
}

// Forbid makes every later request fail t: a stand-in that must not be
// asked any more.
func (m *Mirror) Forbid(t testing.TB) {
	m.mu.Lock()
	m.forbidden = t
	m.mu.Unlock()
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
	cat, err := redistwrite.Write(dir, archives)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// Serve builds the archives and serves them from 127.0.0.1 until the test
// ends.
func Serve(t testing.TB, archives []Archive) *Mirror {
	t.Helper()
	dir := t.TempDir()
	m := ServeDir(t, dir)
	m.Catalog = Build(t, dir, archives)
	return m
}

// ServeDir serves the files of dir (a mirror written by cudadeps mirror,
// an index) from 127.0.0.1 until the test ends, counting the requests.
func ServeDir(t testing.TB, dir string) *Mirror {
	t.Helper()
	m := &Mirror{Dir: dir, hits: map[string]int{}}
	files := http.FileServer(http.Dir(dir))
	m.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.hits[r.URL.Path]++
		forbidden := m.forbidden
		m.mu.Unlock()
		if forbidden != nil {
			forbidden.Errorf("the NVIDIA stand-in was asked for %s %s, which nothing may ask for now", r.Method, r.URL.Path)
			http.Error(w, "forbidden by the test", http.StatusForbidden)
			return
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(m.server.Close)
	m.URL = m.server.URL + "/"
	return m
}
