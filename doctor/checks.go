package doctor

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/loader/ldso"
)

// finding is one observation; a check combines its findings into one line.
type finding struct {
	status   Status
	evidence string
	advice   string
}

// combine makes one check of several findings: the worst verdict, the
// evidence of every finding (worst first), the advice of the worst.
func combine(id string, fs []finding) Check {
	c := Check{ID: id, Status: OK}
	for _, f := range fs {
		if f.status.rank() > c.Status.rank() {
			c.Status = f.status
		}
	}
	var ev []string
	for rank := 2; rank >= 0; rank-- {
		for _, f := range fs {
			if f.status.rank() != rank {
				continue
			}
			ev = append(ev, f.evidence)
			if c.Advice == "" && rank == c.Status.rank() {
				c.Advice = f.advice
			}
		}
	}
	c.Evidence = strings.Join(ev, "; ")
	return c
}

func check(id string, s Status, evidence, advice string) Check {
	return Check{ID: id, Status: s, Evidence: evidence, Advice: advice}
}

// effectiveDriver is the driver version that decides which CUDA runs: a
// forward-compatibility libcuda newer than the kernel module, else the
// kernel module, else the version in the name of the libcuda file.
func (d *diag) effectiveDriver() (version, string) {
	lc := d.model.libcuda
	if lc.found() {
		if uv, ok := libcudaFileVersion(lc.realGuest); ok && isCompat(lc.realGuest) && (!d.host.kernel.ok() || d.host.kernel.less(uv)) {
			return uv, "forward-compatibility libcuda"
		}
	}
	if d.host.kernel.ok() {
		return d.host.kernel, "kernel module"
	}
	if lc.found() {
		if uv, ok := libcudaFileVersion(lc.realGuest); ok {
			return uv, "libcuda file name"
		}
	}
	return version{}, ""
}

func (d *diag) inContainer() bool { return d.host.container.kind != "" }

func (d *diag) checkDriver() Check {
	h := d.host
	if h.platform.IsJetson() {
		return d.jetsonDriver()
	}
	if h.kernel.ok() {
		kind := "kernel module"
		if h.kernelOpen {
			kind = "open kernel module"
		}
		ev := fmt.Sprintf("NVIDIA %s %s (/proc/driver/nvidia/version)", kind, h.kernel)
		if m, n, ok := maxCUDA(h.kernel); ok {
			return check(CheckDriver, OK, fmt.Sprintf("%s: runs CUDA %d.%d and older", ev, m, n), "")
		}
		return check(CheckDriver, Warn, ev+": older than every CUDA 11, 12 and 13 release",
			"upgrade the NVIDIA driver: CUDA 12 wheels need 525.60.13 or newer, CUDA 13 wheels 580 or newer")
	}
	switch {
	case h.wsl:
		return check(CheckDriver, OK, "WSL2: the Windows NVIDIA driver serves the GPU through /dev/dxg; its version is not visible from Linux", "")
	}
	lc := d.model.libcuda
	if lc.found() {
		if uv, ok := libcudaFileVersion(lc.realGuest); ok {
			if h.ctl {
				// The module answers (/dev/nvidiactl is there) but /proc does
				// not show it: a sandboxed kernel (gVisor) or a container that
				// masks /proc/driver. Loading a module would be wrong advice.
				return check(CheckDriver, Warn, fmt.Sprintf("no /proc/driver/nvidia/version, but /dev/nvidiactl is present and libcuda.so.1 is driver %s: a sandbox or container hides /proc/driver", uv),
					"nothing to do if the probe passes (cudadeps doctor --probe); the driver version is taken from libcuda's file name")
			}
			advice := "load the kernel module (sudo modprobe nvidia; dmesg shows why it fails, e.g. Secure Boot) or reinstall the driver"
			if d.inContainer() {
				advice = "/proc/driver/nvidia belongs to the host's kernel: load or install the NVIDIA driver on the host"
			}
			return check(CheckDriver, Warn, fmt.Sprintf("%s; libcuda.so.1 is driver %s", h.kernelErr, uv), advice)
		}
	}
	advice := "install the NVIDIA driver (580 or newer runs CUDA 13 and older)"
	if d.inContainer() {
		advice = "/proc/driver/nvidia belongs to the host's kernel: install or load the NVIDIA driver on the host, then " + d.host.container.gpuAdvice()
	}
	return check(CheckDriver, Fail, h.kernelErr+"; no libcuda.so.1 names a driver version either", advice)
}

func (d *diag) checkLibcuda() Check {
	m := d.model
	if m.err != "" {
		return check(CheckLibcuda, Warn, "loader model unavailable: "+m.err, "")
	}
	lc := m.libcuda
	if !lc.found() {
		ev := "the loader finds no libcuda.so.1"
		if t := lc.tried(); t != "" {
			ev += " (tried " + t + ")"
		}
		if lc.search.Problem != "" {
			ev += ": " + lc.search.Problem
		}
		var advice string
		switch {
		case d.host.wsl:
			advice = "make /usr/lib/wsl/lib known to the loader (an /etc/ld.so.conf.d entry, then ldconfig)"
		case d.inContainer():
			advice = d.host.container.gpuAdvice()
		case d.host.kernel.ok():
			advice = fmt.Sprintf("install the user-space libraries of driver %s (libnvidia-compute-%d on Debian/Ubuntu, nvidia-driver-cuda-libs on RHEL), then run ldconfig", d.host.kernel, d.host.kernel.major())
		default:
			advice = "install the NVIDIA driver"
		}
		return check(CheckLibcuda, Fail, ev, advice)
	}
	where := fmt.Sprintf("the loader would load %s (%s)", lc.shown(), lc.how())
	dir := path.Dir(lc.obj.Path)
	if isStub(lc.obj.Path) || isStub(lc.realGuest) {
		var advice string
		switch lc.obj.Via {
		case ldso.ViaLDLibraryPath:
			advice = fmt.Sprintf("remove %s from LD_LIBRARY_PATH: the stub is for linking only (LIBRARY_PATH is its place)", dir)
		case ldso.ViaCache, ldso.ViaDefault:
			advice = fmt.Sprintf("take %s out of /etc/ld.so.conf.d (or delete the stub copied there) and run ldconfig", dir)
		case ldso.ViaRPath, ldso.ViaRunPath:
			advice = fmt.Sprintf("the %s points into %s: relink without the stub directory", lc.how(), dir)
		default:
			advice = fmt.Sprintf("make the driver's libcuda.so.1 load instead of %s", lc.obj.Path)
		}
		return check(CheckLibcuda, Fail, where+": the CUDA toolkit's stub, whose every call returns CUDA_ERROR_STUB_LIBRARY (34)", advice)
	}
	uv, hasUV := libcudaFileVersion(lc.realGuest)
	kv := d.host.kernel
	if hasUV && kv.ok() && !uv.equal(kv) {
		if isCompat(lc.realGuest) || isCompat(lc.obj.Path) {
			if kv.less(uv) {
				return check(CheckLibcuda, Warn,
					fmt.Sprintf("%s: forward-compatibility libcuda %s over kernel module %s", where, uv, kv),
					fmt.Sprintf("this works on data-center GPUs only; elsewhere cuInit gives 804 CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: then take %s out of the library path", dir))
			}
			return check(CheckLibcuda, Warn,
				fmt.Sprintf("%s: forward-compatibility libcuda %s is older than the kernel module %s", where, uv, kv),
				fmt.Sprintf("take %s out of the library path: the driver's own libcuda is newer", dir))
		}
		var advice string
		switch {
		case d.inContainer():
			advice = fmt.Sprintf("the image carries its own libcuda: delete %s from the image and let the NVIDIA runtime mount the host's", lc.realGuest)
		case kv.less(uv):
			advice = "the driver was upgraded but the old kernel module still runs: reboot (or reload the nvidia modules)"
		default:
			advice = "reinstall the driver so that its libraries and its kernel module match"
		}
		return check(CheckLibcuda, Fail,
			fmt.Sprintf("%s: driver %s, but the kernel module is %s (cuInit gives 803 CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)", where, uv, kv), advice)
	}
	if hasUV {
		where += ", driver " + uv.String()
	}
	fs := []finding{{OK, where, ""}}
	if f, ok := d.tritonFinding(lc); ok {
		fs = append(fs, f)
	}
	return combine(CheckLibcuda, fs)
}

// tritonFinding: Triton (torch.compile) does not ask the loader for
// libcuda; it reads `ldconfig -p` (the ld.so.cache), then LD_LIBRARY_PATH,
// unless TRITON_LIBCUDA_PATH names the directory, and stops with
// "libcuda.so cannot found!" when neither lists it.
func (d *diag) tritonFinding(lc *lib) (finding, bool) {
	if v, _ := d.sys.LookupEnv("TRITON_LIBCUDA_PATH"); v != "" {
		return finding{}, false
	}
	cache, _ := d.model.loader.Cache()
	if cache != nil {
		for _, e := range cache.Entries {
			if e.Name == "libcuda.so.1" {
				return finding{}, false
			}
		}
	}
	llp, _ := d.sys.LookupEnv("LD_LIBRARY_PATH")
	if d.opts.LDLibraryPath != nil {
		llp = *d.opts.LDLibraryPath
	}
	for _, dir := range strings.Split(llp, ":") {
		if dir != "" && d.sys.exists(path.Join(dir, "libcuda.so.1")) {
			return finding{}, false
		}
	}
	return finding{Warn, "libcuda.so.1 is neither in /etc/ld.so.cache nor in an LD_LIBRARY_PATH directory: Triton (torch.compile) looks for it there and stops with \"libcuda.so cannot found!\"",
		fmt.Sprintf("run ldconfig as root, or set TRITON_LIBCUDA_PATH=%s", path.Dir(lc.obj.Path))}, true
}

func (d *diag) checkDevices() Check {
	h := d.host
	if h.wsl {
		return check(CheckDevices, OK, "/dev/dxg present: WSL2 GPU paravirtualization", "")
	}
	if h.nvgpu != "" && !h.ctl {
		return check(CheckDevices, OK, fmt.Sprintf("%s present: Jetson integrated GPU", h.nvgpu), "")
	}
	var missing []string
	if !h.ctl {
		missing = append(missing, "/dev/nvidiactl")
	}
	if len(h.gpuNodes) == 0 {
		missing = append(missing, "/dev/nvidia0..N")
	}
	if len(missing) > 0 {
		ev := "no " + strings.Join(missing, ", no ")
		if n := len(h.procGPUs); n > 0 {
			ev += fmt.Sprintf(", although the driver lists %d GPU(s) in /proc/driver/nvidia/gpus", n)
		}
		var advice string
		switch {
		case d.inContainer():
			advice = h.container.gpuAdvice()
		case h.kernel.ok():
			advice = "the kernel module is loaded but created no device files: run nvidia-modprobe -c 0 as root (or nvidia-smi once as root) and check the udev rules"
		default:
			advice = "load the driver: sudo modprobe nvidia (dmesg shows why it fails, e.g. Secure Boot refusing an unsigned module)"
		}
		return check(CheckDevices, Fail, ev, advice)
	}
	nodes := "/dev/nvidiactl, " + nodeRange(h.gpuNodes)
	if !h.uvm {
		advice := "sudo modprobe nvidia-uvm (or nvidia-modprobe -u -c 0), and list it in /etc/modules-load.d"
		if d.inContainer() {
			advice = "load nvidia-uvm on the host (sudo modprobe nvidia-uvm) and restart the container, so that the runtime passes /dev/nvidia-uvm in"
		}
		return check(CheckDevices, Fail, nodes+" present, but no /dev/nvidia-uvm: cuInit fails with 999 CUDA_ERROR_UNKNOWN without it", advice)
	}
	if len(h.denied) > 0 {
		return check(CheckDevices, Fail, "no read-write access to "+strings.Join(h.denied, ", "),
			"add your user to the device's group (sudo usermod -aG GROUP $USER, then log in again) or make the nodes read-writable (NVreg_DeviceFileMode=0666)")
	}
	return check(CheckDevices, OK, nodes+" and /dev/nvidia-uvm present and read-write", "")
}

// nodeRange writes /dev/nvidia0-7 for a contiguous run, else a list.
func nodeRange(ns []int) string {
	if len(ns) == 1 {
		return fmt.Sprintf("/dev/nvidia%d", ns[0])
	}
	contiguous := true
	for i := 1; i < len(ns); i++ {
		if ns[i] != ns[i-1]+1 {
			contiguous = false
		}
	}
	if contiguous {
		return fmt.Sprintf("/dev/nvidia%d-%d", ns[0], ns[len(ns)-1])
	}
	var parts []string
	for _, n := range ns {
		parts = append(parts, fmt.Sprintf("/dev/nvidia%d", n))
	}
	return strings.Join(parts, ", ")
}

// gpuCount is the number of GPUs the host shows, 0 when unknown.
func (h *hostFacts) gpuCount() int {
	if len(h.procGPUs) > 0 {
		return len(h.procGPUs)
	}
	if len(h.gpuNodes) > 0 {
		return h.gpuNodes[len(h.gpuNodes)-1] + 1
	}
	return 0
}

func (d *diag) checkVisible() Check {
	look := func(k string) (string, bool) { return d.sys.LookupEnv(k) }
	var fs []finding
	if v, set := look("CUDA_VISIBLE_DEVICES"); !set {
		fs = append(fs, finding{OK, "CUDA_VISIBLE_DEVICES unset: every GPU is visible", ""})
	} else {
		entries := strings.Split(v, ",")
		n := d.host.gpuCount()
		valid, bad := 0, ""
		for _, e := range entries {
			if !isDeviceRef(strings.TrimSpace(e), n) {
				bad = strings.TrimSpace(e)
				break
			}
			valid++
		}
		switch {
		case valid == 0:
			fs = append(fs, finding{Fail, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q hides every GPU: CUDA sees none (cuInit gives 100 CUDA_ERROR_NO_DEVICE)", v),
				"unset CUDA_VISIBLE_DEVICES, or set it to the GPUs to use (0,1 or GPU UUIDs); a job scheduler sets it this way when the job asked for no GPU"})
		case valid < len(entries):
			present := ""
			if n > 0 {
				present = fmt.Sprintf(" (%d GPU(s) present)", n)
			}
			fs = append(fs, finding{Warn, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q: entry %q names no GPU%s, so CUDA ignores it and every entry after it", v, bad, present),
				"list only existing GPUs (nvidia-smi -L shows their indexes and UUIDs)"})
		default:
			fs = append(fs, finding{OK, fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q", v), ""})
		}
	}
	if d.inContainer() {
		if v, set := look("NVIDIA_VISIBLE_DEVICES"); set {
			switch strings.TrimSpace(v) {
			case "", "void", "none":
				st := Warn
				if len(d.host.gpuNodes) == 0 {
					st = Fail
				}
				fs = append(fs, finding{st, fmt.Sprintf("NVIDIA_VISIBLE_DEVICES=%q: the container runtime was told to pass no GPU", v),
					"start the container with NVIDIA_VISIBLE_DEVICES=all (docker run --gpus all)"})
			default:
				fs = append(fs, finding{OK, fmt.Sprintf("NVIDIA_VISIBLE_DEVICES=%q", v), ""})
			}
		}
		if v, set := look("NVIDIA_DRIVER_CAPABILITIES"); set && !hasCompute(v) {
			fs = append(fs, finding{Fail, fmt.Sprintf("NVIDIA_DRIVER_CAPABILITIES=%q: without \"compute\" the runtime mounts no libcuda.so.1", v),
				"start the container with NVIDIA_DRIVER_CAPABILITIES=compute,utility (or all)"})
		}
	}
	return combine(CheckVisible, fs)
}

// isDeviceRef reports an entry CUDA accepts in CUDA_VISIBLE_DEVICES: an
// index of an existing GPU (when the count is known), or a GPU or MIG UUID.
func isDeviceRef(e string, n int) bool {
	if strings.HasPrefix(e, "GPU-") || strings.HasPrefix(e, "MIG-") {
		return true
	}
	i, err := strconv.Atoi(e)
	if err != nil || i < 0 {
		return false
	}
	return n == 0 || i < n
}

func hasCompute(caps string) bool {
	for _, c := range strings.Split(caps, ",") {
		switch strings.TrimSpace(c) {
		case "compute", "all":
			return true
		}
	}
	return false
}

func (d *diag) checkContainer() Check {
	c := d.host.container
	if c.kind == "" {
		return check(CheckContainer, OK, "not in a container (no /.dockerenv, /run/.containerenv or container cgroup)", "")
	}
	where := fmt.Sprintf("in %s (%s)", c.name(), c.evidence)
	var missing []string
	if !d.host.ctl && len(d.host.gpuNodes) == 0 && !d.host.wsl && d.host.nvgpu == "" {
		missing = append(missing, "no /dev/nvidia*")
	}
	if d.model.err == "" && !d.model.libcuda.found() {
		missing = append(missing, "no libcuda.so.1")
	}
	if len(missing) > 0 {
		return check(CheckContainer, Warn, where+" without GPU access: "+strings.Join(missing, ", "), c.runtimeAdvice())
	}
	return check(CheckContainer, OK, where+": GPU device files and libcuda.so.1 are present", "")
}

func (d *diag) targetName() string {
	if d.target == nil {
		return ""
	}
	return d.target.name
}

func (d *diag) checkCompat() Check {
	drv, src := d.effectiveDriver()
	probeCUDA := 0
	if p := d.probe; p != nil && p.DriverCUDA != nil && *p.DriverCUDA > 0 {
		probeCUDA = *p.DriverCUDA
	}
	if d.target == nil {
		switch {
		case drv.ok():
			if m, n, ok := maxCUDA(drv); ok {
				return check(CheckCompat, OK, fmt.Sprintf("no target given; driver %s runs CUDA %d.%d and older", drv, m, n), "")
			}
			return check(CheckCompat, Warn, fmt.Sprintf("no target given; driver %s is older than every CUDA 11, 12 and 13 release", drv),
				"upgrade the NVIDIA driver: CUDA 12 wheels need 525.60.13 or newer, CUDA 13 wheels 580 or newer")
		case probeCUDA > 0:
			return check(CheckCompat, OK, fmt.Sprintf("no target given; cuDriverGetVersion reports CUDA %s", cudaVersionText(probeCUDA)), "")
		}
		return check(CheckCompat, OK, "no target given and no driver version: nothing to compare", "")
	}
	name := d.targetName()
	major, minor, why := d.targetCUDA()
	if major == 0 {
		return check(CheckCompat, OK, fmt.Sprintf("%s needs no CUDA runtime (no libcudart, libcublas or libnvrtc in its closure)", name), "")
	}
	needs := fmt.Sprintf("%s needs CUDA %d (%s)", name, major, why)
	if minor >= 0 {
		needs = fmt.Sprintf("%s needs CUDA %d.%d (%s)", name, major, minor, why)
	}
	if _, known := minorCompatFloor(major); !known {
		return check(CheckCompat, Warn, fmt.Sprintf("%s, which is not in this cudadeps' driver table (CUDA 11 to %d)", needs, newestKnownMajor()),
			"check the driver it needs in NVIDIA's CUDA Toolkit release notes")
	}
	if !drv.ok() {
		if probeCUDA > 0 {
			if probeCUDA/1000 >= major {
				return check(CheckCompat, OK, fmt.Sprintf("%s; cuDriverGetVersion reports CUDA %s", needs, cudaVersionText(probeCUDA)), "")
			}
			floor, _ := minorCompatFloor(major)
			return check(CheckCompat, Fail, fmt.Sprintf("%s; cuDriverGetVersion reports CUDA %s only", needs, cudaVersionText(probeCUDA)),
				fmt.Sprintf("upgrade the NVIDIA driver to %s or newer, or install the package's CUDA %d build", floor, probeCUDA/1000))
		}
		return check(CheckCompat, Warn, needs+", but the driver version is unknown (see the driver check)", "")
	}
	v := driverRuns(drv, major, minor)
	runsText := fmt.Sprintf("driver %s (%s)", drv, src)
	if v.max != "" {
		runsText += " runs CUDA " + v.max + " and older"
	}
	if !v.runs {
		advice := fmt.Sprintf("upgrade the NVIDIA driver to %s or newer", v.floor)
		if m, _, ok := maxCUDA(drv); ok && m < major {
			advice += fmt.Sprintf(", or install the package's CUDA %d build", m)
		}
		advice += fmt.Sprintf("; on data-center GPUs the cuda-compat-%d-x package also runs it", major)
		return check(CheckCompat, Fail, fmt.Sprintf("%s; %s, and CUDA %d.x needs %s or newer", needs, runsText, major, v.floor), advice)
	}
	if v.minorCompat {
		rd, _ := releaseDriver(major, minor)
		return check(CheckCompat, Warn, fmt.Sprintf("%s; %s: CUDA %d.%d runs through minor version compatibility", needs, runsText, major, minor),
			fmt.Sprintf("PTX built by CUDA %d.%d does not JIT on this driver (CUDA_ERROR_UNSUPPORTED_PTX_VERSION): upgrade to %s or newer if kernels fail to load", major, minor, rd))
	}
	return check(CheckCompat, OK, fmt.Sprintf("%s; %s", needs, runsText), "")
}

// cudaVersionText writes cuDriverGetVersion's 13000 as 13.0.
func cudaVersionText(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }
