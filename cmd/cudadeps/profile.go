package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"
)

// profileEnv names a directory where a run writes its CPU, heap, block
// and mutex profiles (cpu.pprof, heap.pprof, block.pprof, mutex.pprof),
// for `go tool pprof`, the heap as the collection that found the most live
// memory left it (heap-peak.pprof: what the peak RSS is made of), what the runtime holds memory for at the end
// (memory.txt: the peak RSS is the heap's high mark plus these, and the
// program's own pages each mapping holds resident), and its
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
	peak := watchPeakHeap()
	return func() {
		writeFile(stderr, filepath.Join(dir, "heap-peak.pprof"), peak())
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

// watchPeakHeap keeps, after each garbage collection that finds more
// live heap than any before, the heap profile as of that collection; the
// returned function stops watching and gives the last one kept.
func watchPeakHeap() func() []byte {
	stop, done := make(chan struct{}), make(chan []byte)
	go func() {
		samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
		var cycles, most uint64
		var kept bytes.Buffer
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				if kept.Len() == 0 { // no collection ran: the heap as it is
					_ = pprof.Lookup("heap").WriteTo(&kept, 0)
				}
				done <- kept.Bytes()
				return
			case <-tick.C:
			}
			metrics.Read(samples)
			if c, live := samples[0].Value.Uint64(), samples[1].Value.Uint64(); c != cycles && live > most {
				cycles, most = c, live
				kept.Reset()
				_ = pprof.Lookup("heap").WriteTo(&kept, 0)
			}
		}
	}()
	return func() []byte {
		close(stop)
		return <-done
	}
}

func writeFile(stderr io.Writer, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		fmt.Fprintf(stderr, "cudadeps: %s: %v\n", profileEnv, err)
	}
}

// writeMemoryClasses writes the runtime's memory metrics, one per line in
// bytes, with the peak RSS the kernel counted.
func writeMemoryClasses(path string) error {
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if d.Kind == metrics.KindUint64 && (strings.HasPrefix(d.Name, "/memory/classes/") || strings.HasPrefix(d.Name, "/gc/heap/goal") || d.Name == "/gc/heap/allocs:bytes" || d.Name == "/gc/heap/allocs:objects" || strings.HasPrefix(d.Name, "/gc/cycles/total")) {
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
	b.WriteString(residentMappings())
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// residentMappings sums /proc/self/smaps by mapping: the program's own
// text, read-only data and data apart from the anonymous memory, because
// file pages the kernel maps around each fault count in the RSS too.
func residentMappings() string {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return ""
	}
	var b strings.Builder
	var head string
	for _, line := range strings.Split(string(smaps), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			head = fields[1]
			if len(fields) >= 6 {
				head += " " + fields[5]
			} else {
				head += " [anon]"
			}
		case len(fields) == 3 && fields[0] == "Rss:" && fields[1] != "0":
			fmt.Fprintf(&b, "mapping %-50s Rss %8s kB\n", head, fields[1])
		}
	}
	return b.String()
}
