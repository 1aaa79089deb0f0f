//go:build !dlprobe

package doctor

import (
	"fmt"
	"io"
)

// DlopenProbe reports a build that loads libcuda.so.1 itself. This one is
// statically linked and has no dynamic loader to do it: the probe runs
// ProbeScript in python3 instead.
const DlopenProbe = false

// ProbeChild is the probe subprocess of dlopen-capable builds (-tags
// dlprobe); in this build it only says it cannot load libraries.
func ProbeChild(w io.Writer) int {
	fmt.Fprintln(w, "error dlopen this cudadeps is statically linked and cannot load libraries (build it with -tags dlprobe)")
	return 1
}
