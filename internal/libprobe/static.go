//go:build !dlprobe

package libprobe

import "io"

// Dlopen reports a build that loads libraries itself. This one is
// statically linked and has no dynamic loader to do it: its probes run in
// python3.
const Dlopen = false

// Unavailable is the probe of this build when asked to run as one: it
// says it cannot load libraries and returns the exit status.
func Unavailable(w io.Writer) int {
	NewSay(w)("error", "dlopen", "this cudadeps is statically linked and cannot load libraries (build it with -tags dlprobe)")
	return 1
}
