package fetch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// member is one entry of a test archive.
type member struct {
	name string
	typ  byte // tar type flag; 0 means a regular file
	body []byte
	link string
	mode int64
}

func file(name, body string) member { return member{name: name, body: []byte(body)} }
func dir(name string) member        { return member{name: name, typ: tar.TypeDir} }
func symlink(name, target string) member {
	return member{name: name, typ: tar.TypeSymlink, link: target}
}
func hardlink(name, target string) member { return member{name: name, typ: tar.TypeLink, link: target} }

func tarBytes(t testing.TB, ms []member) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Typeflag: m.typ, Linkname: m.link, Mode: m.mode, ModTime: time.Unix(1700000000, 0)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(m.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(m.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func xzBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	// A small dictionary keeps the pure-Go encoder quick and test archives
	// small; the decoders do not care.
	w, err := xz.WriterConfig{DictCap: 1 << 20}.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gzBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zipBytes(t testing.TB, ms []member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range ms {
		h := &zip.FileHeader{Name: m.name, Method: zip.Deflate}
		mode := fs.FileMode(m.mode)
		if mode == 0 {
			mode = 0o644
		}
		switch m.typ {
		case tar.TypeDir:
			h.SetMode(fs.ModeDir | 0o755)
		case tar.TypeSymlink:
			h.SetMode(fs.ModeSymlink | 0o777)
			m.body = []byte(m.link)
		default:
			h.SetMode(mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// payload is deterministic bytes, half random and half repetitive, so that
// compressors have work to do.
func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		end := min(i+4096, n)
		if (i/4096)%2 == 0 {
			for j := i; j < end; j++ {
				b[j] = byte(r.Uint32())
			}
		} else {
			copy(b[i:end], bytes.Repeat([]byte("libcudss "), 4096/9+1))
		}
	}
	return b
}

// redistTop is the top directory of the test archive, as NVIDIA names them.
const redistTop = "libcudss-linux-sbsa-0.8.0.10_cuda13-archive"

// redistMembers is an NVIDIA-like redist archive: one top directory, a
// symlink chain, headers, a license.
func redistMembers(libSize int) []member {
	return []member{
		dir(redistTop + "/"),
		file(redistTop+"/LICENSE", "license text\n"),
		dir(redistTop + "/include/"),
		file(redistTop+"/include/cudss.h", "#define CUDSS 1\n"),
		dir(redistTop + "/lib/"),
		{name: redistTop + "/lib/libcudss.so.0.8.0.10", body: payload(1, libSize), mode: 0o755},
		symlink(redistTop+"/lib/libcudss.so.0", "libcudss.so.0.8.0.10"),
		symlink(redistTop+"/lib/libcudss.so", "libcudss.so.0"),
		hardlink(redistTop+"/lib/libcudss_static_copy.so", redistTop+"/lib/libcudss.so.0.8.0.10"),
	}
}

// redistFiles is what an entry built from redistMembers owns.
func redistFiles() []string {
	return []string{
		"LICENSE", "include/cudss.h", "lib/libcudss.so", "lib/libcudss.so.0",
		"lib/libcudss.so.0.8.0.10", "lib/libcudss_static_copy.so",
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkRedist checks an extracted redist archive: stripped top directory,
// symlink chain kept, contents right.
func checkRedist(t *testing.T, dir string, libSize int) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, "lib", "libcudss.so"))
	if err != nil {
		t.Fatalf("read through the symlink chain: %v", err)
	}
	if !bytes.Equal(got, payload(1, libSize)) {
		t.Fatalf("lib/libcudss.so has wrong contents")
	}
	for link, want := range map[string]string{"lib/libcudss.so": "libcudss.so.0", "lib/libcudss.so.0": "libcudss.so.0.8.0.10"} {
		if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != want {
			t.Errorf("readlink %s = %q, %v; want %q", link, got, err, want)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "lib", "libcudss.so.0.8.0.10"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("lib/libcudss.so.0.8.0.10: %v, %v; want mode 0755", fi, err)
	}
	if got := walk(t, dir); !equalStrings(got, redistFiles()) && !equalStrings(got, append([]string{recordName, filesName}, redistFiles()...)) {
		t.Errorf("files = %q, want %q", got, redistFiles())
	}
}

// walk lists the non-directory paths under dir, slash-separated, sorted.
func walk(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func equalStrings(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

// server serves one archive and records the requests. Request i is answered
// by the i-th handler in script if there is one, else normally (with Range,
// If-Range, ETag).
type server struct {
	*httptest.Server
	data   []byte
	etag   string
	mu     sync.Mutex
	reqs   []http.Header
	script []func(w http.ResponseWriter, r *http.Request, data []byte)
}

func newServer(t *testing.T, data []byte, script ...func(w http.ResponseWriter, r *http.Request, data []byte)) *server {
	s := &server{data: data, etag: `"` + sha(data)[:16] + `"`, script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, r.Header.Clone())
		s.mu.Unlock()
		w.Header().Set("ETag", s.etag)
		if n < len(s.script) && s.script[n] != nil {
			s.script[n](w, r, s.data)
			return
		}
		serveNormally(w, r, s.data)
	}))
	t.Cleanup(s.Close)
	return s
}

func serveNormally(w http.ResponseWriter, r *http.Request, data []byte) {
	http.ServeContent(w, r, "", time.Unix(1700000000, 0), bytes.NewReader(data))
}

// requests returns the headers of the requests received so far.
func (s *server) requests() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.reqs...)
}

func (s *server) url(name string) string { return s.URL + "/" + name }

// dropAfter sends the first n bytes of a full answer, then breaks the
// connection.
func dropAfter(n int) func(w http.ResponseWriter, r *http.Request, data []byte) {
	return func(w http.ResponseWriter, r *http.Request, data []byte) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:n])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
}

// status answers with code and an optional Retry-After.
func status(code int, retryAfter string) func(w http.ResponseWriter, r *http.Request, data []byte) {
	return func(w http.ResponseWriter, r *http.Request, data []byte) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		http.Error(w, http.StatusText(code), code)
	}
}

// ignoreRange answers 200 with the whole archive whatever the request asks.
func ignoreRange(w http.ResponseWriter, r *http.Request, data []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

// testClient is a client with a private cache, fast retries and logs in the
// test output.
func testClient(t *testing.T, mod func(*Options)) *Client {
	t.Helper()
	opts := Options{
		CacheDir:     t.TempDir(),
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 5 * time.Millisecond,
		StallTimeout: 5 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&opts)
	}
	c, err := NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func request(u string, data []byte) Request {
	return Request{Name: filepath.Base(u), URL: u, SHA256: sha(data), Size: int64(len(data))}
}

// decoders lists the xz decoders to test: pure Go always, the system xz when
// present (required when CUDADEPS_REQUIRE_ORACLES=1).
func decoders(t *testing.T) map[string]decoder {
	t.Helper()
	out := map[string]decoder{"go": {}}
	if p, err := exec.LookPath("xz"); err == nil {
		out["system"] = decoder{xz: p}
	} else {
		t.Run("system", func(t *testing.T) {
			lddtest.Need(t, false, "xz is not on PATH: the system-xz cases are skipped")
		})
	}
	return out
}

// mustNotExist fails if p exists.
func mustNotExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v); it should not", p, err)
	}
}

// readAll reads a file or fails.
func readAll(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
