// Package gcfloor keeps the garbage collector from running before the heap
// reaches a floor, then leaves the pace to GOGC.
//
// The collector's first goal is 4 MB, sized for small programs. A scan
// allocates its first tens of megabytes in its first milliseconds and
// collects a dozen times while its heap doubles from 4 MB, each collection
// stopping every processor and making the allocating workers assist: on
// the GPU machine (16 processors) the loader-only scan took 48 ms, 38 ms
// with a 16 MiB floor and 26 ms with no collection at all. Once the live
// heap is half the floor the collector paces by GOGC alone: the peak heap
// is the larger of the floor and twice the live heap at the end, which
// the floor leaves as it was for a program whose live heap ends above
// half of it (docs/performance.md).
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Set makes the heap grow to floor bytes before the first collection and
// keeps every goal at least floor until twice the live heap passes it;
// from then on the goal is the one GOGC sets. It does nothing when the
// GOGC environment variable is set: the user paces the collector. The
// returned function ends the floor at once.
func Set(floor uint64) (end func()) {
	if _, set := os.LookupEnv("GOGC"); set || floor == 0 {
		return func() {}
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base <= 0 {
		return func() {}
	}
	f := &pacer{floor: floor, base: base}
	f.apply(0)
	f.arm()
	return f.end
}

// pacer re-sets the collector's percent after every collection, seen by a
// finalizer on an object made for the purpose, until the floor is passed.
type pacer struct {
	floor uint64
	base  int
	mu    sync.Mutex
	ended bool
}

// sentinel is the object whose finalizer runs after each collection; the
// pointer keeps it out of the tiny allocator, whose blocks finalizers
// may never see freed.
type sentinel struct{ _ *int }

func (f *pacer) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.ended && f.apply(liveHeap()) {
			f.arm()
		}
	})
}

// apply sets the percent that makes the next goal the floor for a live
// heap of live bytes; it reports false, the base percent set again, once
// the base's own goal reaches the floor.
func (f *pacer) apply(live uint64) bool {
	if live == 0 {
		// Before the first collection the goal is 4 MB times percent/100.
		debug.SetGCPercent(max(f.base, int(f.floor*100/(4<<20))))
		return true
	}
	if live*uint64(100+f.base)/100 >= f.floor {
		debug.SetGCPercent(f.base)
		return false
	}
	debug.SetGCPercent(int(f.floor*100/live) - 100)
	return true
}

func (f *pacer) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ended {
		f.ended = true
		debug.SetGCPercent(f.base)
	}
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
