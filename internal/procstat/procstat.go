// Package procstat reads this process's read and processor-time counters, which benchmarks report beside wall time.
package procstat

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// BytesRead is what this process has read through read(2) and pread(2) so
// far (rchar of /proc/self/io): what a piece of work costs in reads,
// whatever reads them. The benchmark is skipped where the kernel does not
// say.
func BytesRead(tb testing.TB) int64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/io")
	lddtest.Need(tb, err == nil, "no /proc/self/io: %v", err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	lddtest.Need(tb, false, "no rchar in /proc/self/io")
	return 0
}

// CPUTime is the processor time this process has used, user and system,
// its garbage collector included: on a shared, busy machine it varies far
// less than the wall time.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
