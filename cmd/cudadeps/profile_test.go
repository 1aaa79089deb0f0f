package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A run with CUDADEPS_PROFILE writes every profile it names, the memory
// classes with the kernel's peak RSS among them.
func TestProfilesWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "prof")
	t.Setenv(profileEnv, dir)
	var stderr bytes.Buffer
	stop := startProfiles(&stderr)
	keep := make([][]byte, 0, 64)
	for range 64 {
		keep = append(keep, make([]byte, 64<<10))
	}
	runtime.GC()
	time.Sleep(20 * time.Millisecond) // the peak watcher looks every millisecond
	runtime.KeepAlive(keep)
	stop()
	if stderr.Len() > 0 {
		t.Fatalf("stderr: %s", stderr.String())
	}
	for _, name := range []string{"cpu.pprof", "heap.pprof", "heap-peak.pprof", "block.pprof", "mutex.pprof", "trace.out", "memory.txt"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	mem, err := os.ReadFile(filepath.Join(dir, "memory.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/memory/classes/heap/objects:bytes", "/gc/heap/allocs:bytes", "VmHWM:"} {
		if !strings.Contains(string(mem), want) {
			t.Errorf("memory.txt lacks %s:\n%s", want, mem)
		}
	}
}
