package gpuarch

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/internal/libprobe"
)

// The NVML query is a probe (internal/libprobe): a subprocess, so that a
// crash in libnvidia-ml.so.1 (or a shim of it) cannot take cudadeps down;
// this binary with NVMLChild where it can load libraries (-tags dlprobe),
// else python3 with NVMLScript. Besides the stage, error, loaded and done
// lines of every probe, it writes:
//
//	driver_cuda N            nvmlSystemGetCudaDriverVersion_v2 (13000)
//	count N                  nvmlDeviceGetCount_v2
//	gpu INDEX MAJOR MINOR PCIID NAME
//	                         nvmlDeviceGetCudaComputeCapability; PCIID is
//	                         nvmlPciInfo_t.pciDeviceId (device<<16|vendor), hex
//	gpu_error INDEX CALL RESULT

// NVMLScript is the query in Python, for builds that cannot load libraries
// themselves: python3 -c NVMLScript.
const NVMLScript = libprobe.Prelude + `nv = load("libnvidia-ml.so.1")
try:
    init = nv.nvmlInit_v2
except AttributeError:
    say("error", "dlopen", "libnvidia-ml.so.1 lacks nvmlInit_v2"); sys.exit(0)
say_loaded(init)
say("stage", "init")
r = init()
if r != 0:
    say("error", "init", "nvmlInit_v2 returned", r); sys.exit(0)
v = ctypes.c_int(0)
try:
    if nv.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(v)) == 0:
        say("driver_cuda", v.value)
except AttributeError:
    pass
say("stage", "count")
n = ctypes.c_uint(0)
r = nv.nvmlDeviceGetCount_v2(ctypes.byref(n))
if r != 0:
    say("error", "count", "nvmlDeviceGetCount_v2 returned", r); sys.exit(0)
say("count", n.value)
class Pci(ctypes.Structure):
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]
for i in range(n.value):
    h = ctypes.c_void_p()
    r = nv.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(i), ctypes.byref(h))
    if r != 0:
        say("gpu_error", i, "nvmlDeviceGetHandleByIndex_v2", r); continue
    ma, mi = ctypes.c_int(0), ctypes.c_int(0)
    r = nv.nvmlDeviceGetCudaComputeCapability(h, ctypes.byref(ma), ctypes.byref(mi))
    if r != 0:
        say("gpu_error", i, "nvmlDeviceGetCudaComputeCapability", r); continue
    name = ctypes.create_string_buffer(96)
    if nv.nvmlDeviceGetName(h, name, ctypes.c_uint(96)) != 0:
        name.value = b"?"
    pci, pid = Pci(), "-"
    try:
        if nv.nvmlDeviceGetPciInfo_v3(h, ctypes.byref(pci)) == 0:
            pid = "%08x" % pci.pciDeviceId
    except AttributeError:
        pass
    say("gpu", i, ma.value, mi.value, pid, name.value.decode("utf-8", "replace"))
nv.nvmlShutdown()
say("done")
`

// queryNVML runs the NVML probe and reads its answer; the outcome is nil
// when it could not start.
func queryNVML(ctx context.Context, opts DetectOptions) (SourceResult, *libprobe.Outcome) {
	r := SourceResult{Source: SourceNVML, Via: opts.Via}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultNVMLTimeout
	}
	o, err := libprobe.Run(ctx, opts.Exec, opts.NVMLCommand, timeout)
	if err != nil {
		r.Error = err.Error()
		return r, nil
	}
	readNVML(o, &r)
	return r, o
}

// readNVML reads the query's own lines into r.
func readNVML(o *libprobe.Outcome, r *SourceResult) {
	r.Library = o.Loaded
	var failures []string
	for _, l := range o.Lines {
		f := strings.Fields(l.Value)
		switch l.Key {
		case "driver_cuda":
			if v, err := ParseVersion(strings.TrimSpace(l.Value)); err == nil {
				r.DriverCUDA = &v
			}
		case "gpu":
			if len(f) < 4 {
				continue
			}
			idx, err1 := strconv.Atoi(f[0])
			ma, err2 := strconv.Atoi(f[1])
			mi, err3 := strconv.Atoi(f[2])
			if err1 != nil || err2 != nil || err3 != nil || ma <= 0 || ma > 99 || mi < 0 || mi > 9 {
				continue
			}
			g := GPU{Index: idx, CC: CC{ma, mi}}
			if _, name, ok := strings.Cut(l.Value, " "+f[3]+" "); ok {
				g.Name = strings.TrimSpace(name)
			}
			if id, err := strconv.ParseUint(f[3], 16, 32); err == nil && id&0xffff == 0x10de {
				g.PCIID = fmt.Sprintf("10de:%04x", id>>16)
			}
			r.GPUs = append(r.GPUs, g)
		case "gpu_error":
			failures = append(failures, l.Value)
		}
	}
	switch {
	case o.Error != "":
		r.Error = nvmlError(o.Stage, o.Error)
	case len(r.GPUs) == 0 && len(failures) > 0:
		r.Error = "NVML answered for no GPU: " + strings.Join(failures, "; ")
	case len(r.GPUs) == 0 && o.Done:
		r.Error = "NVML sees no GPU"
	case len(r.GPUs) == 0:
		r.Error = "the NVML query stopped in " + cmp.Or(o.Stage, "start") + " (" + o.Died + ")"
		if o.TimedOut {
			r.Error = "the NVML query did not answer in time (" + o.Died + ", in " + cmp.Or(o.Stage, "start") + ")"
		} else if o.Stderr != "" {
			r.Error += ": " + lastLine(o.Stderr)
		}
	}
}

// lastLine is the last line of s (a Python traceback ends with the
// exception).
func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// nvmlError words a failure of the query.
func nvmlError(stage, msg string) string {
	switch stage {
	case "dlopen":
		return "cannot load libnvidia-ml.so.1: " + strings.TrimPrefix(msg, "libnvidia-ml.so.1: ")
	case "init":
		if strings.HasSuffix(msg, " 9") {
			return msg + " (NVML_ERROR_DRIVER_NOT_LOADED)"
		}
	}
	return msg
}
