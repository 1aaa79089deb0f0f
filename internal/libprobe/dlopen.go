//go:build dlprobe

package libprobe

import "github.com/ebitengine/purego"

// Dlopen reports a build that loads libraries itself: its probes run in
// this binary, which is dynamically linked against libc (purego needs the
// system's dynamic loader to call dlopen).
const Dlopen = true

// Open says the dlopen stage and loads soname as a program would; when it
// cannot, it says why and returns false: the probe then ends.
func Open(say Say, soname string) (uintptr, bool) {
	say("stage", "dlopen")
	h, err := purego.Dlopen(soname, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		say("error", "dlopen", err)
		return 0, false
	}
	return h, true
}
