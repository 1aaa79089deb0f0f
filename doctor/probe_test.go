package doctor

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/libprobe"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// childSays is a probe subprocess that printed out and ended as res says.
func childSays(out string, res libprobe.Result) libprobe.Exec {
	return func(ctx context.Context, argv []string) (libprobe.Result, error) {
		res.Stdout = []byte(out)
		return res, nil
	}
}

const loadedOK = "stage dlopen\nstage dlsym\nloaded /usr/lib64/libcuda.so.580.95.05\nstage cuInit\n"

func TestProbeVerdicts(t *testing.T) {
	cases := []struct {
		name      string
		setup     func(h *fakeHost)
		out       string
		res       libprobe.Result
		status    Status
		evidence  []string
		advice    []string
		summaryOK func(p *ProbeResult) bool
	}{
		{"success", nil, loadedOK + "init 0\nstage cuDriverGetVersion\nversion 13000\nstage cuDeviceGetCount\ncount_result 0\ncount 8\ndone\n", libprobe.Result{},
			OK, []string{"cuInit(0) = 0 CUDA_SUCCESS (/usr/lib64/libcuda.so.580.95.05), driver CUDA 13.0, 8 device(s)"}, nil,
			func(p *ProbeResult) bool { return *p.Devices == 8 && *p.DriverCUDA == 13000 && p.Stage == "done" }},
		// Seed 001: the container sees the GPU, cuInit says 999.
		{"unknown-in-container", func(h *fakeHost) { h.file("/.dockerenv", "") }, loadedOK + "init 999\nstage cuDriverGetVersion\nversion 13000\nstage cuDeviceGetCount\ncount_result 3\ncount 0\ndone\n", libprobe.Result{},
			Fail, []string{"cuInit(0) = 999 CUDA_ERROR_UNKNOWN"}, []string{"docker run --gpus all", "nvidia-container-toolkit"}, nil},
		{"unknown-on-host", nil, loadedOK + "init 999\ndone\n", libprobe.Result{},
			Fail, []string{"999 CUDA_ERROR_UNKNOWN"}, []string{"modprobe nvidia-uvm"}, nil},
		{"no-device-hidden", func(h *fakeHost) { h.env["CUDA_VISIBLE_DEVICES"] = "" }, loadedOK + "init 100\ndone\n", libprobe.Result{},
			Fail, []string{"cuInit(0) = 100 CUDA_ERROR_NO_DEVICE"}, []string{`CUDA_VISIBLE_DEVICES="" hides the GPUs`}, nil},
		{"stub", nil, "stage dlopen\nstage dlsym\nloaded /usr/local/cuda/lib64/stubs/libcuda.so\nstage cuInit\ninit 34\ndone\n", libprobe.Result{},
			Fail, []string{"34 CUDA_ERROR_STUB_LIBRARY (/usr/local/cuda/lib64/stubs/libcuda.so)"}, []string{"stubs directory"}, nil},
		{"mismatch", nil, loadedOK + "init 803\ndone\n", libprobe.Result{}, Fail, []string{"803 CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"}, []string{"reboot"}, nil},
		{"compat-on-consumer-gpu", nil, loadedOK + "init 804\ndone\n", libprobe.Result{}, Fail, []string{"804 CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"}, []string{"data-center"}, nil},
		{"fabric-manager", nil, loadedOK + "init 802\ndone\n", libprobe.Result{}, Fail, []string{"802 CUDA_ERROR_SYSTEM_NOT_READY"}, []string{"nvidia-fabricmanager"}, nil},
		{"unknown-code", nil, loadedOK + "init 12345\ndone\n", libprobe.Result{}, Fail, []string{"cuInit(0) = 12345 CUresult 12345"}, []string{"cuda.h"}, nil},
		{"count-fails", nil, loadedOK + "init 0\nstage cuDriverGetVersion\nversion 12080\nstage cuDeviceGetCount\ncount_result 101\ncount 0\ndone\n", libprobe.Result{},
			Fail, []string{"driver CUDA 12.8, but cuDeviceGetCount = 101 CUDA_ERROR_INVALID_DEVICE"}, []string{"CUDA_VISIBLE_DEVICES"}, nil},
		{"zero-devices", nil, loadedOK + "init 0\ncount_result 0\ncount 0\ndone\n", libprobe.Result{}, Fail, []string{"but 0 devices"}, []string{"nvidia-smi"}, nil},
		{"no-libcuda", nil, "stage dlopen\nerror dlopen libcuda.so.1: cannot open shared object file: No such file or directory\n", libprobe.Result{},
			Fail, []string{`dlopen("libcuda.so.1") failed: libcuda.so.1: cannot open shared object file`}, []string{"libcuda check"}, nil},
		{"not-a-driver", nil, "stage dlopen\nstage dlsym\nerror dlsym /x/libcuda.so.1: undefined symbol: cuInit\n", libprobe.Result{},
			Fail, []string{"libcuda.so.1 has no cuInit (/x/libcuda.so.1: undefined symbol: cuInit)"}, []string{"first on the library path"}, nil},
		{"crash-in-cuInit", nil, loadedOK, libprobe.Result{ExitCode: -1, Signal: "SIGSEGV", Stderr: []byte("Segmentation fault\n")},
			Fail, []string{"the probe died (SIGSEGV) in cuInit of /usr/lib64/libcuda.so.580.95.05: Segmentation fault"}, []string{"shims and interposers"},
			func(p *ProbeResult) bool { return p.Died == "SIGSEGV" && p.Init == nil }},
		{"exit-without-result", nil, "stage dlopen\n", libprobe.Result{ExitCode: 3},
			Fail, []string{"the probe died (exit status 3) in dlopen"}, nil, nil},
		{"hang", nil, loadedOK, libprobe.Result{ExitCode: -1, Signal: "SIGKILL", TimedOut: true},
			Fail, []string{"the probe died (killed after 1m0s) in cuInit"}, []string{"cuInit hangs"}, func(p *ProbeResult) bool { return p.TimedOut }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newGPUHost(t)
			if c.setup != nil {
				c.setup(h)
			}
			h.exec = childSays(c.out, c.res)
			opts := h.options()
			opts.Probe, opts.ProbeCommand = true, []string{"probe"}
			r := h.run(opts)
			expect(t, r, CheckProbe, c.status, c.evidence, c.advice...)
			if r.Summary.Probe == nil {
				t.Fatal("no probe in the summary")
			}
			if c.summaryOK != nil && !c.summaryOK(r.Summary.Probe) {
				t.Errorf("summary probe %+v", r.Summary.Probe)
			}
		})
	}
}

func TestProbeNotRun(t *testing.T) {
	t.Run("no-command", func(t *testing.T) {
		h := newGPUHost(t)
		opts := h.options()
		opts.System.Exec = func(ctx context.Context, argv []string) (libprobe.Result, error) {
			t.Error("probe ran without a command")
			return libprobe.Result{}, nil
		}
		opts.Probe = true
		r := h.run(opts)
		expect(t, r, CheckProbe, Warn, []string{"not run", "no python3"})
	})
	t.Run("cannot-start", func(t *testing.T) {
		h := newGPUHost(t)
		opts := h.options()
		opts.System.Exec = libprobe.RunCommand(nil)
		opts.Probe, opts.ProbeCommand = true, []string{filepath.Join(t.TempDir(), "no-such-python")}
		r := h.run(opts)
		expect(t, r, CheckProbe, Warn, []string{"not run: cannot start", "no-such-python"})
	})
}

func TestParseProbe(t *testing.T) {
	p := probeResult(libprobe.Parse([]byte("stage dlopen\nstage dlsym\nloaded /opt/with space/libcuda.so.1\nstage cuInit\ninit -1\ngarbage line\nversion x\n")))
	if p.Stage != "cuInit" || p.Loaded != "/opt/with space/libcuda.so.1" || p.Init == nil || *p.Init != -1 || p.DriverCUDA != nil {
		t.Errorf("%+v", p)
	}
}

// TestProbeScriptReal runs ProbeScript in a real python3 against libraries
// made for the purpose, put first by LD_LIBRARY_PATH: the real loader, the
// real dlopen, a real crash.
func TestProbeScriptReal(t *testing.T) {
	python, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "no python3")
	probe := func(t *testing.T, spec elfwrite.Spec, patch func([]byte)) (*ProbeResult, string) {
		dir := t.TempDir()
		b, err := elfwrite.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		if patch != nil {
			patch(b)
		}
		if err := os.WriteFile(filepath.Join(dir, "libcuda.so.1"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		env := append(os.Environ(), "LD_LIBRARY_PATH="+dir)
		h := newGPUHost(t)
		opts := h.options()
		opts.System.Exec = libprobe.RunCommand(env)
		opts.Probe, opts.ProbeCommand = true, []string{python, "-c", ProbeScript}
		r := h.run(opts)
		return r.Summary.Probe, dir
	}
	t.Run("not-a-driver", func(t *testing.T) {
		spec := elfwrite.Spec{Soname: "libcuda.so.1", Symbols: []elfwrite.Symbol{{Name: "cuNothing", Defined: true, Func: true}}}
		p, _ := probe(t, spec, nil)
		if p.Stage != "dlsym" || !strings.Contains(p.Error, "cuInit") || p.Died != "" {
			t.Errorf("%+v", p)
		}
	})
	t.Run("crash", func(t *testing.T) {
		// cuInit points into the object's only segment, which is not
		// executable: calling it kills the process with SIGSEGV, which must
		// not kill doctor.
		spec := elfwrite.Spec{Soname: "libcuda.so.1", Symbols: []elfwrite.Symbol{{Name: "cuInit", Defined: true, Func: true}}}
		p, dir := probe(t, spec, func(b []byte) { setSymbolValue(t, b, "cuInit", 0x40) })
		if p.Died != "SIGSEGV" || p.Stage != "cuInit" || p.Init != nil {
			t.Errorf("%+v (stderr %q)", p, p.Stderr)
		}
		if want := filepath.Join(dir, "libcuda.so.1"); p.Loaded != want {
			t.Errorf("loaded %q, want %q", p.Loaded, want)
		}
	})
}

// setSymbolValue gives a dynamic symbol of an elfwrite object an address
// (the loader ignores symbols whose value is 0).
func setSymbolValue(t *testing.T, b []byte, name string, value uint64) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	dynsym := f.Section(".dynsym")
	for i, s := range syms {
		if s.Name == name {
			// DynamicSymbols skips the null symbol: entry i+1, st_value at 8.
			binary.LittleEndian.PutUint64(b[dynsym.Offset+uint64(i+1)*24+8:], value)
			return
		}
	}
	t.Fatalf("no symbol %s", name)
}

// fakeDriverC is a libcuda.so.1 with real code: cuInit answers what
// FAKE_CUINIT says, the other calls fill in their pointers.
const fakeDriverC = `
#include <stdlib.h>
int cuInit(unsigned int flags) { const char *v = getenv("FAKE_CUINIT"); return flags ? 1 : (v ? atoi(v) : 0); }
int cuDriverGetVersion(int *v) { if (!v) return 1; *v = 13000; return 0; }
int cuDeviceGetCount(int *n) { if (!n) return 1; *n = 2; return 0; }
`

// buildFakeDriver compiles fakeDriverC with the host's C compiler into
// dir/libcuda.so.1.
func buildFakeDriver(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	lddtest.Need(t, err == nil, "no C compiler")
	dir := t.TempDir()
	src := filepath.Join(dir, "fake.c")
	if err := os.WriteFile(src, []byte(fakeDriverC), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", filepath.Join(dir, "libcuda.so.1"), src).CombinedOutput()
	lddtest.Need(t, err == nil, "cannot build a shared library: %v\n%s", err, out)
	return dir
}

// TestProbeScriptDriverCalls runs ProbeScript against a driver with code:
// the calls, their arguments and the results travel through the protocol.
func TestProbeScriptDriverCalls(t *testing.T) {
	python, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "no python3")
	dir := buildFakeDriver(t)
	for _, code := range []string{"0", "999"} {
		h := newGPUHost(t)
		opts := h.options()
		opts.System.Exec = libprobe.RunCommand(append(os.Environ(), "LD_LIBRARY_PATH="+dir, "FAKE_CUINIT="+code))
		opts.Probe, opts.ProbeCommand = true, []string{python, "-c", ProbeScript}
		r := h.run(opts)
		p := r.Summary.Probe
		if p.Init == nil || strings.TrimSpace(code) != itoaInt(*p.Init) || p.DriverCUDA == nil || *p.DriverCUDA != 13000 ||
			p.Devices == nil || *p.Devices != 2 || p.Stage != "done" || p.Loaded != filepath.Join(dir, "libcuda.so.1") {
			t.Errorf("FAKE_CUINIT=%s: %+v (stderr %q)", code, p, p.Stderr)
		}
	}
}

func itoaInt(n int) string { return strconv.Itoa(n) }
