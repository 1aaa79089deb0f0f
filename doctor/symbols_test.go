package doctor

import (
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

func hookLib(names ...string) elfwrite.Spec {
	spec := elfwrite.Spec{Soname: "libhook.so", Needed: []string{"libc.so.6"}}
	for _, n := range names {
		spec.Symbols = append(spec.Symbols, elfwrite.Symbol{Name: n, Defined: true, Func: true})
	}
	return spec
}

func TestInterposers(t *testing.T) {
	const hook = "/opt/ds01-infra/lib/libds01_gpu_notice.so"
	cases := []struct {
		name     string
		syms     []string
		preload  string // LD_PRELOAD
		file     string // /etc/ld.so.preload
		status   Status
		evidence []string
		advice   []string
	}{
		{"none", nil, "", "", OK, []string{"no LD_PRELOAD and no /etc/ld.so.preload"}, nil},
		{"allocator", []string{"malloc", "free"}, hook, "", OK, []string{"LD_PRELOAD " + hook + " defines no CUDA entry point"}, nil},
		{"driver-hooks-without-dlsym", []string{"cuInit", "cuMemAlloc_v2"}, hook, "", Warn,
			[]string{"LD_PRELOAD " + hook + " interposes cuInit, cuMemAlloc_v2, but neither dlsym nor cuGetProcAddress"},
			[]string{"dlopen", "cuGetProcAddress", "hook those too"}},
		// Seed 002's fix: cuInit and dlsym.
		{"driver-hooks-with-dlsym", []string{"cuInit", "dlsym"}, hook, "", Warn,
			[]string{"interposes cuInit, dlsym"}, []string{"env -u LD_PRELOAD"}},
		{"from-ld.so.preload", []string{"cuInit", "cuGetProcAddress"}, "", hook, Warn,
			[]string{"/etc/ld.so.preload " + hook + " interposes cuInit, cuGetProcAddress"}, []string{"commenting it out of /etc/ld.so.preload"}},
		{"missing", nil, "/opt/gone/libhook.so", "", Warn, []string{"/opt/gone/libhook.so", "cannot be preloaded"}, []string{"every program start"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newGPUHost(t)
			if c.syms != nil {
				h.elf(hook, hookLib(c.syms...))
			}
			if c.preload != "" {
				h.env["LD_PRELOAD"] = c.preload
			}
			if c.file != "" {
				h.file("/etc/ld.so.preload", c.file+"\n")
			}
			r := h.report()
			expect(t, r, CheckInterposers, c.status, c.evidence, c.advice...)
			if c.status == OK {
				onlyFailing(t, r)
			}
		})
	}
}

func TestInterposerPreloadOption(t *testing.T) {
	h := newGPUHost(t)
	h.elf("/opt/hook.so", hookLib("cudaMalloc"))
	h.env["LD_PRELOAD"] = "/opt/elsewhere.so"
	opts := h.options()
	opts.Preload, opts.PreloadSet = []string{"/opt/hook.so"}, true
	r := h.run(opts)
	c := expect(t, r, CheckInterposers, Warn, []string{"LD_PRELOAD /opt/hook.so interposes cudaMalloc"})
	if strings.Contains(c.Evidence, "elsewhere") {
		t.Errorf("the option did not replace $LD_PRELOAD: %s", c.Evidence)
	}
}

// TestStaticRuntime is seed 002: a hook of cudaMalloc that never fires,
// because the program carries the CUDA runtime statically.
func TestStaticRuntime(t *testing.T) {
	build := func(h *fakeHost) {
		// nvcc's default: the runtime linked in, its registration entry point
		// exported, no libcudart in NEEDED.
		h.elf("/opt/app/libtest_cuda.so", elfwrite.Spec{Soname: "libtest_cuda.so", Needed: []string{"libc.so.6"},
			Symbols: []elfwrite.Symbol{
				{Name: "__cudaRegisterFatBinary", Defined: true, Func: true},
				{Name: "__cudaRegisterFunction", Defined: true, Func: true},
				{Name: "dlsym", Func: true},
			}})
		// A library linking libcudart dynamically imports the same name: not static.
		h.elf("/opt/app/libdyn.so", cudartUser("libdyn.so", "12", elfwrite.Str("$ORIGIN"), "__cudaRegisterFatBinary", "cudaMalloc"))
		h.elf("/opt/app/libcudart.so.12", cudart("12", "__cudaRegisterFatBinary", "cudaMalloc"))
	}
	t.Run("no-hook", func(t *testing.T) {
		h := newGPUHost(t)
		build(h)
		r := h.reportFor("/opt/app")
		c := expect(t, r, CheckStaticRuntime, OK, []string{"1 object(s) of app carry the CUDA runtime statically (libtest_cuda.so)", "only the driver must be new enough"})
		if strings.Contains(c.Evidence, "libdyn") || strings.Contains(c.Evidence, "libcudart.so.12") {
			t.Errorf("dynamic users counted as static: %s", c.Evidence)
		}
		onlyFailing(t, r)
	})
	t.Run("runtime-hook", func(t *testing.T) {
		h := newGPUHost(t)
		build(h)
		h.elf("/opt/ds01/libds01_gpu_notice.so", hookLib("cudaMalloc", "cudaGetDeviceCount"))
		h.env["LD_PRELOAD"] = "/opt/ds01/libds01_gpu_notice.so"
		h.env["CUDA_VISIBLE_DEVICES"] = ""
		r := h.reportFor("/opt/app")
		expect(t, r, CheckStaticRuntime, Warn, []string{"libtest_cuda.so", "the hooks of libds01_gpu_notice.so (cudaMalloc, cudaGetDeviceCount) never see their calls"}, "hook the driver API")
		expect(t, r, CheckInterposers, Warn, []string{"interposes cudaMalloc, cudaGetDeviceCount, but libtest_cuda.so carries the CUDA runtime statically"}, "driver API")
		expect(t, r, CheckVisible, Fail, []string{`CUDA_VISIBLE_DEVICES=""`})
	})
}

// TestRuntimeHookVersion: a hook of cudaMalloc versioned for CUDA 12 in a
// process whose objects import cudaMalloc@libcudart.so.13.
func TestRuntimeHookVersion(t *testing.T) {
	h := newGPUHost(t)
	writeTorchLike(h, "/venv/site-packages", "13")
	h.elf("/opt/hook12.so", elfwrite.Spec{Soname: "libhook12.so", VersionDefs: []string{"libcudart.so.12"},
		Symbols: []elfwrite.Symbol{{Name: "cudaMalloc", Defined: true, Func: true, Version: "libcudart.so.12"}}})
	h.env["LD_PRELOAD"] = "/opt/hook12.so"
	r := h.reportFor("/venv/site-packages/torch")
	expect(t, r, CheckInterposers, Warn, []string{"it defines cudaMalloc@@libcudart.so.12 while libtorch_cuda.so asks for cudaMalloc@libcudart.so.13"}, "version script")
}

// TestVGPUShims is seed 004: libcuda.so.1, libcudart.so.12 and
// libnvidia-ml.so.1 in the application's directory are links to a vGPU
// stack's differently named libraries, and the cudart shim lacks a symbol
// that libggml-cuda.so imports with its version.
func TestVGPUShims(t *testing.T) {
	setup := func(t *testing.T, cudartSyms []string, libcudaSyms []string) *fakeHost {
		h := newGPUHost(t)
		dir := "/usr/local/lib/ollama/cuda_v12"
		spec := elfwrite.Spec{Soname: "libvgpu-cuda.so", Needed: []string{"libc.so.6"}}
		for _, n := range libcudaSyms {
			spec.Symbols = append(spec.Symbols, elfwrite.Symbol{Name: n, Defined: true, Func: true})
		}
		h.elf("/usr/lib64/libvgpu-cuda.so", spec)
		h.elf("/usr/lib64/libvgpu-cudart.so", cudart("12", cudartSyms...))
		h.elf("/usr/lib64/libvgpu-nvml.so", elfwrite.Spec{Soname: "libvgpu-nvml.so", Symbols: []elfwrite.Symbol{{Name: "nvmlInit_v2", Defined: true, Func: true}}})
		h.link(dir+"/libcuda.so.1", "/usr/lib64/libvgpu-cuda.so")
		h.link(dir+"/libcudart.so.12", "/usr/lib64/libvgpu-cudart.so")
		h.link(dir+"/libcudart.so.12.8.90", "/usr/lib64/libvgpu-cudart.so")
		h.link(dir+"/libnvidia-ml.so.1", "/usr/lib64/libvgpu-nvml.so")
		h.elf(dir+"/libggml-cuda.so", cudartUser("libggml-cuda.so", "12", nil, "__cudaRegisterFatBinary", "cudaMalloc", "cudaLaunchKernel"))
		h.env["LD_LIBRARY_PATH"] = dir
		return h
	}
	t.Run("symbols-missing", func(t *testing.T) {
		h := setup(t, []string{"cudaMalloc", "cudaLaunchKernel"}, []string{"cuInit", "cuDriverGetVersion", "cuDeviceGetCount"})
		r := h.reportFor("/usr/local/lib/ollama/cuda_v12/libggml-cuda.so")
		c := expect(t, r, CheckShims, Fail, []string{
			"libcuda.so.1 is a shim, not NVIDIA's library: /usr/local/lib/ollama/cuda_v12/libcuda.so.1 → /usr/lib64/libvgpu-cuda.so",
			"defines no cuGetProcAddress",
			"libnvidia-ml.so.1 is a shim",
			"libcudart.so.12 is a shim",
			"libcudart.so.12 (/usr/local/lib/ollama/cuda_v12/libcudart.so.12 → /usr/lib64/libvgpu-cudart.so) lacks 1 symbol(s) that libggml-cuda.so import(s): __cudaRegisterFatBinary@libcudart.so.12",
		})
		if strings.Contains(c.Evidence, "cudaMalloc@") {
			t.Errorf("a defined symbol reported missing: %s", c.Evidence)
		}
		if !strings.Contains(c.Advice, "cuGetProcAddress") && !strings.Contains(c.Advice, "undefined symbol") {
			t.Errorf("advice %q", c.Advice)
		}
		expect(t, r, CheckLibcuda, OK, []string{"/usr/local/lib/ollama/cuda_v12/libcuda.so.1 → /usr/lib64/libvgpu-cuda.so (LD_LIBRARY_PATH)"})
	})
	t.Run("complete-shim", func(t *testing.T) {
		// After the version script fix the shims define what is imported:
		// only the names give them away.
		h := setup(t, []string{"cudaMalloc", "cudaLaunchKernel", "__cudaRegisterFatBinary"}, driverSymbols2())
		r := h.reportFor("/usr/local/lib/ollama/cuda_v12/libggml-cuda.so")
		c := expect(t, r, CheckShims, Warn, []string{"libcuda.so.1 is a shim", "libcudart.so.12 is a shim", "libnvidia-ml.so.1 is a shim"}, "put NVIDIA's")
		if strings.Contains(c.Evidence, "lacks") || strings.Contains(c.Evidence, "defines no") {
			t.Errorf("complete shim reported incomplete: %s", c.Evidence)
		}
	})
	t.Run("no-version-information", func(t *testing.T) {
		h := setup(t, nil, driverSymbols2())
		// A shim built without a version script: ld.so only warns, and the
		// versioned references bind to its unversioned definitions.
		h.remove("/usr/lib64/libvgpu-cudart.so")
		h.elf("/usr/lib64/libvgpu-cudart.so", hookLib("cudaMalloc", "cudaLaunchKernel", "__cudaRegisterFatBinary"))
		r := h.reportFor("/usr/local/lib/ollama/cuda_v12/libggml-cuda.so")
		c := expect(t, r, CheckShims, Warn, []string{"libcudart.so.12 (libvgpu-cudart.so) defines no symbol versions", "no version information available (required by /usr/local/lib/ollama/cuda_v12/libggml-cuda.so)"})
		if strings.Contains(c.Evidence, "lacks") {
			t.Errorf("unversioned definitions must satisfy versioned references: %s", c.Evidence)
		}
	})
	t.Run("wrong-version", func(t *testing.T) {
		h := setup(t, nil, driverSymbols2())
		// A shim whose version script names another CUDA major.
		h.remove("/usr/lib64/libvgpu-cudart.so")
		spec := cudart("11.0", "cudaMalloc", "cudaLaunchKernel", "__cudaRegisterFatBinary")
		h.elf("/usr/lib64/libvgpu-cudart.so", spec)
		r := h.reportFor("/usr/local/lib/ollama/cuda_v12/libggml-cuda.so")
		expect(t, r, CheckShims, Fail, []string{"libggml-cuda.so needs version libcudart.so.12 of libcudart.so.12, which libvgpu-cudart.so does not define: the loader refuses to load it",
			"lacks 3 symbol(s)"}, "put NVIDIA's libcudart.so.12 first")
	})
}

func driverSymbols2() []string {
	var out []string
	for _, s := range driverSymbols() {
		out = append(out, s.Name)
	}
	return out
}

func TestClassifyHook(t *testing.T) {
	for name, want := range map[string]hookKind{
		"cuInit": hookDriver, "cuMemAlloc_v2": hookDriver, "cuGetProcAddress": hookDriver,
		"cudaMalloc": hookRuntime, "__cudaRegisterFatBinary": hookRuntime,
		"nvmlInit_v2": hookNVML, "dlsym": hookDL, "dlopen": hookDL,
		"cudart_internal": hookNone, "cubic": hookNone, "cu": hookNone, "curl_easy_init": hookNone, "malloc": hookNone, "nvmlx": hookNone,
	} {
		if got := classifyHook(name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
