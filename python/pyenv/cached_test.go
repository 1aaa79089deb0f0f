package pyenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// TestDiscoverCached asks an interpreter through a wrapper that counts its
// runs. Each question runs the wrapper once to learn which program it runs
// (a wrapper's choice is not seen otherwise); the second question is then
// answered from cache, with the same answer; a .pth file added to its
// site-packages, a changed PYTHONPATH or a damaged cache make it ask again
// (a second run).
func TestDiscoverCached(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput()
	lddtest.Need(t, err == nil, "python3 -m venv: %v: %s", err, out)
	log := filepath.Join(dir, "runs")
	wrapper := filepath.Join(dir, "python")
	script := "#!/bin/sh\necho run >>" + log + "\nexec " + filepath.Join(venv, "bin", "python3") + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runs := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "run")
	}
	cache := factcache.At(filepath.Join(dir, "cache"))
	ctx := context.Background()
	ask := func(wantRuns int) *Env {
		t.Helper()
		env, err := discoverCached(ctx, wrapper, cache, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := runs(); got != wantRuns {
			t.Fatalf("%d runs of the interpreter, want %d", got, wantRuns)
		}
		return env
	}
	first := ask(2)
	again := ask(3)
	if first.Executable != again.Executable || strings.Join(first.SiteDirs, ":") != strings.Join(again.SiteDirs, ":") || len(again.SiteDirs) == 0 {
		t.Fatalf("cached answer %+v differs from %+v", again, first)
	}
	if err := os.WriteFile(filepath.Join(first.SiteDirs[0], "extra.pth"), []byte(dir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ask(5)
	ask(6)
	t.Setenv("PYTHONPATH", dir)
	ask(8)
	ents, _ := os.ReadDir(cache.Path())
	for _, e := range ents {
		if err := os.WriteFile(filepath.Join(cache.Path(), e.Name()), []byte("damaged"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ask(10)
	ask(11)
}

// A wrapper that runs one of two interpreters by what the key does not
// hold (here a variable of its own, as pyenv's PYENV_VERSION or a
// .python-version file): each question gets the answer of the interpreter
// it runs now, and switching back is answered from cache.
func TestDiscoverCachedFollowsWrapperChoice(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	dir := t.TempDir()
	for _, v := range []string{"a", "b"} {
		out, err := exec.Command(py, "-m", "venv", "--without-pip", filepath.Join(dir, v)).CombinedOutput()
		lddtest.Need(t, err == nil, "python3 -m venv: %v: %s", err, out)
	}
	log := filepath.Join(dir, "probes")
	wrapper := filepath.Join(dir, "python")
	// The probe (not the question of which program runs) is logged.
	script := "#!/bin/sh\n" + `[ "$2" = "import sys; print(sys.executable)" ] || echo probe >>` + log + "\n" + `exec "$FAKEPY_HOME/bin/python3" "$@"` + "\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	probes := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "probe")
	}
	cache := factcache.At(filepath.Join(dir, "cache"))
	ask := func(home string, wantProbes int) {
		t.Helper()
		t.Setenv("FAKEPY_HOME", filepath.Join(dir, home))
		env, err := discoverCached(context.Background(), wrapper, cache, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(dir, home) + "/"; !strings.HasPrefix(env.Executable, want) || len(env.SiteDirs) == 0 || !strings.HasPrefix(env.SiteDirs[0], want) {
			t.Errorf("with the wrapper running %s: executable %s, site %v", home, env.Executable, env.SiteDirs)
		}
		if got := probes(); got != wantProbes {
			t.Errorf("with the wrapper running %s: %d probes, want %d", home, got, wantProbes)
		}
	}
	ask("a", 1)
	ask("a", 1)
	ask("b", 2)
	ask("a", 2)
	ask("b", 2)
}

// TestRecordPaths: the short way of making a RECORD path absolute gives
// what cleaning the joined path gives.
func TestRecordPaths(t *testing.T) {
	for _, site := range []string{"/venv/lib/python3.12/site-packages", "/", "/site/"} {
		d := &Dist{SiteDir: site}
		for _, p := range []string{"torch/lib/libtorch.so", "a", "../../../bin/torchrun", "./x/y", "x//y", "x/./y", "x/../y", "/abs/file", "x/", "..", ".", "x/.hidden/..y"} {
			if got, want := d.path(p), filepath.Clean(filepath.Join(site, p)); got != want && !(filepath.IsAbs(p) && got == filepath.Clean(p)) {
				t.Errorf("site %s, %q: %q, want %q", site, p, got, want)
			}
		}
	}
}
