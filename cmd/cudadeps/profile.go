package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"strings"
)

// profileEnv names a directory where a run writes its CPU, heap, block
// and mutex profiles (cpu.pprof, heap.pprof, block.pprof, mutex.pprof),
// for `go tool pprof`, what the runtime holds memory for at the end
// (memory.txt: the peak RSS is the heap's high mark plus these), and its
// execution trace (trace.out, for `go tool
// trace`: what each goroutine waited on, when; the wall-clock path that
// profiles of processor time do not show): how the speed figures of
// docs/performance.md are taken apart on a machine where only the binary
// runs.
const profileEnv = "CUDADEPS_PROFILE"

// startProfiles starts the profiles profileEnv asks for and returns what
// stops and writes them; a directory that cannot be written is said on
// stderr and the run goes on unprofiled.
func startProfiles(stderr io.Writer) func() {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "cudadeps: %s: %v\n", profileEnv, err)
		return func() {}
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		fmt.Fprintf(stderr, "cudadeps: %s: %v\n", profileEnv, err)
		return func() {}
	}
	runtime.SetBlockProfileRate(10_000) // a sample per 10 µs blocked
	runtime.SetMutexProfileFraction(10)
	if err := pprof.StartCPUProfile(cpu); err != nil {
		fmt.Fprintf(stderr, "cudadeps: %s: %v\n", profileEnv, err)
	}
	tr, err := os.Create(filepath.Join(dir, "trace.out"))
	if err == nil {
		err = trace.Start(tr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "cudadeps: %s: %v\n", profileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		cpu.Close()
		if tr != nil {
			trace.Stop()
			tr.Close()
		}
		for _, name := range []string{"heap", "block", "mutex"} {
			f, err := os.Create(filepath.Join(dir, name+".pprof"))
			if err != nil {
				fmt.Fprintf(stderr, "cudadeps: %s: %v\n", profileEnv, err)
				continue
			}
			_ = pprof.Lookup(name).WriteTo(f, 0)
			f.Close()
		}
		if err := writeMemoryClasses(filepath.Join(dir, "memory.txt")); err != nil {
			fmt.Fprintf(stderr, "cudadeps: %s: %v\n", profileEnv, err)
		}
	}
}

// writeMemoryClasses writes the runtime's memory metrics, one per line in
// bytes, with the peak RSS the kernel counted.
func writeMemoryClasses(path string) error {
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if d.Kind == metrics.KindUint64 && (strings.HasPrefix(d.Name, "/memory/classes/") || strings.HasPrefix(d.Name, "/gc/heap/goal") || d.Name == "/gc/heap/allocs:bytes" || strings.HasPrefix(d.Name, "/gc/cycles/total")) {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	var b strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&b, "%-60s %12d\n", s.Name, s.Value.Uint64())
	}
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmHWM") || strings.HasPrefix(line, "VmRSS") || strings.HasPrefix(line, "Rss") {
				b.WriteString(line + "\n")
			}
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
