package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// realPython3 is the interpreter program python3 on PATH runs.
func realPython3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	real, err := pyenv.Interpreter(t.Context(), py)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// scan --python given a shim (a shell script that runs the interpreter, as
// pyenv's, asdf's and conda's are) binds extension modules in the process
// of the interpreter it runs: the module's C API references bind; a
// wrapper that runs no interpreter is refused in one line with exit 2.
func TestScanPythonShim(t *testing.T) {
	real := realPython3(t)
	dir := t.TempDir()
	ext := filepath.Join(dir, "pkg", "_ext.cpython-311-x86_64-linux-gnu.so")
	if err := os.MkdirAll(filepath.Dir(ext), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.WriteLinked(ext, elfwrite.Linked{Machine: elf.EM_X86_64, Soname: "_ext.so", Needed: []string{"libc.so.6"},
		Defs: []elfwrite.Def{{Name: "PyInit__ext", Type: elf.STT_FUNC}}, Refs: []elfwrite.Ref{{Name: "PyObject_Call"}}}); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(dir, "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec "+real+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := cli(t, "scan", ext, "--python", shim, "--json")
	if code != 0 || !strings.Contains(out, real) || strings.Contains(out, "PyObject_Call") {
		t.Fatalf("scan through a shim: exit %d\n%s\n%s", code, out, stderr)
	}
	broken := filepath.Join(dir, "python-broken")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = cli(t, "scan", ext, "--python", broken)
	if code != exitUsage || !strings.Contains(stderr, "wrapper") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("scan through a broken shim: exit %d, %q", code, stderr)
	}
}

// Without --python, python3 on PATH is the last resort for an extension
// module outside any installation, and a shim there is run to find its
// program only when the scan meets such a module, once: a scan of plain
// libraries starts no process.
func TestScanRunsDefaultShimOnlyWhenNeeded(t *testing.T) {
	real := realPython3(t)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "python3"), []byte("#!/bin/sh\necho run >> "+runs+"\nexec "+real+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	ran := func() int {
		data, err := os.ReadFile(runs)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.Count(string(data), "run")
	}
	lib := filepath.Join(dir, "lib", "libplain.so")
	ext := filepath.Join(dir, "pkg", "_ext.cpython-311-x86_64-linux-gnu.so")
	ext2 := filepath.Join(dir, "pkg", "_ext2.cpython-311-x86_64-linux-gnu.so")
	if err := elfwrite.WriteLinked(lib, elfwrite.Linked{Machine: elf.EM_X86_64, Soname: "libplain.so", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ext, ext2} {
		if err := elfwrite.WriteLinked(p, elfwrite.Linked{Machine: elf.EM_X86_64, Soname: filepath.Base(p), Needed: []string{"libc.so.6"},
			Defs: []elfwrite.Def{{Name: "PyInit__ext", Type: elf.STT_FUNC}}, Refs: []elfwrite.Ref{{Name: "PyObject_Call"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if out, stderr, code := cli(t, "scan", filepath.Dir(lib)); code != 0 || ran() != 0 {
		t.Fatalf("scan of a plain library: exit %d, the shim ran %d times\n%s\n%s", code, ran(), out, stderr)
	}
	out, stderr, code := cli(t, "scan", filepath.Dir(ext), "--json")
	if code != 0 || !strings.Contains(out, real) || strings.Contains(out, "PyObject_Call") || ran() != 1 {
		t.Fatalf("scan of two extension modules: exit %d, the shim ran %d times\n%s\n%s", code, ran(), out, stderr)
	}
}
