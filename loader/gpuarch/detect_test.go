package gpuarch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/libprobe"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

func TestTables(t *testing.T) {
	tb, err := LoadTables()
	if err != nil {
		t.Fatal(err)
	}
	// The devices the project's users have, by the names --sm takes.
	for alias, want := range map[string]CC{"orin": {8, 7}, "thor": {11, 0}, "gb10": {12, 1}, "gh200": {9, 0}, "h100": {9, 0},
		"b200": {10, 0}, "b300": {10, 3}, "rtx50": {12, 0}, "a100": {8, 0}, "l4": {8, 9}} {
		got, _, err := tb.ParseSM(alias)
		if err != nil || got != want {
			t.Errorf("--sm %s = %v %v, want %v", alias, got, err, want)
		}
	}
	if got, k, err := tb.ParseSM("9.0"); err != nil || got != (CC{9, 0}) || k == nil {
		t.Errorf("--sm 9.0: %v %v %v", got, k, err)
	}
	if _, _, err := tb.ParseSM("hopperish"); err == nil || !strings.Contains(err.Error(), "thor") {
		t.Errorf("a bad --sm: %v", err)
	}
	if d := tb.ByPCI(0x2330); d == nil || d.cc != (CC{9, 0}) {
		t.Errorf("10de:2330 (H100 SXM5): %+v", d)
	}
	if d := tb.ByPCI(0x1234); d != nil {
		t.Errorf("10de:1234 is known: %+v", d)
	}
	if d := tb.ByTegra("nvidia,tegra234"); d == nil || d.cc != (CC{8, 7}) {
		t.Errorf("tegra234: %+v", d)
	}
	if b := tb.Builder("/x/nvidia/cu13/lib/libcufft.so.12"); b == nil || !strings.Contains(b.How, "NVRTC") {
		t.Errorf("libcufft: %+v", b)
	}
	if b := tb.Builder("/x/libcublas.so.13"); b != nil {
		t.Errorf("libcublas builds: %+v", b)
	}
	for _, bad := range []string{
		"- {name: x, cc: '9', source: s}",
		"- {name: x, cc: '9.0'}",
		"- {name: x, cc: '9.0', source: s, pci: ['0x2300-0x2200']}",
		"- {name: x, cc: '9.0', source: s, pci: ['0x2300-0x23ff']}\n- {name: y, cc: '8.0', source: s, pci: ['0x2330']}",
		"- {name: x, cc: '9.0', source: s, aliases: [a]}\n- {name: y, cc: '8.0', source: s, aliases: [a]}",
	} {
		if _, err := ParseTables([]byte(bad), nil); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// fakeSystem writes the files a host shows: PCI devices as sysfs lays
// them out (links into /sys/devices) and a device tree.
func fakeSystem(t testing.TB, pci map[string][3]string, compatible string) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, s string) {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/bus/pci/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	for addr, attrs := range pci {
		for i, name := range []string{"vendor", "device", "class"} {
			write(filepath.Join("sys/devices/pci0000:00", addr, name), attrs[i]+"\n")
		}
		if err := os.Symlink("../../../devices/pci0000:00/"+addr, filepath.Join(root, "sys/bus/pci/devices", addr)); err != nil {
			t.Fatal(err)
		}
	}
	if compatible != "" {
		write("proc/device-tree/compatible", compatible)
	}
	return root
}

func TestDetectPCIAndDeviceTree(t *testing.T) {
	ctx := context.Background()
	root := fakeSystem(t, map[string][3]string{
		"0000:17:00.0": {"0x10de", "0x2330", "0x030200"}, // H100 SXM5
		"0000:18:00.0": {"0x10de", "0x22a3", "0x068000"}, // NVSwitch: not a GPU
		"0000:19:00.1": {"0x10de", "0x2330", "0x040300"}, // an audio function
		"0000:01:00.0": {"0x1002", "0x2330", "0x030000"}, // another vendor
	}, "")
	d, err := Detect(ctx, DetectOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if d.CC != (CC{9, 0}) || d.Source != SourcePCI || len(d.Sources) != 2 || len(d.Sources[0].GPUs) != 1 ||
		d.Sources[0].GPUs[0].PCIID != "10de:2330" || d.Sources[0].GPUs[0].Address != "0000:17:00.0" || d.Sources[1].Error == "" {
		t.Errorf("%+v", d)
	}

	// A Jetson: no PCI GPU, the SoC in the device tree.
	root = fakeSystem(t, nil, "nvidia,p3737-0000+p3701-0000\x00nvidia,p3701-0000\x00nvidia,tegra234\x00")
	d, _ = Detect(ctx, DetectOptions{Root: root})
	if d.CC != (CC{8, 7}) || d.Source != SourceDeviceTree || !strings.Contains(d.Sources[0].Error, "no NVIDIA display controller") {
		t.Errorf("%+v", d)
	}
	// A GPU the table does not know is named, not guessed.
	root = fakeSystem(t, map[string][3]string{"0000:03:00.0": {"0x10de", "0x1234", "0x030000"}}, "")
	d, _ = Detect(ctx, DetectOptions{Root: root})
	if d.Known() || !strings.Contains(d.Sources[0].Error, "10de:1234 is not in the device table") {
		t.Errorf("%+v", d)
	}
	// Failures names each source that failed, and why.
	if f := d.Failures(); len(f) != 2 || !strings.HasPrefix(f[0], SourcePCI+": ") || !strings.Contains(f[0], "10de:1234") ||
		!strings.HasPrefix(f[1], SourceDeviceTree+": ") {
		t.Errorf("failures %q", f)
	}
	// Nothing at all.
	d, _ = Detect(ctx, DetectOptions{Root: t.TempDir()})
	if d.Known() || len(d.Sources) != 2 {
		t.Errorf("%+v", d)
	}
}

// TestDetectNVML: NVML is asked first and wins; its driver version comes
// along; a failed query leaves the table's answer.
func TestDetectNVML(t *testing.T) {
	ctx := context.Background()
	root := fakeSystem(t, map[string][3]string{"0000:17:00.0": {"0x10de", "0x2330", "0x030200"}}, "")
	answer := func(out string) libprobe.Exec {
		return func(ctx context.Context, argv []string) (libprobe.Result, error) {
			return libprobe.Result{Stdout: []byte(out)}, nil
		}
	}
	d, _ := Detect(ctx, DetectOptions{Root: root, NVMLCommand: []string{"q"}, Via: "test",
		Exec: answer("stage dlopen\nstage init\ndriver_cuda 13000\nstage count\ncount 2\ngpu 0 9 0 233010de NVIDIA H100 80GB HBM3\ngpu 1 8 0 20b210de NVIDIA A100-SXM4-80GB\ndone\n")})
	if d.CC != (CC{9, 0}) || d.Source != SourceNVML || d.Name != "NVIDIA H100 80GB HBM3" || d.Driver() != (Version{13, 0}) ||
		d.Sources[0].GPUs[1].PCIID != "10de:20b2" || !strings.Contains(d.Note, "several compute capabilities (9.0, and 8.0)") ||
		d.Sources[1].GPUs[0].CC != (CC{9, 0}) {
		t.Errorf("%+v", d)
	}
	for out, msg := range map[string]string{
		"stage dlopen\nerror dlopen libnvidia-ml.so.1: cannot open shared object file\n": "cannot load libnvidia-ml.so.1",
		"stage dlopen\nstage init\nerror init nvmlInit_v2 returned 9\n":                  "NVML_ERROR_DRIVER_NOT_LOADED",
		"stage dlopen\nstage init\n":                             "stopped in init",
		"stage dlopen\nstage init\nstage count\ncount 0\ndone\n": "NVML sees no GPU",
	} {
		d, _ := Detect(ctx, DetectOptions{Root: root, NVMLCommand: []string{"q"}, Exec: answer(out)})
		if d.Source != SourcePCI || !strings.Contains(d.Sources[0].Error, msg) {
			t.Errorf("%q: %+v", out, d.Sources[0])
		}
	}
}

// fakeNVMLC is a libnvidia-ml.so.1 with real code: one H100 and one
// A100, driver CUDA 13.0.
const fakeNVMLC = `
#include <string.h>
typedef struct { char legacy[16]; unsigned domain, bus, device, pciDeviceId, sub; char busId[32]; } pci_t;
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 13000; return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { *h = (void *)(long)(i + 1); return 0; }
int nvmlDeviceGetCudaComputeCapability(void *h, int *ma, int *mi) { *ma = h == (void *)1 ? 9 : 8; *mi = 0; return 0; }
int nvmlDeviceGetName(void *h, char *name, unsigned n) { strncpy(name, h == (void *)1 ? "Fake H100" : "Fake A100", n); return 0; }
int nvmlDeviceGetPciInfo_v3(void *h, pci_t *p) { memset(p, 0, sizeof *p); p->pciDeviceId = h == (void *)1 ? 0x233010de : 0x20b210de; return 0; }
`

// buildFakeNVML compiles fakeNVMLC into dir/libnvidia-ml.so.1.
func buildFakeNVML(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	buildFakeNVMLIn(t, dir)
	return dir
}

// buildFakeNVMLIn compiles fakeNVMLC into dir/libnvidia-ml.so.1,
// replacing what is there.
func buildFakeNVMLIn(t testing.TB, dir string) {
	t.Helper()
	cc, err := exec.LookPath("cc")
	lddtest.Need(t, err == nil, "no C compiler")
	src := filepath.Join(dir, "fake.c")
	if err := os.WriteFile(src, []byte(fakeNVMLC), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cc, "-shared", "-fPIC", "-Wl,-soname,libnvidia-ml.so.1", "-o", filepath.Join(dir, "libnvidia-ml.so.1"), src).CombinedOutput()
	lddtest.Need(t, err == nil, "cannot build a shared library: %v\n%s", err, out)
}

// withEnv runs commands with extra environment variables.
func withEnv(env ...string) libprobe.Exec {
	return libprobe.RunCommand(append(os.Environ(), env...))
}

func checkFakeNVML(t *testing.T, d *Device, dir string) {
	t.Helper()
	r := d.Sources[0]
	if d.Source != SourceNVML || d.CC != (CC{9, 0}) || d.Driver() != (Version{13, 0}) || len(r.GPUs) != 2 || r.Library != filepath.Join(dir, "libnvidia-ml.so.1") ||
		r.GPUs[0].Name != "Fake H100" || r.GPUs[0].PCIID != "10de:2330" || r.GPUs[1].CC != (CC{8, 0}) || r.GPUs[1].PCIID != "10de:20b2" {
		t.Errorf("%+v", d)
	}
}

// TestNVMLScript runs the Python query against an NVML with code.
func TestNVMLScript(t *testing.T) {
	python, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "no python3")
	dir := buildFakeNVML(t)
	d, err := Detect(context.Background(), DetectOptions{Root: t.TempDir(), NVMLCommand: []string{python, "-c", NVMLScript},
		Exec: withEnv("LD_LIBRARY_PATH=" + dir)})
	if err != nil {
		t.Fatal(err)
	}
	checkFakeNVML(t, d, dir)
	// No NVML at all.
	d, _ = Detect(context.Background(), DetectOptions{Root: t.TempDir(), NVMLCommand: []string{python, "-c", NVMLScript},
		Exec: withEnv("LD_LIBRARY_PATH=" + t.TempDir())})
	if d.Known() || !strings.Contains(d.Sources[0].Error, "cannot load libnvidia-ml.so.1") {
		t.Errorf("%+v", d.Sources[0])
	}
}
