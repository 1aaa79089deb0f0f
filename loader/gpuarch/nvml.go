package gpuarch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The NVML query runs in a subprocess, as doctor's probe does, so that a
// crash in libnvidia-ml.so.1 (or a shim of it) cannot take cudadeps down:
// this binary with NVMLChild where it can load libraries (-tags dlprobe),
// else python3 with NVMLScript. It writes one line per step:
//
//	stage dlopen|init|count|done
//	error STAGE MESSAGE
//	driver_cuda N            nvmlSystemGetCudaDriverVersion_v2 (13000)
//	count N                  nvmlDeviceGetCount_v2
//	gpu INDEX MAJOR MINOR PCIID NAME
//	                         nvmlDeviceGetCudaComputeCapability; PCIID is
//	                         nvmlPciInfo_t.pciDeviceId (device<<16|vendor), hex
//	gpu_error INDEX CALL RESULT
//	done

// NVMLScript is the query in Python, for builds that cannot load libraries
// themselves: python3 -c NVMLScript.
const NVMLScript = `import ctypes, sys
def say(*a):
    sys.stdout.write(" ".join(str(x) for x in a) + "\n"); sys.stdout.flush()
say("stage", "dlopen")
try:
    nv = ctypes.CDLL("libnvidia-ml.so.1")
except OSError as e:
    say("error", "dlopen", e); sys.exit(0)
say("stage", "init")
r = nv.nvmlInit_v2()
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

// queryNVML runs the NVML subprocess and reads its answer.
func queryNVML(ctx context.Context, opts DetectOptions) SourceResult {
	r := SourceResult{Source: SourceNVML, Via: opts.Via}
	run := opts.Exec
	if run == nil {
		run = RunCommand
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultNVMLTimeout
	}
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := run(qctx, opts.NVMLCommand)
	if err != nil && len(out) == 0 {
		r.Error = err.Error()
		return r
	}
	parseNVML(out, &r)
	if err != nil && r.Error == "" {
		r.Error = err.Error()
	}
	return r
}

// parseNVML reads the protocol into r.
func parseNVML(out []byte, r *SourceResult) {
	stage, done := "", false
	var failures []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		key, rest, _ := strings.Cut(sc.Text(), " ")
		f := strings.Fields(rest)
		switch key {
		case "stage":
			stage = rest
		case "error":
			st, msg, _ := strings.Cut(rest, " ")
			r.Error = nvmlError(st, msg)
		case "driver_cuda":
			if v, err := ParseVersion(strings.TrimSpace(rest)); err == nil {
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
			if _, name, ok := strings.Cut(rest, " "+f[3]+" "); ok {
				g.Name = strings.TrimSpace(name)
			}
			if id, err := strconv.ParseUint(f[3], 16, 32); err == nil && id&0xffff == 0x10de {
				g.PCIID = fmt.Sprintf("10de:%04x", id>>16)
			}
			r.GPUs = append(r.GPUs, g)
		case "gpu_error":
			failures = append(failures, rest)
		case "done":
			done = true
		}
	}
	switch {
	case r.Error != "":
	case len(r.GPUs) == 0 && len(failures) > 0:
		r.Error = "NVML answered for no GPU: " + strings.Join(failures, "; ")
	case len(r.GPUs) == 0 && done:
		r.Error = "NVML sees no GPU"
	case !done && len(r.GPUs) == 0:
		if stage == "" {
			stage = "start"
		}
		r.Error = "the NVML query stopped in " + stage
	}
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
