package ldso

import (
	"context"
	"debug/elf"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// TestLayoutMatchesLoaderHelp checks the fallback calibration (used where
// the loader cannot be asked: a foreign root, a glibc before 2.33) against
// what the host's own loader says of itself.
func TestLayoutMatchesLoaderHelp(t *testing.T) {
	interp, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	fsys, err := newRootFS("")
	if err != nil {
		t.Fatal(err)
	}
	base := archFromLayout(fsys, elf.EM_X86_64, elf.ELFCLASS64, 0)
	probed, err := probeLoader(context.Background(), interp, base)
	if err != nil {
		lddtest.Need(t, false, "%s --help: %v (glibc before 2.33?)", interp, err)
	}
	for _, c := range []struct{ what, got, want string }{
		{"system directories", strings.Join(base.SystemDirs, ":"), strings.Join(probed.SystemDirs, ":")},
		{"glibc-hwcaps", strings.Join(base.HWCaps, ":"), strings.Join(probed.HWCaps, ":")},
		{"legacy subdirectories", strings.Join(base.Legacy, ":"), strings.Join(probed.Legacy, ":")},
		{"$PLATFORM", base.Platform, probed.Platform},
		{"$LIB", base.Lib, probed.Lib},
	} {
		if c.got != c.want {
			t.Errorf("%s from the layout: %q; the loader says %q", c.what, c.got, c.want)
		}
	}
}

func TestParseLoaderHelp(t *testing.T) {
	const help = `Shared library search path:
  (libraries located via /etc/ld.so.cache)
  /lib/aarch64-linux-gnu (system search path)
  /usr/lib/aarch64-linux-gnu (system search path)
  /lib (system search path)
  /usr/lib (system search path)

No subdirectories of glibc-hwcaps directories are searched.

Legacy HWCAP subdirectories under library search path directories:
  aarch64 (AT_PLATFORM; supported, searched)
  tls (supported, searched)
  atomics (supported, searched)
`
	a := &ArchConfig{}
	if err := parseLoaderHelp(help, a); err != nil {
		t.Fatal(err)
	}
	if a.Lib != "lib/aarch64-linux-gnu" || a.Platform != "aarch64" || len(a.HWCaps) != 0 ||
		strings.Join(a.Legacy, " ") != "tls/aarch64/atomics/ tls/aarch64/ tls/atomics/ tls/ aarch64/atomics/ aarch64/ atomics/" {
		t.Fatalf("parsed %+v", a)
	}
}
