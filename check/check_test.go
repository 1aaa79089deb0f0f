package check

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/resolver"
)

func embedded(ctx context.Context) (*catalog.Catalog, error) {
	return catalog.Load(ctx, catalog.LoadOptions{})
}

func noEnv() ldso.Options {
	empty := ""
	return ldso.Options{LDLibraryPath: &empty, PreloadSet: true}
}

// lib writes a shared object for this host.
func lib(t *testing.T, path string, spec elfwrite.Spec) {
	t.Helper()
	spec.Machine = elf.EM_X86_64
	if err := elfwrite.Write(path, spec); err != nil {
		t.Fatal(err)
	}
}

// TestCheckFile checks one library through every change that matters to
// it, each time against the real loader: the answer comes from cache while
// nothing changed, and is computed again, right, after a library is added
// to a directory searched before the one it was found in, removed, made
// unreadable as ELF, or when LD_LIBRARY_PATH or the cache itself change.
func TestCheckFile(t *testing.T) {
	ldsoPath, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so")
	dir := t.TempDir()
	root := filepath.Join(dir, "pkg/libroot.so")
	lib(t, root, elfwrite.Spec{Soname: "libroot.so", Needed: []string{"libx.so", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN/first:$ORIGIN/second")})
	lib(t, filepath.Join(dir, "pkg/second/libx.so"), elfwrite.Spec{Soname: "libx.so", Needed: []string{"libc.so.6"}})
	if err := os.MkdirAll(filepath.Join(dir, "pkg/first"), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := factcache.At(filepath.Join(dir, "cache"))
	ctx := context.Background()
	opts := Options{Target: root, Loader: noEnv(), Catalog: embedded, Cache: cache, Timeout: time.Minute}
	ask := func(wantCached bool) *Result {
		t.Helper()
		r, err := runWithin(ctx, opts, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Cached != wantCached {
			t.Fatalf("cached %v, want %v", r.Cached, wantCached)
		}
		want, err := lddtest.List(ctx, ldsoPath, root, []string{"LD_LIBRARY_PATH="})
		if err != nil {
			t.Fatal(err)
		}
		whole := want.Fatal == ""
		for _, l := range want.Lines {
			whole = whole && !l.NotFound
		}
		if r.OK != whole {
			t.Fatalf("check says ok=%v with problems %v; ld.so:\n%s", r.OK, r.Problems, want.Raw)
		}
		return r
	}
	ask(false)
	ask(true)

	// Found first now: the directory searched in vain before changed.
	lib(t, filepath.Join(dir, "pkg/first/libx.so"), elfwrite.Spec{Soname: "libx.so", Needed: []string{"libc.so.6"}})
	ask(false)
	ask(true)

	os.Remove(filepath.Join(dir, "pkg/first/libx.so"))
	os.Remove(filepath.Join(dir, "pkg/second/libx.so"))
	r := ask(false)
	if len(r.Problems) != 1 || r.Problems[0].Kind != resolver.ProblemMissing || r.Problems[0].Subject != "libx.so" {
		t.Fatalf("problems %v, want libx.so missing", r.Problems)
	}
	ask(true)

	// A file rewritten in place, same name: no longer a library.
	lib(t, filepath.Join(dir, "pkg/second/libx.so"), elfwrite.Spec{Soname: "libx.so", Needed: []string{"libc.so.6"}})
	ask(false)
	if err := os.WriteFile(filepath.Join(dir, "pkg/second/libx.so"), []byte("\x7fELF but no more"), 0o755); err != nil {
		t.Fatal(err)
	}
	ask(false)

	opts.Loader.LDLibraryPath = new(string)
	*opts.Loader.LDLibraryPath = filepath.Join(dir, "pkg")
	ask(false)
	ask(true)

	for _, e := range mustReadDir(t, cache.Path()) {
		if err := os.WriteFile(filepath.Join(cache.Path(), e), []byte("damaged"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ask(false)
	ask(true)
}

// TestCheckPython checks a distribution of a real interpreter's environment
// whose extension module needs a library of another distribution: whole,
// then from cache; a file its RECORD lists removed, and it says which.
func TestCheckPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		lddtest.Need(t, false, "python3 -m venv: %v: %s", err, out)
	}
	site := sitePackages(t, venv)
	writeDist(t, site, "gpupkg", "1.0", []string{"libdep==2.0"}, map[string]elfwrite.Spec{
		"gpupkg/_core.cpython-3-x86_64-linux-gnu.so": {Needed: []string{"libdep.so.2", "libc.so.6"}, RPath: elfwrite.Str("$ORIGIN/../libdep/lib")},
	})
	writeDist(t, site, "libdep", "2.0", nil, map[string]elfwrite.Spec{
		"libdep/lib/libdep.so.2": {Soname: "libdep.so.2", Needed: []string{"libc.so.6"}},
	})
	cache := factcache.At(filepath.Join(dir, "cache"))
	ctx := context.Background()
	opts := Options{Target: "gpupkg", Python: filepath.Join(venv, "bin", "python3"), Loader: noEnv(), Catalog: embedded, Cache: cache}
	for i, wantCached := range []bool{false, true} {
		r, err := runWithin(ctx, opts, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK || r.Cached != wantCached {
			t.Fatalf("run %d: ok %v cached %v, problems %v", i, r.OK, r.Cached, r.Problems)
		}
	}
	if err := os.Remove(filepath.Join(site, "libdep/lib/libdep.so.2")); err != nil {
		t.Fatal(err)
	}
	r, err := runWithin(ctx, opts, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range r.Problems {
		got = append(got, string(p.Kind)+" "+p.Subject)
	}
	if r.OK || r.Cached || !strings.Contains(strings.Join(got, "\n"), "missing libdep.so.2") || !strings.Contains(strings.Join(got, "\n"), "missing_files libdep") {
		t.Fatalf("after removing libdep.so.2: ok %v cached %v, problems %q", r.OK, r.Cached, got)
	}
}

// A wrapper that runs one of two environments by a variable no key part
// names (as a pyenv shim picks by PYENV_VERSION): each answer is the
// environment the wrapper runs now, a healthy one and one missing a
// library, and each is answered from cache when the wrapper picks it
// again.
func TestCheckFollowsWrapperChoice(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	dir := t.TempDir()
	for _, v := range []string{"whole", "broken"} {
		venv := filepath.Join(dir, v)
		if out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
			lddtest.Need(t, false, "python3 -m venv: %v: %s", err, out)
		}
		site := sitePackages(t, venv)
		writeDist(t, site, "gpupkg", "1.0", []string{"libdep==2.0"}, map[string]elfwrite.Spec{
			"gpupkg/_core.cpython-3-x86_64-linux-gnu.so": {Needed: []string{"libdep.so.2", "libc.so.6"}, RPath: elfwrite.Str("$ORIGIN/../libdep/lib")},
		})
		files := map[string]elfwrite.Spec{"libdep/lib/libdep.so.2": {Soname: "libdep.so.2", Needed: []string{"libc.so.6"}}}
		if v == "broken" {
			files = map[string]elfwrite.Spec{"libdep/lib/other.so": {Soname: "other.so", Needed: []string{"libc.so.6"}}}
		}
		writeDist(t, site, "libdep", "2.0", nil, files)
	}
	// The wrapper counts its runs: a shim takes tens of milliseconds.
	wrapper, count := filepath.Join(dir, "python"), filepath.Join(dir, "runs")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\necho >>\"$FAKEPY_COUNT\"\n"+`exec "$FAKEPY_HOME/bin/python3" "$@"`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKEPY_COUNT", count)
	runs := func() int {
		data, _ := os.ReadFile(count)
		os.Remove(count)
		return strings.Count(string(data), "\n")
	}
	// What the interpreter's own questions cost, asked without a check.
	t.Setenv("FAKEPY_HOME", filepath.Join(dir, "whole"))
	if _, err := pyenv.Discover(context.Background(), wrapper); err != nil {
		t.Fatal(err)
	}
	asked := runs()
	opts := Options{Target: "gpupkg", Python: wrapper, Loader: noEnv(), Catalog: embedded, Cache: factcache.At(filepath.Join(dir, "cache"))}
	for i, step := range []struct {
		env            string
		ok, wantCached bool
	}{{"whole", true, false}, {"broken", false, false}, {"whole", true, true}, {"broken", false, true}, {"whole", true, true}} {
		t.Setenv("FAKEPY_HOME", filepath.Join(dir, step.env))
		r, err := runWithin(context.Background(), opts, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK != step.ok || r.Cached != step.wantCached {
			t.Fatalf("step %d, the wrapper running %s: ok %v cached %v (want %v, %v), problems %v", i, step.env, r.OK, r.Cached, step.ok, step.wantCached, r.Problems)
		}
		// Once for the key, and for a miss what the interpreter is asked.
		want := 1
		if !step.wantCached {
			want += asked
		}
		if n := runs(); n != want {
			t.Errorf("step %d: the wrapper ran %d times, want %d", i, n, want)
		}
	}
}

// TestCheckImport runs the import beside the analysis: a passing import is
// answered from cache while nothing it reads changed; a module of the
// package edited in place (no directory changes) is seen, and a failing
// import is never kept: it runs again each time.
func TestCheckImport(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		lddtest.Need(t, false, "python3 -m venv: %v: %s", err, out)
	}
	site := sitePackages(t, venv)
	initPy := filepath.Join(site, "gpupkg", "__init__.py")
	writeDistFiles(t, site, "gpupkg", "1.0", nil, map[string]elfwrite.Spec{
		"gpupkg/_core.cpython-3-x86_64-linux-gnu.so": {Needed: []string{"libc.so.6"}},
	}, map[string]string{"gpupkg/__init__.py": "answer = 42\n", "gpupkg/include/gpupkg.h": "int answer(void);\n", "gpupkg/__init__.pyi": "answer: int\n"})
	python := filepath.Join(venv, "bin", "python3")
	opts := Options{Target: "gpupkg", Python: python, Loader: noEnv(), Catalog: embedded, Cache: factcache.At(filepath.Join(dir, "cache")),
		Import: []string{python, "-c", "import gpupkg"}, ImportTimeout: time.Minute}
	ctx := context.Background()
	checkOnce := func(what string, wantOK, wantCached bool) *Result {
		t.Helper()
		r, err := runWithin(ctx, opts, 0)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if r.Import == nil || r.Import.OK != wantOK || r.Cached != wantCached || !r.OK {
			t.Fatalf("%s: import %+v, cached %v (want ok %v, cached %v), ok %v %v", what, r.Import, r.Cached, wantOK, wantCached, r.OK, r.Problems)
		}
		return r
	}
	first := checkOnce("first", true, false)
	again := checkOnce("nothing changed", true, true)
	if !again.Import.At.Equal(first.Import.At) || again.Import.Command != python+" -c import gpupkg" {
		t.Errorf("cached import %+v, want the first's %+v", again.Import, first.Import)
	}
	if err := os.WriteFile(initPy, []byte("raise ImportError('gpupkg is broken')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"module edited in place", "still broken"} {
		if r := checkOnce(what, false, false); r.Import.LastLine != "ImportError: gpupkg is broken" {
			t.Errorf("%s: last line %q", what, r.Import.LastLine)
		}
	}
	if err := os.WriteFile(initPy, []byte("answer = 43\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkOnce("repaired", true, false)
	checkOnce("repaired, again", true, true)
	// No import reads a header or a type stub: one edited in place is
	// not stat'ed; one added beside them changes their directory.
	header := filepath.Join(site, "gpupkg", "include", "gpupkg.h")
	if err := os.WriteFile(header, []byte("long answer(void);\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkOnce("header edited in place", true, true)
	if err := os.WriteFile(filepath.Join(site, "gpupkg", "include", "more.h"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	checkOnce("header added", true, false)
	checkOnce("header added, again", true, true)
	// Without the import, the answer is another one, with no import.
	opts.Import = nil
	if r, err := runWithin(ctx, opts, 0); err != nil || r.Import != nil || r.Cached {
		t.Fatalf("without the import: %+v, %v", r, err)
	}
}

// TestImportInputs: an import's inputs are the distribution's modules and
// data, and the directories of the files no import reads.
func TestImportInputs(t *testing.T) {
	got := importInputs([]string{"/s/torch/__init__.py", "/s/torch/include/ATen/ATen.h", "/s/torch/include/ATen/Tensor.h",
		"/s/torch/_C/__init__.pyi", "/s/torch/lib/libtorch.so", "/s/torch/share/cmake/Torch/TorchConfig.cmake", "/s/torch/bin/torch_shm_manager",
		"/s/torch/utils/model_dump/code.js", "/s/torch.d/LICENSE"})
	want := []string{"/s/torch/__init__.py", "/s/torch/include/ATen", "/s/torch/include/ATen", "/s/torch/_C", "/s/torch/lib/libtorch.so",
		"/s/torch/share/cmake/Torch", "/s/torch/bin/torch_shm_manager", "/s/torch/utils/model_dump/code.js", "/s/torch.d/LICENSE"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestCheckWithoutCache: an unwritable cache, or none, still answers.
func TestCheckWithoutCache(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "libroot.so")
	lib(t, root, elfwrite.Spec{Soname: "libroot.so", Needed: []string{"libc.so.6"}})
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cache := range []factcache.Dir{{}, factcache.At(filepath.Join(blocker, "cache"))} {
		for range 2 {
			r, err := runWithin(context.Background(), Options{Target: root, Loader: noEnv(), Catalog: embedded, Cache: cache}, 0)
			if err != nil || !r.OK || r.Cached {
				t.Fatalf("cache %q: %+v, %v", cache.Path(), r, err)
			}
		}
	}
}

// TestCheckTimeout: past its budget, check ends with ErrTimeout, whatever
// the analysis is doing.
func TestCheckTimeout(t *testing.T) {
	slow := func(ctx context.Context) (*catalog.Catalog, error) {
		time.Sleep(time.Second) // a catalog on a hung file system
		return nil, errors.New("too late")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "libroot.so")
	lib(t, root, elfwrite.Spec{Soname: "libroot.so"})
	start := time.Now()
	_, err := Run(context.Background(), Options{Target: root, Loader: noEnv(), Catalog: slow, Timeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("after %s: %v, want ErrTimeout at once", time.Since(start), err)
	}
}

func sitePackages(t *testing.T, venv string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	if len(m) != 1 {
		t.Fatalf("site-packages of %s: %v", venv, m)
	}
	return m[0]
}

// writeDist installs a distribution as pip would: its files, METADATA and
// a RECORD listing them.
func writeDist(t *testing.T, site, name, version string, requires []string, objs map[string]elfwrite.Spec) {
	t.Helper()
	writeDistFiles(t, site, name, version, requires, objs, nil)
}

// writeDistFiles is writeDist with more files (Python modules) by content.
func writeDistFiles(t *testing.T, site, name, version string, requires []string, objs map[string]elfwrite.Spec, more map[string]string) {
	t.Helper()
	info := fmt.Sprintf("%s-%s.dist-info", name, version)
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := map[string][]byte{info + "/METADATA": []byte(meta)}
	for p, spec := range objs {
		spec.Machine = elf.EM_X86_64
		b, err := elfwrite.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = b
	}
	for p, text := range more {
		files[p] = []byte(text)
	}
	var names []string
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	var record strings.Builder
	for _, p := range names {
		full := filepath.Join(site, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, files[p], 0o755); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(files[p])
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
	}
	fmt.Fprintf(&record, "%s/RECORD,,\n", info)
	if err := os.WriteFile(filepath.Join(site, info, "RECORD"), []byte(record.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustReadDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// TestCheckInRootsPython checks a distribution of a root's own Python
// (Loader.Root, no interpreter, no site directory named): found in apt's
// dist-packages of Debian's python3, answered from cache while nothing
// changed, and found again, newer, when pip installs it into the
// dist-packages that python3 imports from first.
func TestCheckInRootsPython(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/lib/python3.12"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeDist(t, filepath.Join(root, "usr/lib/python3/dist-packages"), "gpupkg", "1.0", nil, map[string]elfwrite.Spec{"gpupkg/libgpupkg.so": {Soname: "libgpupkg.so"}})
	loader := noEnv()
	loader.Root = root
	opts := Options{Target: "gpupkg", Loader: loader, Catalog: embedded, Cache: factcache.At(filepath.Join(t.TempDir(), "cache"))}
	apt := "gpupkg 1.0 (" + root + "/usr/lib/python3/dist-packages: the root's python3.12 in /usr, Debian's layout)"
	for i, wantCached := range []bool{false, true} {
		r, err := runWithin(context.Background(), opts, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK || r.Cached != wantCached || r.Target != apt {
			t.Fatalf("run %d: ok %v cached %v target %q, problems %v", i, r.OK, r.Cached, r.Target, r.Problems)
		}
	}
	writeDist(t, filepath.Join(root, "usr/local/lib/python3.12/dist-packages"), "gpupkg", "2.0", nil, map[string]elfwrite.Spec{"gpupkg/libgpupkg.so": {Soname: "libgpupkg.so"}})
	r, err := runWithin(context.Background(), opts, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := "gpupkg 2.0 (" + root + "/usr/local/lib/python3.12/dist-packages: the root's python3.12 in /usr, Debian's layout)"; r.Cached || r.Target != want {
		t.Fatalf("after pip installed 2.0: cached %v, target %q, want %q", r.Cached, r.Target, want)
	}
}
