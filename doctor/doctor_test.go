package doctor

import (
	"debug/elf"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

func TestHealthyHost(t *testing.T) {
	h := newGPUHost(t)
	r := h.report()
	onlyFailing(t, r)
	expect(t, r, CheckDriver, OK, []string{"open kernel module 580.95.05", "runs CUDA 13.0 and older"})
	expect(t, r, CheckLibcuda, OK, []string{"/usr/lib64/libcuda.so.1 → /usr/lib64/libcuda.so.580.95.05", "(/etc/ld.so.cache)", "driver 580.95.05"})
	expect(t, r, CheckDevices, OK, []string{"/dev/nvidiactl, /dev/nvidia0-1 and /dev/nvidia-uvm present and read-write"})
	expect(t, r, CheckShims, OK, []string{"libcuda.so.1, libnvidia-ml.so.1"})
	s := r.Summary
	if s.Status != OK || s.Fail != 0 || s.Warn != 0 || s.OK != len(r.Checks) {
		t.Errorf("summary %+v", s)
	}
	if s.Driver != "580.95.05" || s.DriverCUDA != "13.0" || s.Libcuda != "/usr/lib64/libcuda.so.580.95.05" {
		t.Errorf("summary facts %+v", s)
	}
	for _, c := range r.Checks {
		if c.ID == CheckProbe || c.ID == CheckStaticRuntime {
			t.Errorf("%s reported without --probe or a target", c.ID)
		}
	}
}

func TestNoDriverAtAll(t *testing.T) {
	h := newBareHost(t)
	r := h.report()
	onlyFailing(t, r, CheckDriver, CheckLibcuda, CheckDevices)
	expect(t, r, CheckDriver, Fail, []string{"no /proc/driver/nvidia/version"}, "install the NVIDIA driver")
	expect(t, r, CheckLibcuda, Fail, []string{"finds no libcuda.so.1", "/lib64"}, "install the NVIDIA driver")
	expect(t, r, CheckDevices, Fail, []string{"no /dev/nvidiactl", "no /dev/nvidia0..N"}, "sudo modprobe nvidia")
}

func TestKernelModuleWithoutLibraries(t *testing.T) {
	h := newBareHost(t)
	h.kernel("575.57.08", false)
	h.devices(1, true)
	r := h.report()
	onlyFailing(t, r, CheckLibcuda)
	expect(t, r, CheckDriver, OK, []string{"NVIDIA kernel module 575.57.08", "runs CUDA 12.9 and older"})
	expect(t, r, CheckLibcuda, Fail, []string{"finds no libcuda.so.1"}, "user-space libraries of driver 575.57.08", "libnvidia-compute-575")
}

// TestContainerWithoutRuntime is seed 001's container before the fix: the
// host has a driver (its /proc shows through) but the container was not
// started with the NVIDIA runtime.
func TestContainerWithoutRuntime(t *testing.T) {
	h := newBareHost(t)
	h.kernel("580.95.05", true)
	h.file("/.dockerenv", "")
	r := h.report()
	onlyFailing(t, r, CheckLibcuda, CheckDevices, CheckContainer)
	expect(t, r, CheckContainer, Warn, []string{"Docker container (/.dockerenv) without GPU access", "no /dev/nvidia*", "no libcuda.so.1"}, "docker run --gpus all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility")
	expect(t, r, CheckDevices, Fail, []string{"no /dev/nvidiactl"}, "--gpus all")
	expect(t, r, CheckLibcuda, Fail, []string{"finds no libcuda.so.1"}, "--gpus all")
	if r.Summary.Container != "docker" {
		t.Errorf("summary container %q", r.Summary.Container)
	}
}

func TestContainerDetection(t *testing.T) {
	cases := []struct {
		name    string
		setup   func(h *fakeHost)
		kind    string
		advice  string
		evident string
	}{
		{"docker", func(h *fakeHost) { h.file("/.dockerenv", "") }, "docker", "--gpus all", "/.dockerenv"},
		{"podman", func(h *fakeHost) { h.file("/run/.containerenv", "engine=\"podman-4.9.3\"\n") }, "podman", "nvidia.com/gpu=all", "/run/.containerenv"},
		{"kubernetes-cgroup", func(h *fakeHost) {
			h.file("/proc/1/cgroup", "12:devices:/kubepods/burstable/pod0c7e/3f2a\n")
		}, "kubernetes", "resources.limits", "/proc/1/cgroup"},
		{"kubernetes-env", func(h *fakeHost) { h.env["KUBERNETES_SERVICE_HOST"] = "10.0.0.1" }, "kubernetes", "nvidia.com/gpu", "KUBERNETES_SERVICE_HOST"},
		{"apptainer", func(h *fakeHost) { h.env["APPTAINER_CONTAINER"] = "/images/torch.sif" }, "apptainer", "--nv", "APPTAINER_CONTAINER"},
		{"none-cgroup-v2", func(h *fakeHost) { h.file("/proc/1/cgroup", "0::/init.scope\n") }, "", "", "not in a container"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newBareHost(t)
			c.setup(h)
			r := h.report()
			if r.Summary.Container != c.kind {
				t.Errorf("container %q, want %q", r.Summary.Container, c.kind)
			}
			if c.kind == "" {
				expect(t, r, CheckContainer, OK, []string{c.evident})
				return
			}
			expect(t, r, CheckContainer, Warn, []string{c.evident, "without GPU access"}, c.advice)
		})
	}
}

func TestContainerWithRuntime(t *testing.T) {
	h := newGPUHost(t)
	h.file("/.dockerenv", "")
	h.env["NVIDIA_VISIBLE_DEVICES"] = "all"
	h.env["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
	r := h.report()
	onlyFailing(t, r)
	expect(t, r, CheckContainer, OK, []string{"GPU device files and libcuda.so.1 are present"})
	expect(t, r, CheckVisible, OK, []string{`NVIDIA_VISIBLE_DEVICES="all"`})
}

func TestContainerRuntimeVariables(t *testing.T) {
	t.Run("capabilities-without-compute", func(t *testing.T) {
		h := newGPUHost(t)
		h.file("/.dockerenv", "")
		h.env["NVIDIA_DRIVER_CAPABILITIES"] = "utility,video"
		r := h.report()
		expect(t, r, CheckVisible, Fail, []string{`NVIDIA_DRIVER_CAPABILITIES="utility,video"`, "compute"}, "NVIDIA_DRIVER_CAPABILITIES=compute,utility")
	})
	t.Run("visible-devices-void", func(t *testing.T) {
		h := newBareHost(t)
		h.kernel("580.95.05", true)
		h.file("/.dockerenv", "")
		h.env["NVIDIA_VISIBLE_DEVICES"] = "void"
		r := h.report()
		expect(t, r, CheckVisible, Fail, []string{`NVIDIA_VISIBLE_DEVICES="void"`}, "NVIDIA_VISIBLE_DEVICES=all")
	})
	t.Run("ignored-outside-containers", func(t *testing.T) {
		h := newGPUHost(t)
		h.env["NVIDIA_DRIVER_CAPABILITIES"] = "utility"
		r := h.report()
		expect(t, r, CheckVisible, OK, nil)
	})
}

func TestCUDAVisibleDevices(t *testing.T) {
	cases := []struct {
		value    string
		set      bool
		status   Status
		evidence string
		advice   string
	}{
		{"", false, OK, "unset: every GPU is visible", ""},
		{"", true, Fail, `CUDA_VISIBLE_DEVICES="" hides every GPU`, "unset CUDA_VISIBLE_DEVICES"},
		{"-1", true, Fail, `CUDA_VISIBLE_DEVICES="-1" hides every GPU`, "unset CUDA_VISIBLE_DEVICES"},
		{"NoDevFiles", true, Fail, "100 CUDA_ERROR_NO_DEVICE", "unset CUDA_VISIBLE_DEVICES"},
		{"2", true, Fail, `"2" hides every GPU`, "or set it"},
		{"1,0", true, OK, `CUDA_VISIBLE_DEVICES="1,0"`, ""},
		{"0,5,1", true, Warn, `entry "5" names no GPU (2 GPU(s) present)`, "nvidia-smi -L"},
		{"0,-1,1", true, Warn, `entry "-1"`, "list only existing GPUs"},
		{"GPU-8b3c1a9e-51ab-2f4f-0000-123456789abc", true, OK, "GPU-8b3c1a9e", ""},
		{"MIG-GPU-8b3c1a9e/1/0", true, OK, "MIG-GPU", ""},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%q/set=%v", c.value, c.set), func(t *testing.T) {
			h := newGPUHost(t)
			if c.set {
				h.env["CUDA_VISIBLE_DEVICES"] = c.value
			}
			r := h.report()
			adv := []string{}
			if c.advice != "" {
				adv = append(adv, c.advice)
			}
			expect(t, r, CheckVisible, c.status, []string{c.evidence}, adv...)
		})
	}
}

func TestDevices(t *testing.T) {
	t.Run("no-uvm", func(t *testing.T) {
		h := newBareHost(t)
		h.kernel("580.95.05", true)
		h.devices(4, false)
		h.driverLibs("/usr/lib64", "580.95.05")
		r := h.report()
		onlyFailing(t, r, CheckDevices)
		expect(t, r, CheckDevices, Fail, []string{"/dev/nvidia0-3 present, but no /dev/nvidia-uvm", "999 CUDA_ERROR_UNKNOWN"}, "modprobe nvidia-uvm")
	})
	t.Run("no-uvm-in-container", func(t *testing.T) {
		h := newBareHost(t)
		h.kernel("580.95.05", true)
		h.devices(1, false)
		h.driverLibs("/usr/lib64", "580.95.05")
		h.file("/.dockerenv", "")
		r := h.report()
		expect(t, r, CheckDevices, Fail, []string{"no /dev/nvidia-uvm"}, "on the host", "restart the container")
	})
	t.Run("module-loaded-no-nodes", func(t *testing.T) {
		h := newBareHost(t)
		h.kernel("580.95.05", true)
		h.driverLibs("/usr/lib64", "580.95.05")
		h.file("/proc/driver/nvidia/gpus/0000:3b:00.0/information", "Model: NVIDIA A100\n")
		r := h.report()
		onlyFailing(t, r, CheckDevices)
		expect(t, r, CheckDevices, Fail, []string{"no /dev/nvidiactl", "driver lists 1 GPU(s) in /proc/driver/nvidia/gpus"}, "nvidia-modprobe")
	})
	t.Run("permission", func(t *testing.T) {
		h := newGPUHost(t)
		h.file("/etc/group", fmt.Sprintf("root:x:0:\nvideo:x:%d:alice\n", os.Getgid()))
		if os.Getgid() == 0 {
			h.file("/etc/group", "video:x:0:alice\n")
		}
		h.denied["/dev/nvidia1"] = true
		r := h.report()
		onlyFailing(t, r, CheckDevices)
		c := expect(t, r, CheckDevices, Fail, []string{"no read-write access to /dev/nvidia1", "group video"}, "usermod -aG")
		if strings.Contains(c.Evidence, "/dev/nvidia0") {
			t.Errorf("evidence blames an accessible node: %s", c.Evidence)
		}
	})
	t.Run("wsl", func(t *testing.T) {
		h := newBareHost(t)
		h.file("/dev/dxg", "")
		h.elf("/usr/lib/wsl/lib/libcuda.so.1.1", elfwrite.Spec{Soname: "libcuda.so.1", Symbols: driverSymbols()})
		h.link("/usr/lib/wsl/lib/libcuda.so.1", "libcuda.so.1.1")
		r := h.report()
		expect(t, r, CheckDevices, OK, []string{"/dev/dxg", "WSL2"})
		expect(t, r, CheckDriver, OK, []string{"WSL2"})
		// No ld.so.conf entry for /usr/lib/wsl/lib: the loader does not find it.
		expect(t, r, CheckLibcuda, Fail, []string{"finds no libcuda.so.1"}, "/usr/lib/wsl/lib")
	})
	t.Run("jetson", func(t *testing.T) {
		h := newBareHost(t)
		h.file("/etc/nv_tegra_release", "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64\n")
		h.file("/dev/nvhost-ctrl-gpu", "")
		r := h.report()
		expect(t, r, CheckDevices, OK, []string{"/dev/nvhost-ctrl-gpu", "Jetson"})
		expect(t, r, CheckDriver, OK, []string{"Jetson Orin with L4T R36.4.3: the integrated GPU's driver comes with JetPack 6"})
		expect(t, r, CheckHost, OK, []string{"Jetson Orin", "(JetPack 6) → linux-aarch64 archives for JetPack's CUDA 12"})
	})
}

// TestStubOnLibraryPath: the toolkit's stub directory on LD_LIBRARY_PATH,
// with the libcuda.so.1 link a Dockerfile made there for linking.
func TestStubOnLibraryPath(t *testing.T) {
	stubs := "/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs"
	setup := func(t *testing.T, withSonameLink bool) *fakeHost {
		h := newGPUHost(t)
		h.elf(stubs+"/libcuda.so", elfwrite.Spec{Soname: "libcuda.so.1", Symbols: driverSymbols()})
		if withSonameLink {
			h.link(stubs+"/libcuda.so.1", "libcuda.so")
		}
		h.env["LD_LIBRARY_PATH"] = "/usr/local/cuda-13.0/lib64:" + stubs
		return h
	}
	t.Run("picked", func(t *testing.T) {
		r := setup(t, true).report()
		onlyFailing(t, r, CheckLibcuda)
		expect(t, r, CheckLibcuda, Fail, []string{stubs + "/libcuda.so.1 → " + stubs + "/libcuda.so", "LD_LIBRARY_PATH", "CUDA_ERROR_STUB_LIBRARY (34)"},
			"remove "+stubs+" from LD_LIBRARY_PATH")
	})
	t.Run("present-but-not-picked", func(t *testing.T) {
		// The stub directory holds only libcuda.so: ld.so looks for
		// libcuda.so.1 and goes on to the driver's.
		r := setup(t, false).report()
		onlyFailing(t, r)
		expect(t, r, CheckLibcuda, OK, []string{"/usr/lib64/libcuda.so.1"})
	})
	t.Run("via-option", func(t *testing.T) {
		h := setup(t, true)
		delete(h.env, "LD_LIBRARY_PATH")
		opts := h.options()
		llp := stubs
		opts.LDLibraryPath = &llp
		r := h.run(opts)
		expect(t, r, CheckLibcuda, Fail, []string{"stub"}, "LD_LIBRARY_PATH")
	})
}

// TestStubInCache: the stubs directory listed in /etc/ld.so.conf.d, with
// the link ldconfig made there, put first.
func TestStubInCache(t *testing.T) {
	stubs := "/usr/local/cuda/lib64/stubs"
	h := newGPUHost(t)
	h.elf(stubs+"/libcuda.so", elfwrite.Spec{Soname: "libcuda.so.1", Symbols: driverSymbols()})
	h.link(stubs+"/libcuda.so.1", "libcuda.so")
	h.confDirs = []string{stubs}
	r := h.report()
	onlyFailing(t, r, CheckLibcuda)
	expect(t, r, CheckLibcuda, Fail, []string{stubs + "/libcuda.so.1", "(/etc/ld.so.cache)", "stub"}, "take "+stubs+" out of /etc/ld.so.conf.d", "ldconfig")
}

// TestTritonLibcudaLookup: the loader finds libcuda in a default directory,
// but Triton reads ldconfig -p and LD_LIBRARY_PATH only.
func TestTritonLibcudaLookup(t *testing.T) {
	t.Run("no-cache", func(t *testing.T) {
		h := newGPUHost(t)
		h.noCache = true
		r := h.report()
		onlyFailing(t, r, CheckLibcuda)
		expect(t, r, CheckLibcuda, Warn, []string{"(default directory)", "libcuda.so cannot found!"}, "run ldconfig as root", "TRITON_LIBCUDA_PATH=/usr/lib64")
	})
	t.Run("ld-library-path", func(t *testing.T) {
		h := newGPUHost(t)
		h.noCache = true
		h.env["LD_LIBRARY_PATH"] = "/usr/lib64"
		expect(t, h.report(), CheckLibcuda, OK, []string{"(LD_LIBRARY_PATH)"})
	})
	t.Run("triton-variable", func(t *testing.T) {
		h := newGPUHost(t)
		h.noCache = true
		h.env["TRITON_LIBCUDA_PATH"] = "/usr/lib64"
		expect(t, h.report(), CheckLibcuda, OK, []string{"(default directory)"})
	})
}

func TestLibcudaKernelMismatch(t *testing.T) {
	t.Run("older-library-in-image", func(t *testing.T) {
		h := newBareHost(t)
		h.kernel("580.95.05", true)
		h.devices(1, true)
		h.driverLibs("/usr/lib64", "535.104.05")
		h.file("/.dockerenv", "")
		r := h.report()
		onlyFailing(t, r, CheckLibcuda)
		expect(t, r, CheckLibcuda, Fail, []string{"driver 535.104.05, but the kernel module is 580.95.05", "803 CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
			"delete /usr/lib64/libcuda.so.535.104.05 from the image")
	})
	t.Run("upgrade-without-reboot", func(t *testing.T) {
		h := newBareHost(t)
		h.kernel("570.172.08", false)
		h.devices(1, true)
		h.driverLibs("/usr/lib64", "580.95.05")
		r := h.report()
		expect(t, r, CheckLibcuda, Fail, []string{"driver 580.95.05, but the kernel module is 570.172.08"}, "reboot")
	})
	t.Run("same-version", func(t *testing.T) {
		h := newGPUHost(t)
		expect(t, h.report(), CheckLibcuda, OK, []string{"driver 580.95.05"})
	})
}

// TestForwardCompatibility: cuda-compat's libcuda over an older kernel
// module, put first by LD_LIBRARY_PATH as NVIDIA's images do.
func TestForwardCompatibility(t *testing.T) {
	h := newBareHost(t)
	h.kernel("575.57.08", false)
	h.devices(1, true)
	h.driverLibs("/usr/lib64", "575.57.08")
	compat := "/usr/local/cuda-13.0/compat"
	h.elf(compat+"/libcuda.so.580.95.05", elfwrite.Spec{Soname: "libcuda.so.1", Symbols: driverSymbols()})
	h.link(compat+"/libcuda.so.1", "libcuda.so.580.95.05")
	h.env["LD_LIBRARY_PATH"] = compat
	writeTorchLike(h, "/venv/site-packages", "13")
	r := h.reportFor("/venv/site-packages/torch")
	expect(t, r, CheckLibcuda, Warn, []string{"forward-compatibility libcuda 580.95.05 over kernel module 575.57.08"}, "data-center GPUs", "804")
	expect(t, r, CheckCompat, OK, []string{"needs CUDA 13 (libcudart.so.13 in its closure)", "driver 580.95.05 (forward-compatibility libcuda) runs CUDA 13.0"})
	if r.Summary.DriverCUDA != "13.0" || r.Summary.Driver != "575.57.08" {
		t.Errorf("summary %+v", r.Summary)
	}
}

// writeTorchLike lays out a package like torch's wheel: libtorch_cuda.so
// linking libcudart through DT_RPATH into nvidia/cuN/lib.
func writeTorchLike(h *fakeHost, site, major string) {
	rpath := "$ORIGIN/../../nvidia/cu" + major + "/lib:$ORIGIN"
	h.elf(site+"/nvidia/cu"+major+"/lib/libcudart.so."+major, cudart(major, "cudaMalloc", "cudaGetDeviceCount", "__cudaRegisterFatBinary"))
	h.elf(site+"/torch/lib/libtorch_cuda.so", cudartUser("libtorch_cuda.so", major, elfwrite.Str(rpath), "cudaMalloc", "__cudaRegisterFatBinary"))
	h.elf(site+"/torch/lib/libc10_cuda.so", cudartUser("libc10_cuda.so", major, elfwrite.Str(rpath), "cudaGetDeviceCount"))
	h.elf(site+"/torch/_C.so", elfwrite.Spec{Needed: []string{"libtorch_cuda.so", "libc.so.6"}, RPath: elfwrite.Str("$ORIGIN/lib")})
	h.file(site+"/torch/__init__.py", "import torch._C\n")
}

func TestCompatibility(t *testing.T) {
	cases := []struct {
		name     string
		driver   string
		major    string
		status   Status
		evidence []string
		advice   []string
	}{
		{"cuda13-on-580", "580.95.05", "13", OK, []string{"torch needs CUDA 13 (libcudart.so.13 in its closure)", "driver 580.95.05 (kernel module) runs CUDA 13.0 and older"}, nil},
		{"cuda13-on-575", "575.57.08", "13", Fail, []string{"torch needs CUDA 13", "driver 575.57.08 (kernel module) runs CUDA 12.9 and older", "CUDA 13.x needs 580 or newer"},
			[]string{"upgrade the NVIDIA driver to 580 or newer", "CUDA 12 build", "cuda-compat-13-x"}},
		{"cuda12-on-535-minor-compat", "535.104.05", "12", OK, []string{"needs CUDA 12", "runs CUDA 12.2 and older"}, nil},
		{"cuda12-on-520", "520.61.05", "12", Fail, []string{"CUDA 12.x needs 525.60.13 or newer", "runs CUDA 11.8 and older"}, []string{"525.60.13", "CUDA 11 build"}},
		{"cuda12-on-580-backward", "580.95.05", "12", OK, []string{"needs CUDA 12", "runs CUDA 13.0 and older"}, nil},
		{"cuda11-on-590", "590.44.01", "11", OK, []string{"needs CUDA 11", "runs CUDA 13.1 and older"}, nil},
		{"cuda14-unknown", "590.44.01", "14", Warn, []string{"needs CUDA 14", "not in this cudadeps' driver table"}, []string{"release notes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newBareHost(t)
			h.kernel(c.driver, false)
			h.devices(1, true)
			h.driverLibs("/usr/lib64", c.driver)
			writeTorchLike(h, "/venv/site-packages", c.major)
			r := h.reportFor("/venv/site-packages/torch")
			expect(t, r, CheckCompat, c.status, c.evidence, c.advice...)
			if r.Summary.TargetCUDA == 0 || fmt.Sprint(r.Summary.TargetCUDA) != c.major {
				t.Errorf("summary target CUDA %d, want %s", r.Summary.TargetCUDA, c.major)
			}
		})
	}
}

func TestCompatibilityMinorVersion(t *testing.T) {
	// A libcudart whose file name gives the minor release: 12.8 on a 12.2
	// driver runs through minor version compatibility, without newer PTX.
	h := newBareHost(t)
	h.kernel("535.104.05", false)
	h.devices(1, true)
	h.driverLibs("/usr/lib64", "535.104.05")
	h.elf("/opt/app/lib/libcudart.so.12.8.90", cudart("12", "cudaMalloc"))
	h.link("/opt/app/lib/libcudart.so.12", "libcudart.so.12.8.90")
	h.elf("/opt/app/lib/libkernels.so", cudartUser("libkernels.so", "12", elfwrite.Str("$ORIGIN"), "cudaMalloc"))
	r := h.reportFor("/opt/app/lib/libkernels.so")
	expect(t, r, CheckCompat, Warn, []string{"needs CUDA 12.8", "runs through minor version compatibility"}, "570.26", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
}

// TestCompatibilityVersionPy: torch records its CUDA build in version.py;
// a cu128 wheel on a 12.4 driver runs through minor version compatibility.
func TestCompatibilityVersionPy(t *testing.T) {
	h := newBareHost(t)
	h.kernel("550.127.08", false)
	h.devices(1, true)
	h.driverLibs("/usr/lib64", "550.127.08")
	writeTorchLike(h, "/venv/site-packages", "12")
	h.file("/venv/site-packages/torch/version.py", "from typing import Optional\n__version__ = '2.7.1+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\ngit_version = 'e2d141dbde55c2a4370fac5165b0561b6af4798b'\nhip: Optional[str] = None\n")
	r := h.reportFor("/venv/site-packages/torch")
	expect(t, r, CheckCompat, Warn, []string{"torch needs CUDA 12.8 (libcudart.so.12 in its closure; version.py says 12.8)", "runs CUDA 12.4 and older", "minor version compatibility"}, "570.26")

	// A version.py of another major is not believed over the closure.
	h.file("/venv/site-packages/torch/version.py", "cuda = '11.8'\n")
	r = h.reportFor("/venv/site-packages/torch")
	expect(t, r, CheckCompat, OK, []string{"torch needs CUDA 12 (libcudart.so.12 in its closure);"})
}

func TestCompatibilityFromNeededOnly(t *testing.T) {
	// libcublas.so.13 is needed but nowhere to be found, and no libcudart
	// appears: the major still comes from what the target needs.
	h := newGPUHost(t)
	h.kernel("570.172.08", false)
	h.remove("/usr/lib64")
	h.driverLibs("/usr/lib64", "570.172.08")
	h.elf("/opt/app/libsolver.so", elfwrite.Spec{Soname: "libsolver.so", Needed: []string{"libcublas.so.13", "libcurand.so.10", "libc.so.6"}})
	r := h.reportFor("/opt/app")
	expect(t, r, CheckCompat, Fail, []string{"app needs CUDA 13 (it needs libcublas.so.13)", "runs CUDA 12.8 and older"}, "580")
}

func TestCompatibilityNoCUDA(t *testing.T) {
	h := newGPUHost(t)
	h.elf("/opt/plain/libz.so.1", elfwrite.Spec{Soname: "libz.so.1", Needed: []string{"libc.so.6", "libcufft.so.11"}})
	r := h.reportFor("/opt/plain")
	expect(t, r, CheckCompat, OK, []string{"plain needs no CUDA runtime"})
	expect(t, r, CheckStaticRuntime, OK, []string{"no object of plain carries the CUDA runtime statically"})
}

func TestTargetErrors(t *testing.T) {
	h := newGPUHost(t)
	h.file("/opt/py/module.py", "print(1)\n")
	for _, c := range []struct{ target, want string }{
		{"/nonexistent", "no such file or directory"},
		{"/opt/py/module.py", "not an ELF file"},
		{"/opt/py", "no dynamically linked ELF object"},
	} {
		opts := h.options()
		opts.Target = h.path(c.target)
		_, err := Run(t.Context(), opts)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: error %v, want one line with %q", c.target, err, c.want)
		}
	}
}

// TestPlainProgramModel: with no program in the root to stand for a CUDA
// program, the loader model uses a plain one, and finds the same libcuda.
func TestPlainProgramModel(t *testing.T) {
	h := newGPUHost(t)
	h.remove("/bin/sh")
	h.env["PATH"] = "/usr/local/bin:/usr/bin"
	r := h.report()
	onlyFailing(t, r)
	expect(t, r, CheckLibcuda, OK, []string{"/usr/lib64/libcuda.so.1 → /usr/lib64/libcuda.so.580.95.05 (/etc/ld.so.cache)"})
}

// TestProgramFromPATH: python3 on PATH (inside the root) is the program
// modelled; its DT_RUNPATH is searched for libcuda.so.1 like any other.
func TestProgramFromPATH(t *testing.T) {
	h := newGPUHost(t)
	h.elf("/opt/py/bin/python3", elfwrite.Spec{Interp: interp, Flags1: elf.DF_1_PIE, Needed: []string{"libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN/../lib")})
	h.elf("/opt/py/lib/libcuda.so.1", elfwrite.Spec{Soname: "libcuda.so.1", Symbols: driverSymbols()})
	h.env["PATH"] = "/opt/py/bin:/usr/bin"
	r := h.report()
	expect(t, r, CheckLibcuda, OK, []string{"load /opt/py/bin/../lib/libcuda.so.1 (RUNPATH of /opt/py/bin/python3"})
}

// TestSandboxHidesProcDriver is a gVisor-style sandbox: the device files and
// the driver's libraries are there, /proc/driver/nvidia is not. Loading a
// kernel module would be the wrong advice.
func TestSandboxHidesProcDriver(t *testing.T) {
	h := newGPUHost(t)
	h.remove("/proc/driver/nvidia")
	r := h.report()
	expect(t, r, CheckDriver, Warn, []string{"/dev/nvidiactl is present", "driver 580.95.05", "hides /proc/driver"}, "--probe")
	for _, c := range r.Checks {
		if c.ID == CheckDriver && strings.Contains(c.Advice, "modprobe") {
			t.Errorf("driver advice %q suggests loading a module", c.Advice)
		}
	}
}
