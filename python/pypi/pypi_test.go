package pypi

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// wheel builds a wheel of project at version whose library has body.
func wheel(t *testing.T, project, version, lib string, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	dist := strings.ReplaceAll(project, "-", "_") + "-" + version + ".dist-info"
	files := map[string][]byte{
		"nvidia/cudnn/lib/" + lib: body,
		dist + "/METADATA":        []byte("Metadata-Version: 2.1\nName: " + project + "\nVersion: " + version + "\n"),
		dist + "/WHEEL":           []byte("Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"),
	}
	var record strings.Builder
	for _, name := range []string{"nvidia/cudnn/lib/" + lib, dist + "/METADATA", dist + "/WHEEL"} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(files[name])
		s := sha256.Sum256(files[name])
		fmt.Fprintf(&record, "%s,sha256=%x,%d\n", name, s, len(files[name]))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", dist)
	w, _ := zw.Create(dist + "/RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func hexSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// index is a simple index on 127.0.0.1 serving one project's files, as
// JSON (PEP 691) or HTML (PEP 503) as the request and mode ask.
type index struct {
	*httptest.Server
	mu      sync.Mutex
	files   map[string][]byte // file name → bytes
	hashes  map[string]string // file name → sha256 the index gives (default: the real one)
	mode    string            // "json", "html", or "" (by Accept)
	project string
	reqs    []string
}

func newIndex(t *testing.T, project string, files map[string][]byte) *index {
	ix := &index{files: files, hashes: map[string]string{}, project: project}
	ix.Server = httptest.NewServer(http.HandlerFunc(ix.serve))
	t.Cleanup(ix.Close)
	return ix
}

func (ix *index) serve(w http.ResponseWriter, r *http.Request) {
	ix.mu.Lock()
	ix.reqs = append(ix.reqs, r.Method+" "+r.URL.Path)
	ix.mu.Unlock()
	if name, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
		b, ok := ix.files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, name, time.Unix(1700000000, 0), bytes.NewReader(b))
		return
	}
	if r.URL.Path == "/simple/"+pymeta.NormalizeName(ix.project) && !strings.HasSuffix(r.URL.Path, "/") {
		http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
		return
	}
	if r.URL.Path != "/simple/"+pymeta.NormalizeName(ix.project)+"/" {
		http.NotFound(w, r)
		return
	}
	var names []string
	for name := range ix.files {
		names = append(names, name)
	}
	mode := ix.mode
	if mode == "" {
		mode = "html"
		if strings.Contains(r.Header.Get("Accept"), typeJSON) {
			mode = "json"
		}
	}
	hash := func(name string) string {
		if h, ok := ix.hashes[name]; ok {
			return h
		}
		return hexSHA(ix.files[name])
	}
	if mode == "json" {
		type jf struct {
			Filename string            `json:"filename"`
			URL      string            `json:"url"`
			Hashes   map[string]string `json:"hashes"`
			Size     int               `json:"size"`
			Yanked   any               `json:"yanked"`
		}
		page := struct {
			Meta  map[string]string `json:"meta"`
			Name  string            `json:"name"`
			Files []jf              `json:"files"`
		}{Meta: map[string]string{"api-version": "1.1"}, Name: pymeta.NormalizeName(ix.project)}
		for _, n := range names {
			page.Files = append(page.Files, jf{Filename: n, URL: "../../files/" + n, Hashes: map[string]string{"sha256": hash(n)}, Size: len(ix.files[n]), Yanked: false})
		}
		w.Header().Set("Content-Type", typeJSON)
		json.NewEncoder(w).Encode(page)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>Links for %s</title></head><body>\n<h1>Links for %s</h1>\n", ix.project, ix.project)
	for _, n := range names {
		fmt.Fprintf(w, "<a href=\"/files/%s#sha256=%s\" data-requires-python=\"%s\">%s</a><br/>\n", n, hash(n), html.EscapeString(">=3.9"), html.EscapeString(n))
	}
	fmt.Fprint(w, "<!-- <a href=\"/files/evil.whl\">evil.whl</a> -->\n</body></html>\n")
}

func (ix *index) requests() []string {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return append([]string(nil), ix.reqs...)
}

const project = "nvidia-cudnn-cu13"

// files of a release as NVIDIA publishes them, plus ones that must not be
// chosen on a glibc 2.35 x86_64 host.
func releaseFiles(t *testing.T) map[string][]byte {
	return map[string][]byte{
		"nvidia_cudnn_cu13-9.19.0.56-py3-none-manylinux_2_27_x86_64.whl":                         wheel(t, project, "9.19.0.56", "libcudnn.so.9", []byte("x86_64 2.27")),
		"nvidia_cudnn_cu13-9.19.0.56-py3-none-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl": wheel(t, project, "9.19.0.56", "libcudnn.so.9", []byte("aarch64")),
		"nvidia_cudnn_cu13-9.19.0.56-py3-none-manylinux_2_39_x86_64.whl":                         wheel(t, project, "9.19.0.56", "libcudnn.so.9", []byte("x86_64 2.39")),
		"nvidia_cudnn_cu13-9.19.0.56-py3-none-musllinux_1_2_x86_64.whl":                          wheel(t, project, "9.19.0.56", "libcudnn.so.9", []byte("musl")),
		"nvidia_cudnn_cu13-9.18.0.1-py3-none-manylinux2014_x86_64.whl":                           wheel(t, project, "9.18.0.1", "libcudnn.so.9", []byte("older")),
		"nvidia_cudnn_cu13-9.19.0.56.tar.gz":                                                     []byte("an sdist"),
	}
}

var glibc235 = Host{Machine: "x86_64", Glibc: "2.35"}

// The wheel for the host is found on a local index, as JSON and as HTML,
// chosen by its tags, verified by the index's sha256, and installed.
func TestInstallFromSimpleIndex(t *testing.T) {
	for _, mode := range []string{"json", "html"} {
		t.Run(mode, func(t *testing.T) {
			ix := newIndex(t, project, releaseFiles(t))
			ix.mode = mode
			c, err := NewClient(Options{Indexes: []string{ix.URL + "/simple"}})
			if err != nil {
				t.Fatal(err)
			}
			files, err := c.Files(context.Background(), "NVIDIA_cuDNN.cu13")
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 6 {
				t.Fatalf("%d files: %+v", len(files), files)
			}
			for _, f := range files {
				if f.SHA256 != hexSHA(ix.files[f.Filename]) || strings.Contains(f.URL, "#") || !strings.HasPrefix(f.URL, ix.URL+"/files/") {
					t.Errorf("file %+v", f)
				}
				if mode == "html" && f.RequiresPython != ">=3.9" {
					t.Errorf("requires-python %q", f.RequiresPython)
				}
			}
			f, w, err := Choose(files, project, "9.19.0.56", glibc235)
			if err != nil || f.Filename != "nvidia_cudnn_cu13-9.19.0.56-py3-none-manylinux_2_27_x86_64.whl" {
				t.Fatalf("chose %s, %v", f.Filename, err)
			}
			s, err := fetch.OpenStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			fc, err := fetch.NewClient(fetch.Options{CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			e, err := c.Install(context.Background(), s, fc, w.Key(), f)
			if err != nil {
				t.Fatal(err)
			}
			if e.Layout != fetch.LayoutWheel || e.Key.Component != project || e.Version != "9.19.0.56" {
				t.Errorf("entry %+v", e)
			}
			got, err := os.ReadFile(filepath.Join(e.Dir, "nvidia", "cudnn", "lib", "libcudnn.so.9"))
			if err != nil || string(got) != "x86_64 2.27" {
				t.Fatalf("library: %q, %v", got, err)
			}
			heads := 0
			for _, r := range ix.requests() {
				if strings.HasPrefix(r, "HEAD ") {
					heads++
				}
			}
			if want := map[string]int{"json": 0, "html": 1}[mode]; heads != want {
				t.Errorf("%d HEAD requests; want %d (the HTML page gives no size)", heads, want)
			}
		})
	}
}

// Tags decide: the highest manylinux level the host's glibc allows, the
// host's machine, musllinux only on musl; the error says what there is.
func TestChoose(t *testing.T) {
	var files []File
	for name := range releaseFiles(t) {
		files = append(files, File{Filename: name})
	}
	cases := []struct {
		host    Host
		version string
		want    string // file chosen, or a part of the error
	}{
		{glibc235, "9.19.0.56", "nvidia_cudnn_cu13-9.19.0.56-py3-none-manylinux_2_27_x86_64.whl"},
		{Host{Machine: "x86_64", Glibc: "2.39"}, "9.19.0.56", "nvidia_cudnn_cu13-9.19.0.56-py3-none-manylinux_2_39_x86_64.whl"},
		{Host{Machine: "aarch64", Glibc: "2.28"}, "9.19.0.56", "nvidia_cudnn_cu13-9.19.0.56-py3-none-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl"},
		{Host{Machine: "x86_64", Musl: "1.2"}, "9.19.0.56", "nvidia_cudnn_cu13-9.19.0.56-py3-none-musllinux_1_2_x86_64.whl"},
		{Host{Machine: "x86_64", Glibc: "2.17"}, "9.18.0.1", "nvidia_cudnn_cu13-9.18.0.1-py3-none-manylinux2014_x86_64.whl"},
		{Host{Machine: "x86_64", Glibc: "2.17"}, "9.19.0.56", "needs glibc 2.27"},
		{Host{Machine: "aarch64", Glibc: "2.17"}, "9.19.0.56", "no wheel for this host (linux aarch64, glibc 2.17)"},
		{Host{Machine: "x86_64", Glibc: "2.35"}, "9.99", "the index has no wheel of this version"},
	}
	for _, c := range cases {
		f, _, err := Choose(files, "nvidia-cudnn-cu13", c.version, c.host)
		got := f.Filename
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s %s: got %q; want %q", c.host, c.version, got, c.want)
		}
	}
	// musllinux alone on a glibc host: refused, and said why.
	musl := []File{{Filename: "nvidia_cudnn_cu13-9.19.0.56-py3-none-musllinux_1_2_x86_64.whl"}}
	if _, _, err := Choose(musl, project, "9.19.0.56", glibc235); err == nil || !strings.Contains(err.Error(), "for musl, and this host's C library is glibc") {
		t.Errorf("musllinux on glibc: %v", err)
	}
	// Interpreter-specific wheels need the host's Python.
	cp := []File{{Filename: "cupy_cuda13x-13.6.0-cp312-cp312-manylinux2014_x86_64.whl"}, {Filename: "cupy_cuda13x-13.6.0-cp311-cp311-manylinux2014_x86_64.whl"}}
	if f, _, err := Choose(cp, "cupy-cuda13x", "13.6.0", Host{Machine: "x86_64", Glibc: "2.35", Python: "3.11"}); err != nil || !strings.Contains(f.Filename, "cp311") {
		t.Errorf("cp311 host chose %s, %v", f.Filename, err)
	}
	if _, _, err := Choose(cp, "cupy-cuda13x", "13.6.0", glibc235); err == nil || !strings.Contains(err.Error(), "another Python") {
		t.Errorf("no Python given: %v", err)
	}
}

// A sha256 on the index that the bytes do not match installs nothing; a
// file without any sha256 is refused before it is downloaded.
func TestInstallVerifiesIndexHash(t *testing.T) {
	files := releaseFiles(t)
	name := "nvidia_cudnn_cu13-9.19.0.56-py3-none-manylinux_2_27_x86_64.whl"
	ix := newIndex(t, project, files)
	ix.hashes[name] = strings.Repeat("ab", 32)
	c, err := NewClient(Options{Indexes: []string{ix.URL + "/simple/"}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.Files(context.Background(), project)
	if err != nil {
		t.Fatal(err)
	}
	f, w, err := Choose(list, project, "9.19.0.56", glibc235)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := fetch.OpenStore(t.TempDir())
	fc, _ := fetch.NewClient(fetch.Options{CacheDir: t.TempDir()})
	_, err = c.Install(context.Background(), s, fc, w.Key(), f)
	var ve *fetch.VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v; want a VerifyError", err)
	}
	if _, ok, _ := s.Lookup(w.Key()); ok {
		t.Error("installed")
	}
	f.SHA256 = ""
	before := len(ix.requests())
	if _, err := c.Install(context.Background(), s, fc, w.Key(), f); err == nil || !strings.Contains(err.Error(), "no sha256") {
		t.Errorf("without a sha256: %v", err)
	}
	if len(ix.requests()) != before {
		t.Error("a file without a sha256 was asked for")
	}
}

// Unknown projects, unsafe names and plain http to another host are
// refused with clear errors.
func TestIndexErrors(t *testing.T) {
	ix := newIndex(t, project, releaseFiles(t))
	c, err := NewClient(Options{Indexes: []string{ix.URL + "/simple/"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Files(context.Background(), "nvidia-nothing"); !errors.Is(err, ErrNoProject) {
		t.Errorf("unknown project: %v", err)
	}
	if _, err := c.Files(context.Background(), "../etc"); err == nil || !strings.Contains(err.Error(), "not a valid Python project name") {
		t.Errorf("bad name: %v", err)
	}
	if _, err := NewClient(Options{Indexes: []string{"http://pypi.example.com/simple/"}}); err == nil || !strings.Contains(err.Error(), "plain http") {
		t.Errorf("plain http: %v", err)
	}
	if _, err := NewClient(Options{}); err == nil {
		t.Error("no index accepted")
	}
}

// pip's configuration: files in pip's order, [install] over [global],
// environment variables over files, PIP_CONFIG_FILE=/dev/null for none.
func TestPipIndexes(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	venv := filepath.Join(root, "venv")
	write := func(p, s string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "xdg", "pip", "pip.conf"), "[global]\nindex-url = https://global.example/simple/\n")
	write(filepath.Join(home, ".pip", "pip.conf"), "[global]\nindex-url = https://legacy.example/simple/\n")
	write(filepath.Join(home, ".config", "pip", "pip.conf"), "# user\n[global]\nindex_url: https://user.example/simple/\n\n[install]\nextra-index-url =\n    https://extra1.example/simple/\n    https://extra2.example/simple/\n[freeze]\nindex-url = https://freeze.example/\n")
	env := map[string]string{"HOME": home, "XDG_CONFIG_DIRS": filepath.Join(root, "xdg")}
	getenv := func(k string) string { return env[k] }
	cfg := PipConfig{Getenv: getenv, Prefix: venv, EtcDir: filepath.Join(root, "etc")}
	check := func(what, index string, extra ...string) {
		t.Helper()
		ix, err := PipIndexes(cfg)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ix.Index != index || strings.Join(ix.Extra, " ") != strings.Join(extra, " ") {
			t.Errorf("%s: index %q, extra %q (from %q); want %q, %q", what, ix.Index, ix.Extra, ix.Sources, index, extra)
		}
	}
	check("user over legacy over global", "https://user.example/simple/", "https://extra1.example/simple/", "https://extra2.example/simple/")
	write(filepath.Join(venv, "pip.conf"), "[install]\nindex-url = https://site.example/simple/\nextra-index-url =\n")
	check("site over user", "https://site.example/simple/")
	env["PIP_INDEX_URL"] = "https://env.example/simple/"
	env["PIP_EXTRA_INDEX_URL"] = "https://e1.example/ https://e2.example/"
	check("environment over files", "https://env.example/simple/", "https://e1.example/", "https://e2.example/")
	delete(env, "PIP_INDEX_URL")
	delete(env, "PIP_EXTRA_INDEX_URL")
	env["PIP_CONFIG_FILE"] = os.DevNull
	check("no files", DefaultIndex)
	env["PIP_CONFIG_FILE"] = filepath.Join(root, "explicit.conf")
	write(env["PIP_CONFIG_FILE"], "[global]\nindex-url = https://explicit.example/simple/\n")
	os.Remove(filepath.Join(venv, "pip.conf"))
	check("PIP_CONFIG_FILE first, overridden by the user's", "https://user.example/simple/", "https://extra1.example/simple/", "https://extra2.example/simple/")
	os.RemoveAll(filepath.Join(home, ".config"))
	os.RemoveAll(filepath.Join(home, ".pip"))
	check("PIP_CONFIG_FILE overridden by the global", "https://global.example/simple/")
	write(filepath.Join(root, "etc", "pip.conf"), "[global]\nindex-url = https://etc.example/simple/\n")
	check("/etc/pip.conf after $XDG_CONFIG_DIRS", "https://etc.example/simple/")
	os.RemoveAll(filepath.Join(root, "xdg"))
	os.RemoveAll(filepath.Join(root, "etc"))
	check("PIP_CONFIG_FILE alone", "https://explicit.example/simple/")
	write(env["PIP_CONFIG_FILE"], "[global]\nindex-url = https://explicit.example/simple/\nno-index = true\n")
	check("no-index", "")
	write(filepath.Join(venv, "pip.conf"), "index-url = x\n")
	if _, err := PipIndexes(cfg); err == nil || !strings.Contains(err.Error(), "before any [section]") {
		t.Errorf("a broken file: %v", err)
	}
}

// TestPipIndexesRefusesFIFO checks that a pip.conf that is a FIFO is refused
// at once, naming it, instead of waiting for a writer.
func TestPipIndexesRefusesFIFO(t *testing.T) {
	root := t.TempDir()
	fifo := filepath.Join(root, "pip.conf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PIP_CONFIG_FILE": fifo, "HOME": filepath.Join(root, "home"), "XDG_CONFIG_DIRS": filepath.Join(root, "xdg")}
	cfg := PipConfig{Getenv: func(k string) string { return env[k] }, Prefix: filepath.Join(root, "venv"), EtcDir: filepath.Join(root, "etc")}
	done := make(chan error, 1)
	go func() {
		_, err := PipIndexes(cfg)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("PipIndexes with a FIFO: %v, want it refused, naming the file", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("PipIndexes waits on a FIFO")
	}
}

// TestInstallFromFileIndex: an index written to a directory (as cudadeps
// mirror writes simple/) is read through file:// URLs: its pages, the
// wheels' sizes and the wheels themselves.
func TestInstallFromFileIndex(t *testing.T) {
	dir := t.TempDir()
	files := releaseFiles(t)
	var page strings.Builder
	for name, data := range files {
		if err := os.MkdirAll(filepath.Join(dir, "files"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "files", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&page, "<a href=\"../../files/%s#sha256=%s\">%s</a><br>\n", name, hexSHA(data), name)
	}
	if err := os.MkdirAll(filepath.Join(dir, "simple", project), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "simple", project, "index.html"), []byte(page.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Options{Indexes: []string{"file://" + filepath.ToSlash(dir) + "/simple/"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Files(context.Background(), "nvidia-nccl-cu13"); !errors.Is(err, ErrNoProject) {
		t.Fatalf("a project the directory lacks: %v", err)
	}
	list, err := c.Files(context.Background(), project)
	if err != nil || len(list) != len(files) {
		t.Fatalf("%d files (%v)", len(list), err)
	}
	f, w, err := Choose(list, project, "9.19.0.56", glibc235)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fetch.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fc, err := fetch.NewClient(fetch.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.Install(context.Background(), s, fc, w.Key(), f)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(e.Dir, "nvidia", "cudnn", "lib", "libcudnn.so.9")); err != nil || string(got) != "x86_64 2.27" {
		t.Fatalf("library: %q, %v", got, err)
	}
}

// TestChooseOnJetson: on an L4T CUDA 12 Jetson, NVIDIA's aarch64 wheels
// are refused, each with the one-line reason, though their tags fit; other
// projects' aarch64 wheels are not, and an SBSA host takes NVIDIA's.
func TestChooseOnJetson(t *testing.T) {
	files := []File{
		{Filename: "nvidia_cusparselt_cu12-0.6.3-py3-none-manylinux2014_aarch64.whl"},
		{Filename: "nvidia_cusparselt_cu12-0.6.3-py3-none-manylinux2014_x86_64.whl"},
	}
	orin := Host{Machine: "aarch64", Glibc: "2.35", JetsonL4T: "Jetson Orin (Tegra234) with L4T R36.4.7"}
	_, _, err := Choose(files, "nvidia-cusparselt-cu12", "0.6.3", orin)
	want := "nvidia_cusparselt_cu12-0.6.3-py3-none-manylinux2014_aarch64.whl (an SBSA build, for Arm servers: it does not run on this Jetson Orin (Tegra234) with L4T R36.4.7"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Jetson: %v; want one line with %q", err, want)
	}
	orin.JetsonL4T = ""
	if f, _, err := Choose(files, "nvidia-cusparselt-cu12", "0.6.3", orin); err != nil || !strings.HasSuffix(f.Filename, "aarch64.whl") {
		t.Errorf("an SBSA host: %s, %v", f.Filename, err)
	}
	orin.JetsonL4T = "Jetson Orin (Tegra234) with L4T R36.4.7"
	other := []File{{Filename: "numpy-2.3.0-cp312-cp312-manylinux_2_27_aarch64.whl"}}
	if _, _, err := Choose(other, "numpy", "2.3.0", Host{Machine: "aarch64", Glibc: "2.35", Python: "3.12", JetsonL4T: orin.JetsonL4T}); err != nil {
		t.Errorf("a project that is not NVIDIA's on a Jetson: %v", err)
	}
}
