package resolver

import (
	"context"
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// fakePython writes an executable that stands for an interpreter: for
// "-c CODE" (the import check) it exits with $FAKE_IMPORT_CODE after
// printing $FAKE_IMPORT_OUT; for a script it prints its arguments, its
// LD_LIBRARY_PATH, then $FAKE_OUT, and exits with $FAKE_CODE, or sleeps
// when $FAKE_SLEEP is set (with a child holding its output open).
func fakePython(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "python3")
	script := `#!/bin/sh
if [ "$1" = "-c" ]; then
	[ -n "$FAKE_IMPORT_OUT" ] && printf '%s\n' "$FAKE_IMPORT_OUT"
	exit "${FAKE_IMPORT_CODE:-0}"
fi
echo "argv: $*"
echo "ld_library_path: ${LD_LIBRARY_PATH-unset}"
if [ -n "$FAKE_SLEEP" ]; then
	sleep "$FAKE_SLEEP" &
	sleep "$FAKE_SLEEP"
fi
printf '%s\n' "$FAKE_OUT"
exit "${FAKE_CODE:-0}"
`
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func fakeTarget(py string, dist string, requires ...string) *Target {
	t := &Target{Kind: KindPython, Name: dist, Dist: &pyenv.Dist{Name: dist, Version: "1.0"},
		Python: &pyenv.Env{Executable: py, FromPython: true}, Module: strings.ReplaceAll(dist, "-", "_")}
	for _, r := range requires {
		t.Requires = append(t.Requires, &pyenv.Dist{Name: r, Version: "1.0"})
	}
	return t
}

// shellRun runs a printed command line as a user would paste it.
func shellRun(t *testing.T, line string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("sh -c %q: %v", line, err)
		}
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestProbeRunner(t *testing.T) {
	py := fakePython(t)
	prefix := openPrefix(t, t.TempDir())
	ctx := context.Background()
	t.Setenv("LD_LIBRARY_PATH", "/inherited/lib")
	run := func(envDirs []string, check string, timeout time.Duration) *Verification {
		c := &checkRunner{t: fakeTarget(py, "torchvision", "torch", "numpy"), envDirs: envDirs, prefix: prefix, check: check, timeout: timeout}
		return c.run(ctx)
	}

	t.Run("ok, without a GPU", func(t *testing.T) {
		t.Setenv("FAKE_OUT", "ok: import torch: 2.11.0\nok: torch is a CPU build: no CUDA steps\nno GPU: skipped CUDA init\nno GPU: skipped fft (cuFFT)\nprobe passed")
		v := run(nil, "", time.Minute)
		if !v.OK || !v.ImportOK || len(v.Probes) != 1 {
			t.Fatalf("verification = %+v", v)
		}
		p := v.Probes[0]
		want := []ProbeStep{{"import torch", StepOK, "2.11.0"}, {"torch is a CPU build", StepOK, "no CUDA steps"},
			{"CUDA init", StepSkipped, "no GPU"}, {"fft (cuFFT)", StepSkipped, "no GPU"}}
		if p.Name != "torch" || !p.OK || p.ExitCode != 0 || len(p.Failures) != 0 || len(p.Steps) != len(want) {
			t.Fatalf("probe = %+v", p)
		}
		for i, w := range want {
			if p.Steps[i] != w {
				t.Errorf("step %d = %+v, want %+v", i, p.Steps[i], w)
			}
		}
		// The probe torchvision gets is torch's, written under the prefix
		// where the printed command finds it.
		data, err := os.ReadFile(p.Script)
		script, _ := ProbeScript("torch")
		if err != nil || string(data) != script || filepath.Dir(p.Script) != prefix.ProbesDir() {
			t.Fatalf("probe file %s: %v", p.Script, err)
		}
		if p.Command[0] != py || p.Command[1] != p.Script {
			t.Errorf("command %q", p.Command)
		}
	})

	t.Run("a failure naming a library", func(t *testing.T) {
		t.Setenv("FAKE_OUT", "ok: import torch: 2.11.0\nFAILED: jiterator (NVRTC): RuntimeError: nvrtc: error: failed to open libnvrtc-builtins.so.13.0.\n  Make sure that libnvrtc-builtins.so.13.0 is installed correctly.\nprobe failed: jiterator (NVRTC)")
		t.Setenv("FAKE_CODE", "1")
		v := run(nil, "", time.Minute)
		if v.OK || !v.ImportOK || !v.BlamesLibrary() || strings.Join(v.Blamed(), ",") != "libnvrtc-builtins.so.13.0" {
			t.Fatalf("verification = %+v", v)
		}
		if v.stopped() != StopCheckFails {
			t.Errorf("stopped %q", v.stopped())
		}
		p := v.Probes[0]
		if p.ExitCode != 1 || p.Failures[0].Kind != "not_found" || p.describe() != "probe torch (jiterator (NVRTC))" {
			t.Errorf("probe = %+v", p)
		}
	})

	t.Run("another failure, reproduced as printed", func(t *testing.T) {
		t.Setenv("FAKE_OUT", "ok: import torch: 2.11.0\nFAILED: fft (cuFFT): RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR\nprobe failed: fft (cuFFT)")
		t.Setenv("FAKE_CODE", "1")
		envDirs := []string{filepath.Join(prefix.Dir(), "pkgs", "it's here", "lib"), "/second/lib"}
		v := run(envDirs, "", time.Minute)
		p := v.Probes[0]
		if v.OK || v.BlamesLibrary() || p.OK || len(p.Failures) != 0 {
			t.Fatalf("verification = %+v", v)
		}
		if p.Steps[1] != (ProbeStep{"fft (cuFFT)", StepFailed, "RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR"}) {
			t.Errorf("steps %+v", p.Steps)
		}
		// The printed line, pasted into a shell with this environment,
		// runs the same interpreter on the same probe with the same
		// LD_LIBRARY_PATH: the output is the same.
		out, code := shellRun(t, p.Reproduce)
		if code != 1 || out != p.Output {
			t.Fatalf("%s\nexit %d:\n%s\nwant:\n%s", p.Reproduce, code, out, p.Output)
		}
		if !strings.Contains(out, "ld_library_path: "+strings.Join(envDirs, ":")+":/inherited/lib\n") {
			t.Errorf("LD_LIBRARY_PATH not as the activation sets it:\n%s", out)
		}
	})

	t.Run("the import fails: no probe", func(t *testing.T) {
		t.Setenv("FAKE_IMPORT_OUT", "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory")
		t.Setenv("FAKE_IMPORT_CODE", "1")
		v := run(nil, "", time.Minute)
		if v.OK || v.ImportOK || len(v.Probes) != 0 || strings.Join(v.Missing, ",") != "libcudnn.so.9" || v.stopped() != StopImportFails {
			t.Fatalf("verification = %+v", v)
		}
	})

	t.Run("check command instead of the probes", func(t *testing.T) {
		t.Setenv("FAKE_OUT", "FAILED: would fail")
		t.Setenv("FAKE_CODE", "1")
		// "python3" is the target's interpreter: its directory comes first
		// on PATH.
		v := run([]string{"/act/lib"}, `python3 mine.py; echo "ok: my step"; exit 4`, time.Minute)
		if len(v.Probes) != 1 {
			t.Fatalf("probes = %+v", v.Probes)
		}
		p := v.Probes[0]
		if p.Name != "check" || p.OK || p.ExitCode != 4 || p.Script != "" || v.BlamesLibrary() {
			t.Fatalf("check = %+v", p)
		}
		if !strings.Contains(p.Output, "argv: mine.py\nld_library_path: /act/lib:/inherited/lib\n") {
			t.Errorf("the check did not run the target's interpreter with the activation:\n%s", p.Output)
		}
		if n := len(p.Steps); n != 2 || p.Steps[1] != (ProbeStep{"my step", StepOK, ""}) {
			t.Errorf("steps %+v", p.Steps)
		}
		t.Setenv("PATH", "/usr/bin:/bin")
		out, code := shellRun(t, p.Reproduce)
		if code != 4 || out != p.Output {
			t.Fatalf("%s\nexit %d:\n%s\nwant:\n%s", p.Reproduce, code, out, p.Output)
		}
	})

	t.Run("a check naming a library", func(t *testing.T) {
		v := run(nil, `echo "OSError: libcublasLt.so.13: cannot open shared object file: No such file or directory"; exit 1`, time.Minute)
		if v.OK || strings.Join(v.Blamed(), ",") != "libcublasLt.so.13" {
			t.Fatalf("verification = %+v", v)
		}
	})

	t.Run("time limit", func(t *testing.T) {
		t.Setenv("FAKE_SLEEP", "60")
		start := time.Now()
		v := run(nil, "", time.Second)
		p := v.Probes[0]
		if took := time.Since(start); took > 20*time.Second {
			t.Fatalf("the time limit did not stop the probe and its child: %s", took)
		}
		if v.OK || !p.TimedOut || p.ExitCode != -1 || !strings.Contains(p.Error, "killed after 1s") || v.BlamesLibrary() {
			t.Fatalf("probe = %+v", p)
		}
		if !strings.Contains(p.Output, "argv: ") {
			t.Errorf("the output before the kill is lost: %q", p.Output)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		t.Setenv("FAKE_SLEEP", "60")
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(300*time.Millisecond, cancel)
		start := time.Now()
		c := &checkRunner{t: fakeTarget(py, "torch"), prefix: prefix, timeout: time.Minute}
		v := c.run(cctx)
		if took := time.Since(start); took > 20*time.Second || v.Probes[0].TimedOut || !strings.Contains(v.Probes[0].Error, "interrupted") {
			t.Fatalf("after %s: %+v", took, v.Probes[0])
		}
	})
}

func TestProbeNames(t *testing.T) {
	for _, c := range []struct {
		dist     string
		requires []string
		want     string
	}{
		{"torchvision", []string{"torch", "nvidia-cudnn-cu13"}, "torch"},
		{"jax", []string{"jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt"}, "jax"},
		{"jax", []string{"jaxlib"}, ""},
		{"cupy-cuda13x", []string{"cuda-pathfinder"}, "cupy"},
		{"mything", []string{"torch", "cupy-cuda12x", "onnxruntime-gpu", "Tensorflow"}, "torch,cupy,onnxruntime,tensorflow"},
		{"requests", nil, ""},
	} {
		if got := strings.Join(probeNames(fakeTarget("/py", c.dist, c.requires...)), ","); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.dist, c.requires, got, c.want)
		}
	}
	if n := probeNames(&Target{Kind: KindDir, Path: "/x"}); n != nil {
		t.Errorf("a directory gets probes %v", n)
	}
}

func TestOptionalModuleTable(t *testing.T) {
	table, err := LoadOptionalModules()
	if err != nil {
		t.Fatal(err)
	}
	if len(table) == 0 {
		t.Fatal("empty table")
	}
	for _, bad := range []string{
		"- dists: [cupy]\n  modules: [x.so]\n  feature: X\n",                 // no source
		"- dists: [cupy]\n  modules: ['[x.so']\n  feature: X\n  source: s\n", // bad glob
		"- dists: [cupy]\n  modules: [../x.so]\n  feature: X\n  source: s\n", // outside site-packages
		"- dists: []\n  modules: [x.so]\n  feature: X\n  source: s\n",        // applies to nothing
		"- dists: [cupy]\n  modules: [x.so]\n  source: s\n",                  // no feature
		"- dists: [cupy\n", // not YAML
	} {
		if _, err := parseOptionalModules([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if got := moduleName("/v/lib/python3.12/site-packages/cupy_backends/cuda/libs/cutensor.cpython-312-x86_64-linux-gnu.so", "cupy_backends/cuda/libs/cutensor.*.so"); got != "cupy_backends.cuda.libs.cutensor" {
		t.Errorf("module name %q", got)
	}
}

// hasGPU is the probes' own test for a GPU: the driver's device nodes.
func hasGPU() bool {
	m, _ := filepath.Glob("/dev/nvidia[0-9]*")
	_, err := os.Stat("/dev/dxg")
	return len(m) > 0 || err == nil
}

// cupyFixture is a venv with a CuPy-shaped distribution: Python modules
// that stand for CuPy's (its NVRTC binding opens libnvrtc-builtins by name
// when it compiles, as libnvrtc does), an extension module that needs
// nothing missing, and the optional cuTENSOR module, which needs
// libcutensor.so.2. The mirror serves NVRTC and cuTENSOR.
type cupyFixture struct {
	python, site, prefix string
	mirror               *mirrortest.Mirror
	catalog              *catalog.Catalog
}

// cutensorModule is CuPy's optional cuTENSOR module: it binds cuTENSOR's
// versioned symbols, and one unversioned, so that with cuTENSOR absent its
// references stay unbound, as the real module's do.
func cutensorModule(t *testing.T) []byte {
	t.Helper()
	data, err := elfwrite.BuildLinked(elfwrite.Linked{Needed: []string{"libcutensor.so.2", "libc.so.6"},
		VersionNeeds: []elfwrite.VersionNeed{{File: "libcutensor.so.2", Versions: []string{"libcutensor.2.0.0"}}},
		Refs:         []elfwrite.Ref{{Name: "cutensorCreate", Version: "libcutensor.2.0.0"}, {Name: "cutensorPermute"}}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// nvrtcBuiltinsOpen is the fake binding's compile: it fails as NVRTC does
// when the builtins cannot be opened.
const nvrtcBuiltinsOpen = `
def compileProgram(prog, options):
    try:
        ctypes.CDLL("libnvrtc-builtins.so.13.0")
    except OSError:
        raise RuntimeError("NVRTC_ERROR_BUILTIN_OPERATION_FAILURE (7)\n"
                           "nvrtc: error: failed to open libnvrtc-builtins.so.13.0.\n"
                           "  Make sure that libnvrtc-builtins.so.13.0 is installed correctly.")
`

// nvrtcBroken fails for a reason that names no library.
const nvrtcBroken = `
def compileProgram(prog, options):
    raise RuntimeError("NVRTC_ERROR_INTERNAL: the compiler gave up")
`

func newCupyFixture(t *testing.T, compile string, extraRoot bool) *cupyFixture {
	t.Helper()
	if hasGPU() {
		// Not an oracle: with a GPU the real probes are proved (e2e/gpu).
		t.Skip("a GPU is present: the CuPy probe would run GPU steps the stand-in modules lack")
	}
	f := &cupyFixture{}
	f.python, f.site = venvSite(t)
	nvrtc := "import ctypes\n\n\ndef createProgram(src, name, headers, include_names):\n    return object()\n" + compile +
		"\n\ndef getPTX(prog):\n    return b'.version 9.0'\n\n\ndef destroyProgram(prog):\n    pass\n"
	ext := "cpython-312-x86_64-linux-gnu.so"
	files := map[string][]byte{
		"cupy/__init__.py":                            []byte("__version__ = '14.0.0'\n"),
		"cupy_backends/__init__.py":                   nil,
		"cupy_backends/cuda/__init__.py":              nil,
		"cupy_backends/cuda/libs/__init__.py":         nil,
		"cupy_backends/cuda/libs/nvrtc.py":            []byte(nvrtc),
		"cupy_cuda13x-14.0.0.dist-info/top_level.txt": []byte("cupy\ncupy_backends\ncupyx\n"),
		"cupy/_core/core." + ext:                      elfBytes(t, elfwrite.Spec{Soname: "core." + ext, Needed: []string{"libc.so.6"}}),
		"cupy_backends/cuda/libs/cutensor." + ext:     cutensorModule(t),
	}
	if extraRoot {
		// A module CuPy always loads that needs cuTENSOR too: then it is
		// no longer optional.
		files["cupy/_core/_routines_linalg."+ext] = elfBytes(t, elfwrite.Spec{Needed: []string{"libcutensor.so.2", "libc.so.6"}})
	}
	modes := map[string]fs.FileMode{}
	for p := range files {
		if strings.HasSuffix(p, ".so") {
			modes[p] = 0o755
		}
	}
	writeDist(t, f.site, "cupy-cuda13x", "14.0.0", []string{"numpy"}, files, modes)
	archives := []mirrortest.Archive{
		{Component: "cuda_nvrtc", Product: "cuda", Version: "13.0.999.1", Platform: "linux-x86_64",
			Libs: map[string]elfwrite.Spec{
				"libnvrtc.so.13.0.99":            {Soname: "libnvrtc.so.13", Needed: []string{"libc.so.6"}},
				"libnvrtc-builtins.so.13.0.99.1": {Soname: "libnvrtc-builtins.so.13.0", Needed: []string{"libc.so.6"}},
			},
			Links: map[string]string{"libnvrtc.so.13": "libnvrtc.so.13.0.99", "libnvrtc-builtins.so.13.0": "libnvrtc-builtins.so.13.0.99.1"}},
		{Component: "libcutensor", Product: "cutensor", Version: "2.99.0.1", Platform: "linux-x86_64", Variant: "cuda13",
			Libs:  map[string]elfwrite.Spec{"libcutensor.so.2.99.0": {Soname: "libcutensor.so.2", Needed: []string{"libc.so.6"}}},
			Links: map[string]string{"libcutensor.so.2": "libcutensor.so.2.99.0"}},
	}
	for i := range archives {
		archives[i].Machine = elf.EM_X86_64
	}
	f.mirror, f.catalog = serveCatalog(t, archives)
	f.prefix = filepath.Join(t.TempDir(), "prefix")
	return f
}

func (f *cupyFixture) resolve(t *testing.T, mod func(*Options)) *Outcome {
	t.Helper()
	ctx := context.Background()
	target, err := FindTarget(ctx, "cupy-cuda13x", TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	if target.Module != "cupy" {
		t.Fatalf("module %q", target.Module)
	}
	client, err := fetch.NewClient(fetch.Options{CacheDir: filepath.Join(f.prefix, "..", "cache")})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	opts := Options{Loader: ldso.Options{LDLibraryPath: &empty, PreloadSet: true}, Catalog: f.catalog,
		Prefix: openPrefix(t, f.prefix), Client: client, CUDAMajor: 13, Verify: true, CheckTimeout: 2 * time.Minute}
	if mod != nil {
		mod(&opts)
	}
	out, err := Resolve(ctx, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *cupyFixture) downloaded(component string) bool {
	for p, n := range f.mirror.Requests() {
		if strings.HasPrefix(strings.TrimPrefix(p, "/"), component+"/") && n > 0 {
			return true
		}
	}
	return false
}

// The CuPy probe's NVRTC step fails on the builtins, which no import opens:
// the next round installs them from the mirror, and the probe then passes.
// cuTENSOR, which only the optional module needs, is reported and never
// downloaded.
func TestResolveProbeFeedsTheLoop(t *testing.T) {
	f := newCupyFixture(t, nvrtcBuiltinsOpen, false)
	t.Setenv("LD_LIBRARY_PATH", "")
	out := f.resolve(t, nil)
	if !out.OK || out.Stopped != StopNothingMissing {
		t.Fatalf("stopped %q, unresolved %+v, verify %+v", out.Stopped, out.Unresolved, out.Verify)
	}
	var first *Verification
	installedAfter := false
	for _, r := range out.Rounds {
		for _, k := range r.Installed {
			if k.Component == "cuda_nvrtc" && first != nil {
				installedAfter = true
			}
		}
		if r.Verify != nil && first == nil {
			first = r.Verify
		}
		for _, n := range r.Missing {
			if n.Soname == "libnvrtc-builtins.so.13.0" && (!n.Runtime || strings.Join(n.NeededBy, ",") != "probe cupy (NVRTC compile)") {
				t.Errorf("need %+v", n)
			}
		}
	}
	if first == nil || first.OK || !first.ImportOK || strings.Join(first.Blamed(), ",") != "libnvrtc-builtins.so.13.0" {
		t.Fatalf("first verification %+v", first)
	}
	if !installedAfter {
		t.Fatalf("NVRTC was not installed after the probe blamed its builtins: rounds %+v", out.Rounds)
	}
	last := out.Verify.Probes
	if len(last) != 1 || !last[0].OK {
		t.Fatalf("last probes %+v", last)
	}
	skipped := 0
	for _, st := range last[0].Steps {
		if st.Status == StepFailed {
			t.Errorf("step %+v", st)
		}
		if st.Status == StepSkipped {
			skipped++
		}
	}
	if skipped == 0 || last[0].Steps[1] != (ProbeStep{"NVRTC compile", StepOK, "12 bytes of PTX"}) {
		t.Errorf("steps %+v", last[0].Steps)
	}
	// What the probe needed is served to a new shell by the activation
	// script: the printed command passes as pasted.
	if out.Activation.Script == "" {
		t.Fatal("no activation script")
	}
	if o, code := shellRun(t, last[0].Reproduce); code != 0 || !strings.Contains(o, "probe passed") {
		t.Fatalf("%s: exit %d\n%s", last[0].Reproduce, code, o)
	}

	if len(out.Optional) != 1 {
		t.Fatalf("optional %+v", out.Optional)
	}
	o := out.Optional[0]
	if o.Soname != "libcutensor.so.2" || strings.Join(o.For, ",") != "cupy_backends.cuda.libs.cutensor" || o.Install != "cutensor-cu13" || o.Source == "" {
		t.Errorf("optional %+v", o)
	}
	if got := o.String(); got != "libcutensor.so.2 for cupy_backends.cuda.libs.cutensor (cuTENSOR); install cutensor-cu13 to enable" {
		t.Errorf("%q", got)
	}
	if f.downloaded("libcutensor") || !f.downloaded("cuda_nvrtc") {
		t.Errorf("downloads: %v", f.mirror.Requests())
	}

	// The last undo takes the probe written for reruns with it.
	if _, err := os.Stat(last[0].Script); err != nil {
		t.Fatalf("the probe's script: %v", err)
	}
	if _, err := undo(t, context.Background(), f.prefix); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(last[0].Script)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the probes directory survived the last undo: %v", err)
	}
}

// A probe failure that names no library ends the loop at once, with a
// command that reproduces it as printed; --no-verify runs nothing.
func TestResolveProbeOtherFailure(t *testing.T) {
	f := newCupyFixture(t, nvrtcBroken, false)
	out := f.resolve(t, nil)
	if out.OK || out.Stopped != StopCheckFails || len(out.Rounds) != 1 || out.Verify.BlamesLibrary() {
		t.Fatalf("ok %v, stopped %q, rounds %d, verify %+v", out.OK, out.Stopped, len(out.Rounds), out.Verify)
	}
	p := out.Verify.Probes[0]
	if p.Name != "cupy" || p.ExitCode != 1 {
		t.Fatalf("probe %+v", p)
	}
	o, code := shellRun(t, p.Reproduce)
	if code != 1 || !strings.Contains(o, "FAILED: NVRTC compile: RuntimeError: NVRTC_ERROR_INTERNAL: the compiler gave up") || o != p.Output {
		t.Fatalf("%s: exit %d\n%s\nwant:\n%s", p.Reproduce, code, o, p.Output)
	}
	if f.mirror.Total() != 0 {
		t.Errorf("downloaded %v", f.mirror.Requests())
	}

	out = f.resolve(t, func(o *Options) { o.Verify = false })
	if !out.OK || out.Verify != nil {
		t.Fatalf("--no-verify: ok %v, verify %+v", out.OK, out.Verify)
	}
}

// --check runs the user's command instead of the probe (which would fail
// here); a library it cannot open feeds the loop.
func TestResolveCheckCommand(t *testing.T) {
	f := newCupyFixture(t, nvrtcBroken, false)
	t.Setenv("LD_LIBRARY_PATH", "")
	check := `python3 -c "import ctypes; ctypes.CDLL('libnvrtc-builtins.so.13.0'); print('ok: builtins')"`
	out := f.resolve(t, func(o *Options) { o.Check = check })
	if !out.OK {
		t.Fatalf("stopped %q, verify %+v", out.Stopped, out.Verify)
	}
	p := out.Verify.Probes
	if len(p) != 1 || p[0].Name != "check" || p[0].Command[2] != check || len(p[0].Steps) != 1 {
		t.Fatalf("probes %+v", p)
	}
	if !f.downloaded("cuda_nvrtc") || len(out.Rounds) < 2 || out.Rounds[0].Verify.Probes[0].OK {
		t.Fatalf("the check's missing library did not feed the loop: rounds %+v", out.Rounds)
	}
}

// A library that an always-loaded module needs as well is not optional.
func TestOptionalOnlyWhenOnlyOptionalModulesNeedIt(t *testing.T) {
	f := newCupyFixture(t, nvrtcBroken, true)
	out := f.resolve(t, func(o *Options) { o.DryRun = true })
	if len(out.Optional) != 0 || len(out.Rounds[0].Plan.Steps) != 1 || out.Rounds[0].Plan.Steps[0].Component != "libcutensor" {
		t.Fatalf("optional %+v, plan %+v", out.Optional, out.Rounds[0].Plan)
	}
	if need := out.Rounds[0].Missing[0]; len(need.NeededBy) != 2 {
		t.Errorf("need %+v", need)
	}
}

// TestCheckLeavesOptionalModules: CuPy's cuTENSOR module, whose library is
// absent, leaves its references unbound; resolve counts that module
// optional and the target whole. check's analysis must agree (it listed
// every cuTENSOR reference as a problem: check exited 3 on the GPU
// machine's healthy environment).
func TestCheckLeavesOptionalModules(t *testing.T) {
	f := newCupyFixture(t, nvrtcBroken, false)
	ctx := context.Background()
	target, err := FindTarget(ctx, "cupy-cuda13x", TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	a, err := Analyze(ctx, target, Options{Loader: ldso.Options{LDLibraryPath: &empty, PreloadSet: true}, Catalog: f.catalog, CUDAMajor: 13})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Outcome.Optional) == 0 {
		t.Fatalf("no optional library: %+v", a.Outcome)
	}
	var unbound int
	for _, r := range a.Report.Roots {
		unbound += len(r.UndefinedSymbols)
	}
	if unbound == 0 {
		t.Fatal("the cuTENSOR module binds every reference: the fixture tests nothing")
	}
	for _, p := range a.Problems() {
		if p.Kind == ProblemSymbol {
			t.Errorf("%+v", p)
		}
	}
}
