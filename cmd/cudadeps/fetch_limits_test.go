package main

import (
	"debug/elf"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
)

// The limit flags reach the extraction: an archive over one is refused,
// and nothing is installed.
func TestFetchLimitFlags(t *testing.T) {
	m := mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-sbsa", Variant: "cuda13", Machine: elf.EM_AARCH64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0": {Soname: "libcudss.so.0"}}}})
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for flag, want := range map[string]string{
		"--max-archive-entries=1": "limit of 1 entries",
		"--max-name-bytes=8":      "names take more than the limit of 8 bytes",
		"--max-archive-bytes=1":   "limit of 1 bytes",
	} {
		prefix := t.TempDir()
		code, _, stderr := runCLI(t, "fetch", "libcudss", "--platform", "linux-sbsa", "--cuda", "13", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--quiet", flag)
		if code != exitError || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %s; want %q", flag, code, stderr, want)
		}
		if code, out, _ := runCLI(t, "store", "list", "--prefix", prefix); code != exitOK || !strings.Contains(out, "no components installed") {
			t.Errorf("%s: store holds %s", flag, out)
		}
	}
}
