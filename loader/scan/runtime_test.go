package scan

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/runtimeopen"
)

// TestOpenedLibraryNeeds: what a library opened at run time needs is
// needed as much as the library itself. Debian's libtorch_cpu.so.2.6
// opens libtorch_cuda_linalg.so, which needs cuSOLVER: with cuSOLVER
// absent the real dlopen fails (it says why), and the scan counts
// libcusolver.so.11 missing, at run time, with the directories it was
// searched in.
func TestOpenedLibraryNeeds(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	lddtest.Need(t, err == nil, "gcc not found: the fixture cannot be built")
	dir := t.TempDir()
	lib, cuda := filepath.Join(dir, "lib"), filepath.Join(dir, "cuda")
	build := func(out, src string, args ...string) {
		t.Helper()
		c := filepath.Join(t.TempDir(), "src.c")
		if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command(cc, append([]string{"-o", out, c}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", out, err, b)
		}
	}
	build(filepath.Join(cuda, "libcusolver.so.11"), "int cusolverDnCreate(void) { return 0; }\n", "-shared", "-fPIC", "-Wl,-soname,libcusolver.so.11")
	build(filepath.Join(lib, "libtorch_cuda_linalg.so.2.6"), "int cusolverDnCreate(void);\nint linalg(void) { return cusolverDnCreate(); }\n",
		"-shared", "-fPIC", "-Wl,-soname,libtorch_cuda_linalg.so.2.6", "-L"+cuda, "-l:libcusolver.so.11")
	if err := os.Symlink("libtorch_cuda_linalg.so.2.6", filepath.Join(lib, "libtorch_cuda_linalg.so")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(cuda, "libcusolver.so.11")); err != nil {
		t.Fatal(err)
	}
	cpu := filepath.Join(lib, "libtorch_cpu.so.2.6")
	build(cpu, `#include <dlfcn.h>
#include <stdio.h>
int probe(void) { void *h = dlopen("libtorch_cuda_linalg.so", RTLD_NOW); if (!h) printf("%s\n", dlerror()); return h != 0; }
`, "-shared", "-fPIC", "-Wl,-soname,libtorch_cpu.so.2.6", "-ldl")
	exe := filepath.Join(dir, "prog")
	build(exe, "int probe(void);\nint main(void) { return probe() ? 0 : 1; }\n", "-L"+lib, "-l:libtorch_cpu.so.2.6", "-Wl,-rpath,"+lib, "-ldl")
	run := exec.Command(exe)
	run.Env = []string{"LD_LIBRARY_PATH=" + lib}
	out, err := run.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "libcusolver.so.11: cannot open shared object file") {
		t.Fatalf("the real dlopen: %v: %s", err, out)
	}
	ctx := context.Background()
	llp := lib
	l, err := ldso.New(ctx, ldso.Options{LDLibraryPath: &llp, NoPreloadFile: true, PreloadSet: true})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := runtimeopen.Load()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, l, []string{exe}, Options{RuntimeOpens: runtimeopen.NewResolver(tab, l)})
	if err != nil {
		t.Fatal(err)
	}
	root := rep.Roots[0]
	found := false
	for _, m := range root.Missing {
		if m.Soname == "libcusolver.so.11" {
			found = m.RunTime && len(m.NeededBy) == 1 && strings.HasPrefix(filepath.Base(m.NeededBy[0]), "libtorch_cuda_linalg.so")
		}
	}
	if !found || root.OK {
		t.Errorf("libcusolver.so.11 not missing at run time (ok=%v): %+v", root.OK, root.Missing)
	}
	for _, m := range root.RuntimeMisses {
		if m.Name == "libcusolver.so.11" && (len(m.Requests) != 1 || len(m.Requests[0].Searched) == 0) {
			t.Errorf("the miss says nothing of where it was searched: %+v", m.Requests)
		}
	}
}
