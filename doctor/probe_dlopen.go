//go:build dlprobe

package doctor

import (
	"io"

	"github.com/ebitengine/purego"

	"github.com/cudadeps/cudadeps/internal/libprobe"
)

// ProbeChild is the probe subprocess: it loads libcuda.so.1 as a CUDA
// program would, calls cuInit(0), cuDriverGetVersion and cuDeviceGetCount,
// and writes the probe's lines to w, one unbuffered line per step, so that
// a crash still leaves the last step behind. It returns the exit status.
func ProbeChild(w io.Writer) int {
	say := libprobe.NewSay(w)
	h, ok := libprobe.Open(say, "libcuda.so.1")
	if !ok {
		return 0
	}
	say("stage", "dlsym")
	initSym, err := purego.Dlsym(h, "cuInit")
	if err != nil {
		say("error", "dlsym", err)
		return 0
	}
	libprobe.SayLoaded(say, initSym)
	var cuInit func(uint32) int32
	purego.RegisterFunc(&cuInit, initSym)
	say("stage", "cuInit")
	say("init", cuInit(0))

	say("stage", "cuDriverGetVersion")
	if sym, err := purego.Dlsym(h, "cuDriverGetVersion"); err == nil {
		var getVersion func(*int32) int32
		purego.RegisterFunc(&getVersion, sym)
		v := new(int32)
		if getVersion(v) == 0 {
			say("version", *v)
		}
	}
	say("stage", "cuDeviceGetCount")
	if sym, err := purego.Dlsym(h, "cuDeviceGetCount"); err == nil {
		var getCount func(*int32) int32
		purego.RegisterFunc(&getCount, sym)
		n := new(int32)
		say("count_result", getCount(n))
		say("count", *n)
	}
	say("done")
	return 0
}
