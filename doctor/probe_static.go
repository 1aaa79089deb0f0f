//go:build !dlprobe

package doctor

import (
	"io"

	"github.com/cudadeps/cudadeps/internal/libprobe"
)

// ProbeChild is the probe subprocess of dlopen-capable builds (-tags
// dlprobe); this build only says it cannot load libraries: its probe runs
// ProbeScript in python3.
func ProbeChild(w io.Writer) int { return libprobe.Unavailable(w) }
