//go:build dlprobe

package gpuarch

import (
	"fmt"
	"io"
	"strings"

	"github.com/ebitengine/purego"

	"github.com/cudadeps/cudadeps/internal/libprobe"
)

// NVMLChild is the NVML query subprocess of builds that load libraries
// themselves (-tags dlprobe, as doctor's probe): it loads
// libnvidia-ml.so.1 through purego and writes the query's lines to w, one
// unbuffered line per step. It returns the exit status.
func NVMLChild(w io.Writer) int {
	say := libprobe.NewSay(w)
	h, ok := libprobe.Open(say, "libnvidia-ml.so.1")
	if !ok {
		return 0
	}
	lib, missing := bindNVML(h)
	if missing != nil {
		say("error", "dlopen", "libnvidia-ml.so.1 lacks "+strings.Join(missing, ", "))
		return 0
	}
	if s, err := purego.Dlsym(h, "nvmlInit_v2"); err == nil {
		libprobe.SayLoaded(say, s)
	}
	say("stage", "init")
	if r := lib.initV2(); r != 0 {
		say("error", "init", "nvmlInit_v2 returned", r)
		return 0
	}
	if lib.driverVersion != nil {
		var v int32
		if lib.driverVersion(&v) == 0 {
			say("driver_cuda", v)
		}
	}
	say("stage", "count")
	var n uint32
	if r := lib.count(&n); r != 0 {
		say("error", "count", "nvmlDeviceGetCount_v2 returned", r)
		return 0
	}
	say("count", n)
	for i := uint32(0); i < n && i < 1024; i++ {
		lib.queryGPU(say, i)
	}
	if lib.shutdown != nil {
		lib.shutdown()
	}
	say("done")
	return 0
}

// nvmlLib holds the NVML functions the query calls; an optional one is nil
// where the library lacks it.
type nvmlLib struct {
	initV2     func() int32
	count      func(*uint32) int32
	byIndex    func(uint32, *uintptr) int32
	capability func(uintptr, *int32, *int32) int32
	// Optional.
	shutdown      func() int32
	driverVersion func(*int32) int32
	name          func(uintptr, *byte, uint32) int32
	pciInfo       func(uintptr, *byte) int32
}

// bindNVML binds the functions of the NVML library h; missing names the
// required ones it lacks (nil when it has them all).
func bindNVML(h uintptr) (lib *nvmlLib, missing []string) {
	lib = &nvmlLib{}
	sym := func(name string, fn any) bool {
		s, err := purego.Dlsym(h, name)
		if err != nil {
			missing = append(missing, name)
			return false
		}
		purego.RegisterFunc(fn, s)
		return true
	}
	ok := sym("nvmlInit_v2", &lib.initV2) && sym("nvmlDeviceGetCount_v2", &lib.count) &&
		sym("nvmlDeviceGetHandleByIndex_v2", &lib.byIndex) && sym("nvmlDeviceGetCudaComputeCapability", &lib.capability)
	if !ok {
		return nil, missing
	}
	// The optional ones: a function not found stays nil.
	optional := func(name string, fn any) {
		if s, err := purego.Dlsym(h, name); err == nil {
			purego.RegisterFunc(fn, s)
		}
	}
	optional("nvmlShutdown", &lib.shutdown)
	optional("nvmlSystemGetCudaDriverVersion_v2", &lib.driverVersion)
	optional("nvmlDeviceGetName", &lib.name)
	optional("nvmlDeviceGetPciInfo_v3", &lib.pciInfo)
	return lib, nil
}

// queryGPU says the compute capability, PCI device id and name of GPU i.
func (lib *nvmlLib) queryGPU(say libprobe.Say, i uint32) {
	var dev uintptr
	if r := lib.byIndex(i, &dev); r != 0 {
		say("gpu_error", i, "nvmlDeviceGetHandleByIndex_v2", r)
		return
	}
	var major, minor int32
	if r := lib.capability(dev, &major, &minor); r != 0 {
		say("gpu_error", i, "nvmlDeviceGetCudaComputeCapability", r)
		return
	}
	label := "?"
	if lib.name != nil {
		buf := make([]byte, 96)
		if lib.name(dev, &buf[0], uint32(len(buf))) == 0 {
			if j := strings.IndexByte(string(buf), 0); j >= 0 {
				buf = buf[:j]
			}
			label = string(buf)
		}
	}
	id := "-"
	if lib.pciInfo != nil {
		// nvmlPciInfo_t: busIdLegacy[16], domain, bus, device,
		// pciDeviceId, pciSubSystemId, busId[32].
		buf := make([]byte, 16+5*4+32)
		if lib.pciInfo(dev, &buf[0]) == 0 {
			v := uint32(buf[28]) | uint32(buf[29])<<8 | uint32(buf[30])<<16 | uint32(buf[31])<<24
			id = fmt.Sprintf("%08x", v)
		}
	}
	say("gpu", i, major, minor, id, label)
}
