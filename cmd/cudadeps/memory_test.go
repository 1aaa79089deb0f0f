package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/cudadeps/cudadeps/internal/lddtest"
)

// maxScanRSS is the memory target of a scan: the default scan (symbols
// bound, run-time opens resolved) of a system's library directory peaks
// under 64 MiB resident, with no soft heap limit to hide what it
// allocates.
const maxScanRSS = 64 << 20

// TestScanPeakRSS measures the peak resident memory of the default scan of
// the host's multiarch library directory, run as its own process with
// GOMEMLIMIT=off: a measurement of the child, not a timing, so it gates.
func TestScanPeakRSS(t *testing.T) {
	const dir = "/usr/lib/x86_64-linux-gnu"
	if _, err := os.Stat(dir); err != nil {
		lddtest.Need(t, false, "%s is absent", dir)
	}
	cmd := exec.Command(binary(t), "scan", "--quiet", dir)
	cmd.Env = append(userEnv(t), "GOMEMLIMIT=off", "GOGC=")
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if code := cmd.ProcessState.ExitCode(); code != exitOK && code != exitMissing {
		t.Fatalf("scan %s: exit %d", dir, code)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Skip("no resource usage for the child on this system")
	}
	peak := ru.Maxrss << 10 // KiB on Linux
	t.Logf("scan %s: peak RSS %.1f MiB", dir, float64(peak)/(1<<20))
	if peak > maxScanRSS {
		t.Errorf("scan %s peaked at %.1f MiB resident, over the %d MiB target", dir, float64(peak)/(1<<20), maxScanRSS>>20)
	}
}
