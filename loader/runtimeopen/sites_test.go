package runtimeopen

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// sitesFixture is three site directories in sys.path order: a virtual
// environment's (venv), the user's (user) and the system's (system), NVIDIA's
// libraries spread over them as installs across sites leave them.
type sitesFixture struct {
	venv, user, system string
	l                  *ldso.Loader
}

func newSitesFixture(t *testing.T) *sitesFixture {
	t.Helper()
	dir := t.TempDir()
	f := &sitesFixture{venv: filepath.Join(dir, "venv"), user: filepath.Join(dir, "user"), system: filepath.Join(dir, "system")}
	for site, libs := range map[string][]string{
		f.venv:   {"nvidia/cu13/lib/libcublas.so.13", "pkg/opener.so"},
		f.user:   {"nvidia/cu13/lib/libcudart.so.13", "nvidia/cu13/lib/libcublas.so.13"},
		f.system: {"nvidia/cu13/lib/libcudart.so.13", "nvidia/cu13/lib/libcublas.so.13", "nvidia/nccl/lib/libnccl.so.2"},
	} {
		for _, rel := range libs {
			p := filepath.Join(site, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var err error
	f.l, err = ldso.New(context.Background(), ldso.Options{NoPreloadFile: true, PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *sitesFixture) resolver(t *testing.T, yaml string) *Resolver {
	t.Helper()
	tab, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return NewResolver(tab, f.l).WithSites(Sites{Dirs: []string{f.venv, f.user, f.system}, User: f.user})
}

// Each way of searching the site directories finds what its framework
// finds: torch's search of sys.path the first site with the file, CUDA
// Python's pathfinder the user site first, JAX's import of nvidia.cu13 the
// first site holding nvidia/cu13 only, and the opener's own site-packages
// nothing it lacks.
func TestSitesSearchOrders(t *testing.T) {
	f := newSitesFixture(t)
	opener := filepath.Join(f.venv, "pkg/opener.so")
	for _, c := range []struct {
		sites          string
		cudart, cublas string // where each is found, "" for nowhere
	}{
		{SitesOwn, "", f.venv},
		{SitesSysPath, f.user, f.venv},
		{SitesUserFirst, f.user, f.user},
		{SitesFirstPackage, "", f.venv},
	} {
		r := f.resolver(t, `
- opener_path: pkg/opener.so
  opens: [libcudart.so.13, libcublas.so.13]
  dirs: [nvidia/cu13/lib]
  sites: `+c.sites+`
  preload: true
  source: a fixture's entry, for the test of its sites`)
		got := r.Preloads(opener)
		var want []string
		for _, w := range []struct{ site, lib string }{{c.cudart, "libcudart.so.13"}, {c.cublas, "libcublas.so.13"}} {
			if w.site != "" {
				want = append(want, filepath.Join(w.site, "nvidia/cu13/lib", w.lib))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("sites %s: preloads %v, want %v", c.sites, got, want)
		}
	}
}

// A fallback happens only when the opener's own load misses one of its
// libraries; it then loads them in order, each from where torch's search
// finds it, and stops at the first required one no site has.
func TestSitesFallback(t *testing.T) {
	f := newSitesFixture(t)
	r := f.resolver(t, `
- opener_path: pkg/opener.so
  opens: [libcudart.so.13, "libnccl.so.*[0-9]", libcufft.so.12, libcublas.so.13]
  dirs: [nvidia/cu13/lib, nvidia/nccl/lib]
  sites: sys_path
  fallback: true
  source: a fixture's entry, for the test of the fallback`)
	opener := filepath.Join(f.venv, "pkg/opener.so")
	if !r.HasFallback(opener) || r.HasFallback(filepath.Join(f.venv, "pkg/other.so")) {
		t.Error("HasFallback")
	}
	if files, ok := r.Fallback(opener, "libstdc++.so.6"); ok || files != nil {
		t.Errorf("a miss of another library falls back: %v", files)
	}
	files, ok := r.Fallback(opener, "libcudart.so.13")
	want := []string{filepath.Join(f.user, "nvidia/cu13/lib/libcudart.so.13"), filepath.Join(f.system, "nvidia/nccl/lib/libnccl.so.2")}
	if !ok || !slices.Equal(files, want) {
		t.Errorf("fallback: %v %v, want %v (up to libcufft.so.12, which no site has)", ok, files, want)
	}
	// The fallback is no run-time open.
	if _, err := Parse([]byte(`
- opener_path: pkg/opener.so
  opens: [libcudart.so.13]
  dirs: [$ORIGIN]
  sites: sys_path
  source: a site search relative to the opener`)); err == nil {
		t.Error("sites with $ORIGIN accepted")
	}
}

// JAX loads nvidia.<module>'s lib/<name> where importing nvidia.<module>
// finds the package (its __path__[0]): with nvidia a namespace package
// across sys.path, the real interpreter is the judge of which site that
// is, and the model takes the same one.
func TestSitesFirstPackageAsPythonImports(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	f := newSitesFixture(t)
	for _, module := range []string{"cu13", "nccl"} {
		cmd := exec.Command(py, "-I", "-c", "import sys, importlib; sys.path[:0] = sys.argv[1:]; print(importlib.import_module('nvidia."+module+"').__path__[0])", f.venv, f.user, f.system)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python imports nvidia.%s: %v", module, err)
		}
		real := strings.TrimSpace(string(out))
		r := f.resolver(t, "")
		e := Entry{Dirs: []string{"nvidia/" + module + "/lib"}, Sites: SitesFirstPackage}
		dirs := r.searchDirs(filepath.Join(f.venv, "pkg/opener.so"), e, f.venv)
		if len(dirs) != 1 || strings.TrimSuffix(dirs[0].Dir, "/") != filepath.Join(real, "lib") {
			t.Errorf("nvidia.%s: python finds %s, the model searches %v", module, real, dirs)
		}
	}
}
