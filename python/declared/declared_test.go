package declared

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/testkit/torchenv"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// linux312 are the marker values of CPython 3.12 on x86_64 Linux.
var linux312 = pyenv.Markers{
	"implementation_name": "cpython", "implementation_version": "3.12.3", "os_name": "posix",
	"platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "6.8.0",
	"platform_system": "Linux", "platform_version": "#1 SMP", "python_full_version": "3.12.3",
	"python_version": "3.12", "sys_platform": "linux",
}

type fixture struct {
	site string
	in   Input
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	site := torchenv.Build(t, torchenv.Options{})
	return &fixture{site: site}
}

// compute reads the closure of target as the environment is now; needs
// lists the sonames the package's objects need.
func (f *fixture) compute(t *testing.T, target string, needs ...string) *Closure {
	t.Helper()
	env, err := pyenv.FromSiteDir(f.site, "")
	if err != nil {
		t.Fatal(err)
	}
	env.Markers = linux312
	dist, err := env.Find(target)
	if err != nil {
		t.Fatal(err)
	}
	dists, err := catalog.EmbeddedDistributions()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := catalog.EmbeddedWheelRecords()
	if err != nil {
		t.Fatal(err)
	}
	in := f.in
	in.Env, in.Target, in.Distributions, in.Records = env, dist, dists, recs
	if len(needs) > 0 {
		in.Needs = func(s string) bool { return slices.Contains(needs, s) }
	}
	cl, err := Compute(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// torchPins are the versions torch 2.11.0+cu130 declares, directly and
// through cuda-toolkit[...]==13.0.2, read off the real METADATA.
var torchPins = map[string]string{
	"cuda-toolkit": "13.0.2", "nvidia-cublas": "13.1.0.3", "nvidia-cuda-cupti": "13.0.85", "nvidia-cuda-nvrtc": "13.0.88",
	"nvidia-cuda-runtime": "13.0.96", "nvidia-cudnn-cu13": "9.19.0.56", "nvidia-cufft": "12.0.0.61", "nvidia-cufile": "1.15.1.6",
	"nvidia-curand": "10.4.0.35", "nvidia-cusolver": "12.0.4.66", "nvidia-cusparse": "12.6.3.3", "nvidia-cusparselt-cu13": "0.8.0",
	"nvidia-nccl-cu13": "2.28.9", "nvidia-nvjitlink": "13.0.88", "nvidia-nvshmem-cu13": "3.4.5", "nvidia-nvtx": "13.0.85",
}

func checkPins(t *testing.T, cl *Closure, state State) {
	t.Helper()
	if len(cl.Dists) != len(torchPins) {
		t.Errorf("closure has %d distributions, want %d:\n%s", len(cl.Dists), len(torchPins), cl)
	}
	for name, v := range torchPins {
		d := cl.Find(name)
		if d == nil {
			t.Errorf("%s is not in the closure", name)
			continue
		}
		if d.Version != v || d.Choice != Pinned {
			t.Errorf("%s: version %s (%s), want %s pinned", name, d.Version, d.Choice, v)
		}
		want := state
		if name == "cuda-toolkit" {
			want = Intact // pip uninstall nvidia-* leaves it
		}
		if d.State != want {
			t.Errorf("%s: state %s (%s), want %s", name, d.State, d.Detail, want)
		}
		if name != "cuda-toolkit" && len(d.Libraries()) == 0 {
			t.Errorf("%s: no library paths known (layout %q)", name, d.Layout)
		}
	}
	if d := cl.Find("cuda-toolkit"); d == nil || !d.MetadataOnly {
		t.Errorf("cuda-toolkit is not marked metadata-only: %+v", d)
	}
}

func TestTorchClosureIntactAndUninstalled(t *testing.T) {
	f := newFixture(t)
	cl := f.compute(t, "torch")
	checkPins(t, cl, Intact)
	if d := cl.Find("nvidia-cudnn-cu13"); d.Layout != "its installed RECORD" || d.Installer != "uv" {
		t.Errorf("cuDNN: layout %q installer %q", d.Layout, d.Installer)
	}

	torchenv.Uninstall(t, f.site, torchenv.NVIDIA()...)
	if _, err := os.Stat(filepath.Join(f.site, "nvidia", "cu13")); err == nil {
		t.Fatal("uninstall left nvidia/cu13 behind")
	}
	cl = f.compute(t, "torch")
	checkPins(t, cl, Absent)
	d := cl.Find("nvidia-cudnn-cu13")
	if !strings.HasPrefix(d.Layout, "the RECORD of nvidia-cudnn-cu13 9.19.0.56") || !d.Owns("libcudnn_graph.so.9") {
		t.Errorf("absent cuDNN: layout %q, files %d", d.Layout, len(d.Files))
	}
	if o := cl.Owner("libcublasLt.so.13"); o == nil || o.Name != "nvidia-cublas" {
		t.Errorf("owner of libcublasLt.so.13: %+v", o)
	}

	// Without cuda-toolkit too, its pins come from the table's record of
	// the release torch pins.
	torchenv.Uninstall(t, f.site, "cuda-toolkit")
	cl = f.compute(t, "torch")
	if d := cl.Find("cuda-toolkit"); d == nil || d.State != Absent || d.Version != "13.0.2" {
		t.Fatalf("cuda-toolkit: %+v", d)
	}
	if d := cl.Find("nvidia-cufile"); d == nil || d.Version != "1.15.1.6" || d.Choice != Pinned {
		t.Errorf("cuFile through an absent cuda-toolkit: %+v", d)
	}
}

// The JAX plugin declares its CUDA libraries under an extra with ranges:
// the extra counts because the package needs a library it brings, and each
// range takes the version torch pins in the same environment.
func TestJAXPluginExtraAndRanges(t *testing.T) {
	f := newFixture(t)
	torchenv.Uninstall(t, f.site, torchenv.NVIDIA()...)
	without := f.compute(t, "jax-cuda13-plugin")
	if len(without.Extras) != 0 || len(without.Dists) != 0 {
		t.Errorf("with no library needed, no extra counts: %+v %s", without.Extras, without)
	}
	cl := f.compute(t, "jax-cuda13-plugin", "libcublas.so.13", "libcudnn.so.9")
	if len(cl.Extras) != 1 || cl.Extras[0].Name != "with-cuda" || !strings.Contains(cl.Extras[0].Why, ".so") {
		t.Fatalf("extras: %+v", cl.Extras)
	}
	d := cl.Find("nvidia-cudnn-cu13")
	if d == nil || d.Version != "9.19.0.56" || d.Choice != FromRange || !strings.Contains(d.Why, "torch 2.11.0") {
		t.Errorf("cuDNN for the JAX plugin: %+v", d)
	}
	if d := cl.Find("nvidia-cublas"); d == nil || d.Version != "13.1.0.3" || !strings.Contains(d.Why, "pins 13.1.0.3") {
		t.Errorf("cuBLAS for the JAX plugin: %+v", d)
	}
	// nvidia-cuda-nvcc is declared and was never installed: the
	// environment's cuda-toolkit 13.0.2 names its release, though no one
	// requested its extra; it comes only through the counted extra.
	if d := cl.Find("nvidia-cuda-nvcc"); d == nil || d.State != Absent || d.Version != "13.0.88" || !strings.Contains(d.Why, "toolkit release") || d.ViaExtra != "with-cuda" {
		t.Errorf("nvcc: %+v", d)
	}
	if d := cl.Find("nvidia-cudnn-cu13"); d.ViaExtra != "with-cuda" {
		t.Errorf("cuDNN comes through the extra: %q", d.ViaExtra)
	}
}

// CuPy's [ctk] extra requires cuda-toolkit==13.*: the range takes torch's
// 13.0.2, and through it every toolkit pin.
func TestCuPyToolkitRange(t *testing.T) {
	f := newFixture(t)
	cl := f.compute(t, "cupy-cuda13x", "libcublas.so.13", "libcufft.so.12")
	if len(cl.Extras) != 1 || cl.Extras[0].Name != "ctk" {
		t.Fatalf("extras: %+v", cl.Extras)
	}
	if d := cl.Find("cuda-toolkit"); d == nil || d.Version != "13.0.2" || d.State != Intact {
		t.Errorf("cuda-toolkit: %+v", d)
	}
	if d := cl.Find("nvidia-curand"); d == nil || d.Version != "10.4.0.35" || d.Choice != Pinned {
		t.Errorf("cuRAND: %+v", d)
	}
	if cl.Find("nvidia-cudnn-cu13") != nil {
		t.Error("CuPy's closure does not declare cuDNN")
	}
}

// A damaged distribution, one at another version, and two distributions
// that write the same path.
func TestStatesDamagedOtherVersionConflict(t *testing.T) {
	f := newFixture(t)
	if err := os.Remove(filepath.Join(f.site, "nvidia", "cu13", "lib", "libcufft.so.12")); err != nil {
		t.Fatal(err)
	}
	rewriteVersion(t, f.site, "nvidia_cusparselt_cu13-0.8.0.dist-info", "0.8.0", "0.7.1")
	torchenv.Uninstall(t, f.site, "nvidia-cudnn-cu13")
	cu12 := filepath.Join(f.site, "nvidia_cudnn_cu12-9.10.2.21.dist-info")
	writeDistInfo(t, cu12, "nvidia-cudnn-cu12", "9.10.2.21", "nvidia/cudnn/lib/libcudnn.so.9,sha256=AAAA,10\n")
	cl := f.compute(t, "torch")
	lib := filepath.Join(f.site, "nvidia", "cu13", "lib", "libcufft.so.12")
	if d := cl.Find("nvidia-cufft"); d.State != Damaged || !strings.Contains(d.Detail, "missing") || !slices.Equal(d.Damage, []string{lib}) {
		t.Errorf("cuFFT: %s %s %q", d.State, d.Detail, d.Damage)
	}
	// A file cudadeps placed at a RECORD path, of another size than the
	// RECORD's, is the distribution's.
	if err := os.WriteFile(lib, []byte("an archive's copy"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.in.Placed = map[string]bool{lib: true}
	if d := f.compute(t, "torch").Find("nvidia-cufft"); d.State != Intact || d.Damage != nil {
		t.Errorf("cuFFT placed: %s %s %q", d.State, d.Detail, d.Damage)
	}
	f.in.Placed = nil
	if d := f.compute(t, "torch").Find("nvidia-cufft"); d.State != Damaged || !strings.Contains(d.Detail, "wrong size (libcufft.so.12)") {
		t.Errorf("cuFFT of another size, not placed: %s %s", d.State, d.Detail)
	}
	if d := cl.Find("nvidia-cusparselt-cu13"); d.State != OtherVersion || d.InstalledVersion != "0.7.1" || d.Version != "0.8.0" {
		t.Errorf("cuSPARSELt: %+v", d)
	}
	d := cl.Find("nvidia-cudnn-cu13")
	if d.State != Absent || len(d.Conflicts) != 1 || !strings.Contains(d.Conflicts[0], "nvidia-cudnn-cu12 9.10.2.21 also writes nvidia/cudnn/lib/libcudnn.so.9") {
		t.Errorf("cuDNN cu13 beside cu12: %+v", d.Conflicts)
	}
}

// Supplied distributions are recognised, and lose that state when their
// files go.
func TestSupplied(t *testing.T) {
	f := newFixture(t)
	torchenv.Uninstall(t, f.site, "nvidia-cusparselt-cu13")
	lib := filepath.Join(f.site, "nvidia", "cusparselt", "lib", "libcusparseLt.so.0")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.in.Supplied = []Supply{{Name: "nvidia-cusparselt-cu13", Version: "0.8.0", From: "libcusparse_lt 0.8.0.4 (linux-x86_64, cuda13)", Files: []string{lib}, Site: f.site}}
	if d := f.compute(t, "torch").Find("nvidia-cusparselt-cu13"); d.State != Supplied {
		t.Errorf("supplied: %+v", d)
	}
	if err := os.Remove(lib); err != nil {
		t.Fatal(err)
	}
	if d := f.compute(t, "torch").Find("nvidia-cusparselt-cu13"); d.State != Damaged {
		t.Errorf("supplied then removed: %+v", d)
	}
}

func rewriteVersion(t *testing.T, site, infoDir, from, to string) {
	t.Helper()
	p := filepath.Join(site, infoDir, "METADATA")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), "Version: "+from+"\n", "Version: "+to+"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeDistInfo(t *testing.T, dir, name, version, record string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for base, data := range map[string]string{
		"METADATA": "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n",
		"RECORD":   record,
		"WHEEL":    "Wheel-Version: 1.0\nTag: py3-none-manylinux_2_27_x86_64\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, base), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
