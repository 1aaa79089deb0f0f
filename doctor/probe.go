package doctor

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/internal/libprobe"
)

// ProbeResult is what the probe subprocess reported.
type ProbeResult struct {
	// Stage is the last step the probe reached: dlopen, dlsym, cuInit,
	// cuDriverGetVersion, cuDeviceGetCount, done.
	Stage string `json:"stage"`
	// Loaded is the file libcuda.so.1 was loaded from (from /proc/self/maps).
	Loaded string `json:"loaded,omitempty"`
	// Error is dlopen's or dlsym's message.
	Error string `json:"error,omitempty"`
	// Init is cuInit(0)'s CUresult.
	Init *int `json:"init,omitempty"`
	// DriverCUDA is cuDriverGetVersion's answer (13000 for CUDA 13.0).
	DriverCUDA *int `json:"driver_cuda,omitempty"`
	// Devices is cuDeviceGetCount's answer, CountResult its CUresult.
	Devices     *int `json:"devices,omitempty"`
	CountResult *int `json:"count_result,omitempty"`
	// Died says how the subprocess ended when it did not finish: a signal
	// ("SIGSEGV") or an exit status.
	Died     string `json:"died,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// Skipped says why the probe did not run.
	Skipped string `json:"skipped,omitempty"`
	Stderr  string `json:"-"`
}

// The probe's lines (libprobe's protocol), one per step, so that the last
// line read tells where it died:
//
//	stage dlopen | dlsym | cuInit | cuDriverGetVersion | cuDeviceGetCount
//	error dlopen|dlsym MESSAGE
//	loaded PATH
//	init N
//	version N
//	count_result N
//	count N
//	done

// ProbeScript is the probe in Python, for builds of cudadeps that cannot
// load libraries themselves (a static binary has no dynamic loader):
// python3 -c ProbeScript.
const ProbeScript = libprobe.Prelude + `lib = load("libcuda.so.1")
say("stage", "dlsym")
try:
    init = lib.cuInit
except AttributeError as e:
    say("error", "dlsym", e); sys.exit(0)
say_loaded(init)
init.argtypes = [ctypes.c_uint]; init.restype = ctypes.c_int
say("stage", "cuInit")
say("init", init(0))
say("stage", "cuDriverGetVersion")
v = ctypes.c_int(0)
try:
    if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
        say("version", v.value)
except AttributeError:
    pass
say("stage", "cuDeviceGetCount")
n = ctypes.c_int(0)
try:
    say("count_result", lib.cuDeviceGetCount(ctypes.byref(n)))
    say("count", n.value)
except AttributeError:
    pass
say("done")
`

// probeResult reads the probe's own lines.
func probeResult(o *libprobe.Outcome) *ProbeResult {
	p := &ProbeResult{Stage: o.Stage, Loaded: o.Loaded, Error: o.Error, Died: o.Died, TimedOut: o.TimedOut, Stderr: o.Stderr}
	if o.Done {
		p.Stage = "done"
	}
	num := func(s string) *int {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil
		}
		return &n
	}
	for _, l := range o.Lines {
		switch l.Key {
		case "init":
			p.Init = num(l.Value)
		case "version":
			p.DriverCUDA = num(l.Value)
		case "count_result":
			p.CountResult = num(l.Value)
		case "count":
			p.Devices = num(l.Value)
		}
	}
	return p
}

func (d *diag) runProbe(ctx context.Context) *ProbeResult {
	if len(d.opts.ProbeCommand) == 0 {
		return &ProbeResult{Skipped: "this cudadeps cannot load libraries itself (a static build) and no python3 was found to do it"}
	}
	timeout := d.opts.ProbeTimeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	d.log.Debug("running the probe", "argv0", d.opts.ProbeCommand[0], "timeout", timeout)
	o, err := libprobe.Run(ctx, d.sys.Exec, d.opts.ProbeCommand, timeout)
	if err != nil {
		return &ProbeResult{Skipped: err.Error()}
	}
	return probeResult(o)
}

// cuResult names a CUresult and says what it means here.
type cuResult struct {
	name   string
	advice string
}

// cuResults are the CUresult codes cuInit and cuDeviceGetCount give when
// CUDA cannot start, with values from cuda.h.
func (d *diag) cuResult(code int) cuResult {
	containerAdvice := d.host.container.runtimeAdvice()
	switch code {
	case 0:
		return cuResult{"CUDA_SUCCESS", ""}
	case 1:
		return cuResult{"CUDA_ERROR_INVALID_VALUE", "a shim or interposer answered cuInit wrongly: try without LD_PRELOAD and with NVIDIA's libcuda.so.1"}
	case 2:
		return cuResult{"CUDA_ERROR_OUT_OF_MEMORY", "the driver could not allocate its host memory: check ulimit -v and the container's memory limit"}
	case 3:
		return cuResult{"CUDA_ERROR_NOT_INITIALIZED", "cuInit did not take: a shim or interposer is in the way, or the process forked after CUDA started"}
	case 4:
		return cuResult{"CUDA_ERROR_DEINITIALIZED", "the driver is shutting down: retry"}
	case 34:
		return cuResult{"CUDA_ERROR_STUB_LIBRARY", "libcuda.so.1 is the CUDA toolkit's stub: take the stubs directory out of LD_LIBRARY_PATH and /etc/ld.so.conf.d"}
	case 35:
		return cuResult{"cudaErrorInsufficientDriver", "the driver is older than the CUDA runtime: upgrade the driver"}
	case 46:
		return cuResult{"CUDA_ERROR_DEVICE_UNAVAILABLE", "the GPUs are busy in exclusive-process mode or prohibited: nvidia-smi -q -d COMPUTE shows the mode"}
	case 100:
		if v, set := d.sys.LookupEnv("CUDA_VISIBLE_DEVICES"); set {
			return cuResult{"CUDA_ERROR_NO_DEVICE", fmt.Sprintf("CUDA_VISIBLE_DEVICES=%q hides the GPUs: unset it or list the GPUs to use", v)}
		}
		if d.inContainer() {
			return cuResult{"CUDA_ERROR_NO_DEVICE", d.host.container.gpuAdvice()}
		}
		return cuResult{"CUDA_ERROR_NO_DEVICE", "the driver sees no usable GPU: check nvidia-smi and dmesg (NVRM lines)"}
	case 101:
		return cuResult{"CUDA_ERROR_INVALID_DEVICE", "CUDA_VISIBLE_DEVICES names a GPU that does not exist: list only existing ones (nvidia-smi -L)"}
	case 102:
		return cuResult{"CUDA_ERROR_DEVICE_NOT_LICENSED", "the vGPU has no license: check the license server (nvidia-smi -q | grep -i license)"}
	case 304:
		return cuResult{"CUDA_ERROR_OPERATING_SYSTEM", "a system call of the driver failed: device file permissions, or a seccomp or cgroup device rule of the container"}
	case 800:
		return cuResult{"CUDA_ERROR_NOT_PERMITTED", "the operation is not permitted: check the device permissions and the container's cgroup device rules"}
	case 801:
		return cuResult{"CUDA_ERROR_NOT_SUPPORTED", "this GPU or system does not support the requested mode"}
	case 802:
		return cuResult{"CUDA_ERROR_SYSTEM_NOT_READY", "a driver daemon is not running: on NVSwitch systems start nvidia-fabricmanager (its version must match the driver)"}
	case 803:
		return cuResult{"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "libcuda.so.1 and the kernel module come from different drivers: see the libcuda check (reboot after a driver upgrade, or remove a libcuda copied into the image)"}
	case 804:
		return cuResult{"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "a forward-compatibility libcuda (cuda-compat) runs only on data-center GPUs: take it out of the library path"}
	case 999:
		if d.inContainer() {
			return cuResult{"CUDA_ERROR_UNKNOWN", "the container sees the GPU but CUDA cannot use it: " + containerAdvice + "; and keep nvidia-container-toolkit on the host in step with the driver"}
		}
		return cuResult{"CUDA_ERROR_UNKNOWN", "usually nvidia-uvm is not loaded (sudo modprobe nvidia-uvm) or the driver is half-upgraded (reboot); dmesg shows NVRM errors"}
	}
	return cuResult{fmt.Sprintf("CUresult %d", code), "look the code up in cuda.h (CUresult) and the driver's dmesg lines"}
}

func (d *diag) checkProbe() Check {
	p := d.probe
	if p.Skipped != "" {
		return check(CheckProbe, Warn, "not run: "+p.Skipped, "run cudadeps doctor --probe on the GPU host itself, with a dlopen-capable build or python3 on PATH")
	}
	stage := p.Stage
	if stage == "" {
		stage = "start"
	}
	if p.Died != "" {
		ev := fmt.Sprintf("the probe died (%s) in %s", p.Died, stage)
		if p.Loaded != "" {
			ev += " of " + p.Loaded
		}
		if p.Stderr != "" {
			ev += ": " + firstLine(p.Stderr)
		}
		advice := "a library loaded with libcuda.so.1 crashed the process: check the shims and interposers above, and dmesg for NVRM lines"
		if p.TimedOut {
			advice = "cuInit hangs: check nvidia-smi (a GPU in a bad state, a missing fabric manager on NVSwitch systems) and dmesg"
		}
		return check(CheckProbe, Fail, ev, advice)
	}
	if p.Error != "" {
		if p.Stage == "dlopen" {
			advice := "install the NVIDIA driver's libraries or fix the library path (see the libcuda check)"
			if d.inContainer() {
				advice = d.host.container.gpuAdvice()
			}
			return check(CheckProbe, Fail, "dlopen(\"libcuda.so.1\") failed: "+p.Error, advice)
		}
		return check(CheckProbe, Fail, fmt.Sprintf("libcuda.so.1 has no cuInit (%s): it is not a CUDA driver", p.Error), "put the NVIDIA driver's libcuda.so.1 first on the library path")
	}
	if p.Init == nil {
		return check(CheckProbe, Fail, "the probe reported nothing about cuInit", "")
	}
	from := ""
	if p.Loaded != "" {
		from = " (" + p.Loaded + ")"
	}
	if *p.Init != 0 {
		r := d.cuResult(*p.Init)
		return check(CheckProbe, Fail, fmt.Sprintf("cuInit(0) = %d %s%s", *p.Init, r.name, from), r.advice)
	}
	ev := "cuInit(0) = 0 CUDA_SUCCESS" + from
	if p.DriverCUDA != nil {
		ev += ", driver CUDA " + cudaVersionText(*p.DriverCUDA)
	}
	if p.CountResult != nil && *p.CountResult != 0 {
		r := d.cuResult(*p.CountResult)
		return check(CheckProbe, Fail, fmt.Sprintf("%s, but cuDeviceGetCount = %d %s", ev, *p.CountResult, r.name), r.advice)
	}
	if p.Devices != nil {
		if *p.Devices == 0 {
			return check(CheckProbe, Fail, ev+", but 0 devices", d.cuResult(100).advice)
		}
		ev += fmt.Sprintf(", %d device(s)", *p.Devices)
	}
	return check(CheckProbe, OK, ev, "")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
