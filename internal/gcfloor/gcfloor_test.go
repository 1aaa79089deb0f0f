package gcfloor

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// The tests change the collector of their process: each runs in a child
// of its own. inChild reports whether this is the child; in the parent it
// runs the child, which must pass.
func inChild(t *testing.T, name string, env ...string) bool {
	t.Helper()
	if os.Getenv("GCFLOOR_CHILD") == name {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.v")
	cmd.Env = append(os.Environ(), "GCFLOOR_CHILD="+name)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return false
}

var sink [][]byte

// garbage allocates n bytes in small pieces nothing keeps.
func garbage(n int) {
	for i := 0; i < n/1024; i++ {
		sink = append(sink[:0], make([]byte, 1024))
	}
}

// collections is how many collections ran while n bytes of garbage were
// made.
func collections(n int) uint32 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	garbage(n)
	runtime.ReadMemStats(&after)
	return after.NumGC - before.NumGC
}

// No collection runs before the heap holds the floor; once the live heap
// is half the floor, the collector is paced by its own percent again.
func TestFloorDelaysCollectionsThenStepsAside(t *testing.T) {
	if !inChild(t, "TestFloorDelaysCollectionsThenStepsAside") {
		return
	}
	os.Unsetenv("GOGC")
	runtime.GC()
	end := Set(64 << 20)
	defer end()
	if n := collections(40 << 20); n != 0 {
		t.Fatalf("%d collections before the heap held the 64 MiB floor", n)
	}
	// A live heap of 40 MiB: twice that passes the floor.
	live := make([][]byte, 0, 40<<10)
	for range 40 << 10 {
		live = append(live, make([]byte, 1024))
	}
	if collections(320<<20) == 0 {
		t.Error("no collection ran after the floor")
	}
	runtime.KeepAlive(live)
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("the collector's percent is %d after the floor was passed, want 100", p)
	}
}

// With GOGC set, the user paces the collector: Set changes nothing.
func TestFloorLeavesGOGCAlone(t *testing.T) {
	if !inChild(t, "TestFloorLeavesGOGCAlone", "GOGC=50") {
		return
	}
	end := Set(64 << 20)
	defer end()
	if p := debug.SetGCPercent(50); p != 50 {
		t.Fatalf("percent %d with GOGC=50, want 50", p)
	}
	if collections(40<<20) == 0 {
		t.Error("no collection in 40 MiB of garbage with GOGC=50")
	}
}

// Ending the floor early gives the collector its percent back at once.
func TestFloorEnds(t *testing.T) {
	if !inChild(t, "TestFloorEnds") {
		return
	}
	os.Unsetenv("GOGC")
	end := Set(64 << 20)
	end()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("percent %d after the floor ended, want 100", p)
	}
	if collections(40<<20) == 0 {
		t.Error("no collection in 40 MiB of garbage after the floor ended")
	}
}
