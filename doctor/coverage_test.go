package doctor

import (
	"context"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/libprobe"
	fb "github.com/cudadeps/cudadeps/internal/testkit/fatbintest"
	"github.com/cudadeps/cudadeps/loader/gpuarch"
)

// pciGPU lays out an NVIDIA display controller in sysfs as the kernel
// does: /sys/bus/pci/devices/ADDR links into /sys/devices.
func (h *fakeHost) pciGPU(addr, device string) {
	dir := "/sys/devices/pci0000:00/" + addr
	h.file(dir+"/vendor", "0x10de\n")
	h.file(dir+"/device", device+"\n")
	h.file(dir+"/class", "0x030200\n")
	h.link("/sys/bus/pci/devices/"+addr, "../../../devices/pci0000:00/"+addr)
}

// lib writes a library of the target with a fat binary.
func (h *fakeHost) fatbinLib(guest string, cs ...fb.Container) {
	h.t.Helper()
	if err := fb.Library(h.path(guest), path.Base(guest), cs...); err != nil {
		h.t.Fatal(err)
	}
}

// nvml makes the NVML query answer as the driver would for gpus lines.
func (h *fakeHost) nvml(gpus ...string) {
	out := "stage dlopen\nstage init\ndriver_cuda 13000\nstage count\n"
	for _, g := range gpus {
		out += g + "\n"
	}
	h.exec = func(ctx context.Context, argv []string) (libprobe.Result, error) {
		return libprobe.Result{Stdout: []byte(out + "done\n")}, nil
	}
}

func TestCoverageHealthy(t *testing.T) {
	h := newGPUHost(t)
	r := h.report()
	expect(t, r, CheckCoverage, OK, []string{"compute capability 9.0, H100", "(pci)", "the driver runs CUDA 13.0",
		"libcuda.so.1 finds /usr/lib64/libnvidia-ptxjitcompiler.so.1 → /usr/lib64/libnvidia-ptxjitcompiler.so.580.95.05 (/etc/ld.so.cache)"})
	if r.Summary.Coverage == nil || r.Summary.Coverage.Device.CC != (gpuarch.CC{Major: 9}) {
		t.Errorf("%+v", r.Summary.Coverage)
	}
}

// TestCoverageTarget: a target whose closure has a library with only
// sm_80 code, one with PTX, one with native code, on an H100.
func TestCoverageTarget(t *testing.T) {
	build := func(h *fakeHost) {
		h.fatbinLib("/opt/app/libsm80.so", fb.SASS(80))
		h.fatbinLib("/opt/app/libptx.so", fb.Container{Entries: []fb.Entry{{Kind: fb.ELF, Arch: 80}, {Kind: fb.PTX, Arch: 80, LZ: true, UncompressedSize: 3 << 20}}})
		h.fatbinLib("/opt/app/libsm90.so", fb.SASS(80, 90))
	}
	t.Run("h100", func(t *testing.T) {
		h := newGPUHost(t)
		build(h)
		r := h.reportFor("/opt/app")
		expect(t, r, CheckCoverage, Fail, []string{"1 of app's libraries carry nothing that runs on 9.0: libsm80.so (nothing runs on 9.0: carries sm_80)",
			"1 of app's libraries have no native code for 9.0 and rely on the driver compiling 3.0 MiB of PTX at first use: libptx.so",
			"1 of app's libraries carry native code for 9.0", "libnvidia-ptxjitcompiler.so.1"}, "install a build of app made for compute capability 9.0")
	})
	t.Run("no-ptx-jit-compiler", func(t *testing.T) {
		h := newGPUHost(t)
		build(h)
		h.remove("/opt/app/libsm80.so")
		h.remove("/usr/lib64/libnvidia-ptxjitcompiler.so.1")
		h.file("/.dockerenv", "")
		r := h.reportFor("/opt/app")
		expect(t, r, CheckCoverage, Fail, []string{"libcuda.so.1 finds no libnvidia-ptxjitcompiler.so.1", "CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221"},
			"have the container runtime mount libnvidia-ptxjitcompiler.so.1")
	})
	t.Run("sm", func(t *testing.T) {
		// --sm plans for an Ampere GPU: every library has sm_80 code.
		h := newGPUHost(t)
		build(h)
		opts := h.options()
		opts.Target = h.path("/opt/app")
		opts.Device = gpuarch.FromFlag(gpuarch.CC{Major: 8, Minor: 0}, nil)
		r := h.run(opts)
		expect(t, r, CheckCoverage, OK, []string{"compute capability 8.0 (--sm)", "3 of app's libraries carry native code for 8.0"})
	})
}

// TestCoverageNVML: NVML's answer wins over the PCI table, and where they
// disagree doctor says so.
func TestCoverageNVML(t *testing.T) {
	h := newGPUHost(t)
	h.nvml("gpu 0 9 0 233010de NVIDIA H100 80GB HBM3", "gpu 1 9 0 233010de NVIDIA H100 80GB HBM3")
	opts := h.options()
	opts.NVMLCommand, opts.NVMLVia = []string{"nvml-query"}, "test"
	r := h.run(opts)
	expect(t, r, CheckCoverage, OK, []string{"compute capability 9.0, NVIDIA H100 80GB HBM3 (nvml through test)", "pci agrees (10de:2330)"})

	h = newGPUHost(t)
	h.nvml("gpu 0 8 0 20b210de NVIDIA A100-SXM4-80GB")
	opts = h.options()
	opts.NVMLCommand = []string{"nvml-query"}
	r = h.run(opts)
	expect(t, r, CheckCoverage, Warn, []string{"compute capability 8.0, NVIDIA A100-SXM4-80GB (nvml)", "but pci says 9.0 for GPU 0"}, "trust NVML")
}

// TestCoverageNVMLKept: with a cache, the second doctor takes NVML's
// answer from it and says when NVML gave it; without one (--no-cache) it
// asks again.
func TestCoverageNVMLKept(t *testing.T) {
	h := newGPUHost(t)
	lib := h.path("/usr/lib64/libnvidia-ml.so.580.95.05")
	h.file("/usr/lib64/libnvidia-ml.so.580.95.05", "nvml")
	queries := 0
	h.exec = func(ctx context.Context, argv []string) (libprobe.Result, error) {
		queries++
		return libprobe.Result{Stdout: []byte("stage dlopen\nloaded " + lib + "\nstage init\ndriver_cuda 13000\nstage count\ngpu 0 9 0 233010de NVIDIA H100 80GB HBM3\ndone\n")}, nil
	}
	opts := h.options()
	opts.NVMLCommand, opts.NVMLVia, opts.Cache = []string{"nvml-query"}, "test", factcache.At(t.TempDir())
	r := h.run(opts)
	expect(t, r, CheckCoverage, OK, []string{"compute capability 9.0, NVIDIA H100 80GB HBM3 (nvml through test)"})
	if ev := get(t, r, CheckCoverage).Evidence; strings.Contains(ev, "kept from") || queries != 1 {
		t.Errorf("first run, %d queries: %s", queries, ev)
	}
	r = h.run(opts)
	ev := get(t, r, CheckCoverage).Evidence
	kept := r.Summary.Coverage.Device.Sources[0].KeptFrom
	if queries != 1 || kept == nil || !strings.Contains(ev, "(nvml through test, kept from "+kept.Format(time.RFC3339)+")") {
		t.Errorf("second run, %d queries: %s", queries, ev)
	}
	opts.Cache = factcache.Dir{}
	r = h.run(opts)
	if ev := get(t, r, CheckCoverage).Evidence; strings.Contains(ev, "kept from") || queries != 2 {
		t.Errorf("without the cache, %d queries: %s", queries, ev)
	}
}
