package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// maxScanRSS is the memory target of a scan: the default scan (symbols
// bound, run-time opens resolved) of a system's library directory peaks
// under 64 MiB resident, with no soft heap limit to hide what it
// allocates.
const maxScanRSS = 64 << 20

// TestScanPeakRSS measures the peak resident memory of the default scan of
// the host's multiarch library directory, run as its own process with
// GOMEMLIMIT=off: a measurement of the child, not a timing, so it gates.
// Both scans a user meets are measured: the first, which binds every
// symbol, and the next, answered from what the first kept.
func TestScanPeakRSS(t *testing.T) {
	const dir = "/usr/lib/x86_64-linux-gnu"
	if _, err := os.Stat(dir); err != nil {
		lddtest.Need(t, false, "%s is absent", dir)
	}
	env := append(userEnv(t), "GOMEMLIMIT=off", "GOGC=")
	for _, run := range []string{"first", "kept"} {
		cmd := exec.Command(binary(t), "scan", "--quiet", dir)
		cmd.Env = env
		peak, err := runPeakRSS(cmd)
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if code := cmd.ProcessState.ExitCode(); code != exitOK && code != exitMissing {
			t.Fatalf("scan %s (%s): exit %d", dir, run, code)
		}
		t.Logf("scan %s (%s): peak RSS %.1f MiB", dir, run, float64(peak)/(1<<20))
		if peak > maxScanRSS {
			t.Errorf("scan %s (%s) peaked at %.1f MiB resident, over the %d MiB target", dir, run, float64(peak)/(1<<20), maxScanRSS>>20)
		}
	}
}

// runPeakRSS runs cmd and returns the high-water mark of its resident
// memory, read from /proc/PID/status (VmHWM) until it exits. Not the
// child's rusage: a child started by vfork, as Go starts them, counts the
// parent's peak in its ru_maxrss.
func runPeakRSS(cmd *exec.Cmd) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	var peak int64
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if kb, ok := highWater(status); ok && kb<<10 > peak {
			peak = kb << 10
		}
		select {
		case err := <-done:
			return peak, err
		case <-tick.C:
		}
	}
}

// highWater reads VmHWM (KiB) from a /proc status file.
func highWater(status string) (int64, bool) {
	f, err := os.Open(status)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb); err == nil {
				return kb, true
			}
		}
	}
	return 0, false
}

// The heap floor grows with the processors, from 16 MiB to 32.
func TestGCFloorGrowsWithProcessors(t *testing.T) {
	for _, c := range []struct {
		procs int
		want  uint64
	}{{1, 16 << 20}, {2, 16 << 20}, {10, 16 << 20}, {12, 18 << 20}, {16, 24 << 20}, {20, 30 << 20}, {22, 32 << 20}, {64, 32 << 20}} {
		if got := gcFloor(c.procs); got != c.want {
			t.Errorf("gcFloor(%d) = %d MiB, want %d", c.procs, got>>20, c.want>>20)
		}
	}
}
