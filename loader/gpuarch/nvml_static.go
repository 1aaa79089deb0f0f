//go:build !dlprobe

package gpuarch

import (
	"fmt"
	"io"
)

// NVMLChild is the NVML query subprocess of dlopen-capable builds (-tags
// dlprobe); this build is statically linked, has no dynamic loader, and
// only says so: the query runs NVMLScript in python3 instead.
func NVMLChild(w io.Writer) int {
	fmt.Fprintln(w, "error dlopen this cudadeps is statically linked and cannot load libraries (build it with -tags dlprobe)")
	return 1
}
