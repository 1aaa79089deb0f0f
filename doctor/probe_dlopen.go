//go:build dlprobe

package doctor

import (
	"fmt"
	"io"
	"os"

	"github.com/ebitengine/purego"
)

// DlopenProbe reports a build that loads libcuda.so.1 itself: ProbeChild
// works, and the binary is dynamically linked against libc (purego needs
// the system's dynamic loader to call dlopen).
const DlopenProbe = true

// ProbeChild is the probe subprocess: it loads libcuda.so.1 as a CUDA
// program would, calls cuInit(0), cuDriverGetVersion and cuDeviceGetCount,
// and writes the probe protocol to w, one unbuffered line per step, so that
// a crash still leaves the last step behind. It returns the exit status.
func ProbeChild(w io.Writer) int {
	say := func(a ...any) { fmt.Fprintln(w, a...) }
	say("stage", "dlopen")
	h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		say("error", "dlopen", err)
		return 0
	}
	say("stage", "dlsym")
	initSym, err := purego.Dlsym(h, "cuInit")
	if err != nil {
		say("error", "dlsym", err)
		return 0
	}
	if maps, err := os.ReadFile("/proc/self/maps"); err == nil {
		if f := mappedFile(maps, uint64(initSym)); f != "" {
			say("loaded", f)
		}
	}
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
