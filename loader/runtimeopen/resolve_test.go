package runtimeopen

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// gcc compiles the fixtures: real code whose dlopen calls the real loader
// answers.
func gcc(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("gcc")
	lddtest.Need(t, err == nil, "gcc not found: run-time open fixtures cannot be built")
	return p
}

func build(t *testing.T, cc string, out, src string, args ...string) {
	t.Helper()
	c := filepath.Join(t.TempDir(), "src.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cc, append([]string{"-o", out, c}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", out, err, b)
	}
}

// An opener whose exported function dlopen's name from inside the library,
// so the real loader searches from it.
func openerSrc(names ...string) string {
	var b strings.Builder
	b.WriteString("#include <dlfcn.h>\n#include <stdio.h>\nint probe(void) { int n = 0;\n")
	for _, n := range names {
		b.WriteString(`  if (dlopen("` + n + `", RTLD_NOW)) { printf("found ` + n + `\n"); n++; } else printf("missing ` + n + `\n");` + "\n")
	}
	b.WriteString("  return n; }\n")
	return b.String()
}

// The program dlopen's the opener by path and calls its probe.
const mainSrc = `#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) { printf("opener: %s\n", dlerror()); return 2; }
  int (*probe)(void) = (int (*)(void))dlsym(h, "probe");
  probe();
  return 0;
}`

// realOpens runs the program and returns the names its opener found.
func realOpens(t *testing.T, exe, opener, llp string) map[string]bool {
	t.Helper()
	cmd := exec.Command(exe, opener)
	cmd.Env = []string{"LD_LIBRARY_PATH=" + llp}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", exe, err, out)
	}
	got := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if n, ok := strings.CutPrefix(line, "found "); ok {
			got[n] = true
		}
	}
	return got
}

// modelOpens resolves the opener's run-time opens with the built-in table in
// the model of the same process.
func modelOpens(t *testing.T, exe, opener, llp string) []Open {
	t.Helper()
	ctx := context.Background()
	l, err := ldso.New(ctx, ldso.Options{LDLibraryPath: &llp, NoPreloadFile: true, PreloadSet: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Start(ctx, exe, ldso.AsExecuted)
	if err != nil {
		t.Fatal(err)
	}
	o, err := p.Dlopen(ctx, opener)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return NewResolver(tab, l).Resolve(ctx, p, []*ldso.Object{o})
}

func opensOf(opens []Open, opener string) map[string]*Open {
	m := map[string]*Open{}
	for i := range opens {
		if filepath.Base(opens[i].Opener.Path) == opener {
			m[opens[i].Name] = &opens[i]
		}
	}
	return m
}

// An nvrtc-like library (soname libnvrtc.so.13) opens its builtins by name:
// found or not depending on where they are and on the search paths of the
// opener and of the program, as the real dlopen decides.
func TestNvrtcBuiltinsPlacement(t *testing.T) {
	cc := gcc(t)
	const builtins = "libnvrtc-builtins.so.13.0"
	cases := []struct {
		name       string
		openerLink []string // link flags of libnvrtc.so.13
		mainLink   []string
		builtinsIn string // "lib" (beside the opener) or "other"
		llp        bool   // LD_LIBRARY_PATH names "other"
	}{
		{name: "beside, no RUNPATH (the wheel's layout)", builtinsIn: "lib"},
		{name: "beside, opener RUNPATH $ORIGIN", openerLink: []string{"-Wl,--enable-new-dtags,-rpath,$ORIGIN"}, builtinsIn: "lib"},
		{name: "beside, opener RPATH $ORIGIN", openerLink: []string{"-Wl,--disable-new-dtags,-rpath,$ORIGIN"}, builtinsIn: "lib"},
		{name: "program RPATH names it", mainLink: []string{"-Wl,--disable-new-dtags,-rpath,OTHER"}, builtinsIn: "other"},
		{name: "program RUNPATH names it (not used for the opener)", mainLink: []string{"-Wl,--enable-new-dtags,-rpath,OTHER"}, builtinsIn: "other"},
		{name: "program RPATH and opener RUNPATH (RPATH not used)", openerLink: []string{"-Wl,--enable-new-dtags,-rpath,$ORIGIN"}, mainLink: []string{"-Wl,--disable-new-dtags,-rpath,OTHER"}, builtinsIn: "other"},
		{name: "LD_LIBRARY_PATH", builtinsIn: "other", llp: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			lib, other := filepath.Join(dir, "lib"), filepath.Join(dir, "other")
			where := lib
			if c.builtinsIn == "other" {
				where = other
			}
			build(t, cc, filepath.Join(where, builtins), "int builtin_marker(void) { return 1; }\n", "-shared", "-fPIC", "-Wl,-soname,"+builtins)
			opener := filepath.Join(lib, "libnvrtc.so.13")
			build(t, cc, opener, openerSrc(builtins), append([]string{"-shared", "-fPIC", "-Wl,-soname,libnvrtc.so.13", "-ldl"}, c.openerLink...)...)
			exe := filepath.Join(dir, "prog")
			var ml []string
			for _, f := range c.mainLink {
				ml = append(ml, strings.ReplaceAll(f, "OTHER", other))
			}
			build(t, cc, exe, mainSrc, append([]string{"-ldl"}, ml...)...)
			llp := ""
			if c.llp {
				llp = other
			}
			real := realOpens(t, exe, opener, llp)[builtins]
			got := opensOf(modelOpens(t, exe, opener, llp), "libnvrtc.so.13")[builtins]
			if got == nil {
				t.Fatal("the model did not open the builtins")
			}
			if (got.Found != nil) != real {
				t.Errorf("model found=%v (%s %s), real dlopen found=%v", got.Found != nil, got.How, got.From, real)
			}
			if got.Found == nil && !got.Missing() {
				t.Error("a required open not found is not reported missing")
			}
		})
	}
}

// A cuDNN-like shim (soname libcudnn.so.9, RUNPATH $ORIGIN) opens its
// sub-libraries; only some are there.
func TestCudnnSubLibraries(t *testing.T) {
	cc := gcc(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "nvidia", "cudnn", "lib")
	present := []string{"libcudnn_graph.so.9", "libcudnn_ops.so.9"}
	for _, n := range present {
		build(t, cc, filepath.Join(lib, n), "int marker(void) { return 0; }\n", "-shared", "-fPIC", "-Wl,-soname,"+n)
	}
	wanted := []string{"libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9"}
	opener := filepath.Join(lib, "libcudnn.so.9")
	build(t, cc, opener, openerSrc(wanted...), "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.9", "-Wl,--enable-new-dtags,-rpath,$ORIGIN", "-ldl")
	exe := filepath.Join(dir, "prog")
	build(t, cc, exe, mainSrc, "-ldl")
	real := realOpens(t, exe, opener, "")
	model := opensOf(modelOpens(t, exe, opener, ""), "libcudnn.so.9")
	for _, n := range wanted {
		o := model[n]
		if o == nil {
			t.Errorf("%s: not opened by the model", n)
			continue
		}
		if (o.Found != nil) != real[n] {
			t.Errorf("%s: model found=%v, real found=%v", n, o.Found != nil, real[n])
		}
		if o.Found != nil && o.How != string(ldso.ViaRunPath) {
			t.Errorf("%s: found by %s, want runpath", n, o.How)
		}
		if o.Found == nil && (!o.Missing() || len(o.Request.Searched) == 0) {
			t.Errorf("%s: a miss without its searched directories: %+v", n, o.Request)
		}
	}
}

// A library with an FDO .note.dlopen: gcc emits it from a section
// attribute; the note is read and its opens resolved with their priority.
func TestDlopenNote(t *testing.T) {
	cc := gcc(t)
	dir := t.TempDir()
	const js = `[{"soname":["libpresent.so.1"],"feature":"present","priority":"required"},` +
		`{"soname":["libabsent.so.2","libabsent.so.1"],"feature":"absent","description":"an optional codec","priority":"suggested"},` +
		`{"soname":["libneeded.so.3"],"feature":"needed","priority":"required"}]`
	src := `#define JSON "` + strings.ReplaceAll(js, `"`, `\"`) + `"
__attribute__((used, section(".note.dlopen"), aligned(4))) static const struct {
  unsigned namesz, descsz, type; char name[4]; char desc[(sizeof(JSON) + 3) / 4 * 4];
} note = { 4, sizeof(JSON), 0x407c0c0a, "FDO", JSON };
int marker(void) { return 0; }
`
	lib := filepath.Join(dir, "lib")
	build(t, cc, filepath.Join(lib, "libpresent.so.1"), "int p(void) { return 0; }\n", "-shared", "-fPIC", "-Wl,-soname,libpresent.so.1")
	opener := filepath.Join(lib, "libplugin.so.1")
	build(t, cc, opener, src, "-shared", "-fPIC", "-Wl,-soname,libplugin.so.1", "-Wl,--enable-new-dtags,-rpath,$ORIGIN")
	if out, err := exec.Command("readelf", "-n", opener).CombinedOutput(); err == nil && !strings.Contains(string(out), "0x407c0c0a") && !strings.Contains(string(out), "FDO") {
		t.Fatalf("readelf sees no FDO note:\n%s", out)
	}
	f, err := elfscan.Open(opener)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := f.DlopenNotes()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 3 || notes[1].Sonames[1] != "libabsent.so.1" || notes[1].Priority != elfscan.PrioritySuggested || notes[1].Description != "an optional codec" {
		t.Fatalf("notes: %+v", notes)
	}
	exe := filepath.Join(dir, "prog")
	build(t, cc, exe, mainSrc+"\nint probe_unused;\n", "-ldl")
	// The plugin has no probe function: the model alone is asked.
	got := opensOf(modelOpens(t, exe, opener, ""), "libplugin.so.1")
	if x := got["libpresent.so.1"]; x == nil || x.Found == nil || x.How != string(ldso.ViaRunPath) || !strings.Contains(x.Evidence, ".note.dlopen") {
		t.Errorf("libpresent.so.1: %+v", x)
	}
	if x := got["libabsent.so.2"]; x == nil || x.Found != nil || !x.Optional || x.Missing() || len(x.Tried) != 2 {
		t.Errorf("libabsent: %+v", x)
	}
	if x := got["libneeded.so.3"]; x == nil || !x.Missing() {
		t.Errorf("libneeded.so.3: %+v", x)
	}
}

// A libcuda-like driver library (soname libcuda.so.1) opens the PTX JIT
// compiler by name: found where the real dlopen finds it, and never
// missing when absent (a driver library, which cudadeps never fetches).
func TestLibcudaOpensPTXJITCompiler(t *testing.T) {
	cc := gcc(t)
	const jit = "libnvidia-ptxjitcompiler.so.1"
	for _, present := range []bool{true, false} {
		dir := t.TempDir()
		drv := filepath.Join(dir, "driver")
		if present {
			build(t, cc, filepath.Join(drv, jit), "int jit_marker(void) { return 1; }\n", "-shared", "-fPIC", "-Wl,-soname,"+jit)
		}
		opener := filepath.Join(drv, "libcuda.so.1")
		build(t, cc, opener, openerSrc(jit), "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-ldl")
		exe := filepath.Join(dir, "prog")
		build(t, cc, exe, mainSrc, "-ldl")
		real := realOpens(t, exe, opener, drv)[jit]
		got := opensOf(modelOpens(t, exe, opener, drv), "libcuda.so.1")[jit]
		if got == nil {
			t.Fatal("the model did not open the PTX JIT compiler")
		}
		if (got.Found != nil) != real || real != present || !got.Driver || got.Missing() {
			t.Errorf("present=%v: model found=%v driver=%v missing=%v, real dlopen found=%v", present, got.Found != nil, got.Driver, got.Missing(), real)
		}
	}
}

// Debian names torch's libraries with the package's version
// (libtorch_cpu.so.2.6, libtorch_cuda_linalg.so.2.6); the table keys them
// as the wheels name them (libtorch_cpu.so), and still applies. Torch opens
// libtorch_cuda_linalg.so by that name, which only a link of that name
// (Debian's libtorch-cuda-dev) answers: the model finds it exactly when the
// real dlopen does, and once found, the library's own needs (cuSOLVER)
// come into the process.
func TestDebianNamedTorchOpensLinalg(t *testing.T) {
	cc := gcc(t)
	for _, devLink := range []bool{false, true} {
		dir := t.TempDir()
		lib := filepath.Join(dir, "lib")
		cuda := filepath.Join(dir, "cuda")
		build(t, cc, filepath.Join(cuda, "libcusolver.so.11"), "int cusolverDnCreate(void) { return 0; }\n", "-shared", "-fPIC", "-Wl,-soname,libcusolver.so.11")
		linalg := filepath.Join(lib, "libtorch_cuda_linalg.so.2.6")
		build(t, cc, linalg, "int cusolverDnCreate(void);\nint linalg(void) { return cusolverDnCreate(); }\n",
			"-shared", "-fPIC", "-Wl,-soname,libtorch_cuda_linalg.so.2.6", "-L"+cuda, "-l:libcusolver.so.11")
		if devLink {
			if err := os.Symlink("libtorch_cuda_linalg.so.2.6", filepath.Join(lib, "libtorch_cuda_linalg.so")); err != nil {
				t.Fatal(err)
			}
		}
		opener := filepath.Join(lib, "libtorch_cpu.so.2.6")
		build(t, cc, opener, openerSrc("libtorch_cuda_linalg.so"), "-shared", "-fPIC", "-Wl,-soname,libtorch_cpu.so.2.6", "-ldl")
		exe := filepath.Join(dir, "prog")
		build(t, cc, exe, mainSrc, "-ldl")
		llp := lib + ":" + cuda
		real := realOpens(t, exe, opener, llp)["libtorch_cuda_linalg.so"]
		if real != devLink {
			t.Fatalf("dev link %v: the real dlopen found=%v", devLink, real)
		}
		opens := modelOpens(t, exe, opener, llp)
		got := opensOf(opens, "libtorch_cpu.so.2.6")["libtorch_cuda_linalg.so"]
		if got == nil {
			t.Fatalf("dev link %v: the table's libtorch_cpu.so entry did not apply to libtorch_cpu.so.2.6", devLink)
		}
		if (got.Found != nil) != real || got.Missing() == real {
			t.Errorf("dev link %v: model found=%v missing=%v, real dlopen found=%v", devLink, got.Found != nil, got.Missing(), real)
		}
		if got.Found != nil {
			found := false
			for _, d := range got.Found.Deps {
				found = found || d.Found() && filepath.Base(d.Path) == "libcusolver.so.11"
			}
			if !found {
				t.Errorf("libtorch_cuda_linalg.so.2.6 opened without its cuSOLVER: %v", got.Found.Deps)
			}
		}
	}
}
