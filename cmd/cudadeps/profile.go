package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// profileEnv names a directory where a run writes its CPU, heap, block
// and mutex profiles (cpu.pprof, heap.pprof, block.pprof, mutex.pprof),
// for `go tool pprof`, and its execution trace (trace.out, for `go tool
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
	}
}
