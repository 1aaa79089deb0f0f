package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// TestResolveDryRunKept: a dry run of a whole Python distribution is
// printed again from check's cache while nothing it depends on changed
// (text and --json each their own answer), and computed again once a
// library it loads is gone; a dry run that finds something missing is
// never kept. --no-cache computes it again.
func TestResolveDryRunKept(t *testing.T) {
	quietEnv(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		lddtest.Need(t, false, "python3 -m venv: %v: %s", err, out)
	}
	python := filepath.Join(venv, "bin", "python3")
	sites, _ := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
	if len(sites) != 1 {
		t.Fatalf("site-packages of %s: %v", venv, sites)
	}
	site := sites[0]
	libdep := filepath.Join(site, "libdep", "lib", "libdep.so.2")
	for p, spec := range map[string]elfwrite.Spec{
		"gpupkg/_core.cpython-312-x86_64-linux-gnu.so": {Needed: []string{"libdep.so.2", "libc.so.6"}, RPath: elfwrite.Str("$ORIGIN/../libdep/lib")},
		"libdep/lib/libdep.so.2":                       {Soname: "libdep.so.2", Needed: []string{"libc.so.6"}},
	} {
		spec.Machine = elf.EM_X86_64
		if err := elfwrite.Write(filepath.Join(site, p), spec); err != nil {
			t.Fatal(err)
		}
	}
	for p, body := range map[string]string{
		"gpupkg/__init__.py":            "",
		"gpupkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: gpupkg\nVersion: 1.0\nRequires-Dist: libdep==2.0\n",
		"gpupkg-1.0.dist-info/RECORD":   "gpupkg/__init__.py,,\ngpupkg/_core.cpython-312-x86_64-linux-gnu.so,,\ngpupkg-1.0.dist-info/RECORD,,\n",
		"libdep-2.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: libdep\nVersion: 2.0\n",
		"libdep-2.0.dist-info/RECORD":   "libdep/lib/libdep.so.2,,\nlibdep-2.0.dist-info/RECORD,,\n",
	} {
		writeTestFile(t, filepath.Join(site, p), body, 0o644)
	}
	// Answers derived from files changed moments before are not kept.
	time.Sleep(2100 * time.Millisecond)
	args := []string{"resolve", "gpupkg", "--python", python, "--prefix", filepath.Join(t.TempDir(), "prefix"), "--dry-run", "-v"}
	const fromCache = "dry run answered from cache"
	dryRun := func(what string, wantCode int, wantCached bool, more ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, append(args, more...)...)
		if code != wantCode || strings.Contains(stderr, fromCache) != wantCached {
			t.Fatalf("%s: exit %d (want %d), from cache %v (want %v)\n%s\n%s", what, code, wantCode, !wantCached, wantCached, out, stderr)
		}
		return out
	}
	first := dryRun("first", exitOK, false)
	if again := dryRun("nothing changed", exitOK, true); again != first || !strings.Contains(first, "Nothing is missing") {
		t.Errorf("from cache:\n%s\nwant what the first printed:\n%s", again, first)
	}
	if out := dryRun("--no-cache", exitOK, false, "--no-cache"); out != first {
		t.Errorf("--no-cache printed:\n%s\nwant:\n%s", out, first)
	}
	if out := dryRun("--json, first", exitOK, false, "--json"); !strings.HasPrefix(out, "{") {
		t.Errorf("--json printed %q", out)
	}
	dryRun("--json, nothing changed", exitOK, true, "--json")
	if err := os.Remove(libdep); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	for _, what := range []string{"libdep.so.2 removed", "still missing"} {
		if out := dryRun(what, exitMissing, false); !strings.Contains(out, "libdep.so.2") {
			t.Errorf("%s:\n%s", what, out)
		}
	}
}
