//go:build !dlprobe

package gpuarch

import (
	"io"

	"github.com/cudadeps/cudadeps/internal/libprobe"
)

// NVMLChild is the NVML query subprocess of dlopen-capable builds (-tags
// dlprobe); this build only says it cannot load libraries: its query runs
// NVMLScript in python3.
func NVMLChild(w io.Writer) int { return libprobe.Unavailable(w) }
