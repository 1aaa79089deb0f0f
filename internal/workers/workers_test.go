package workers

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEachCallsEveryIndexOnce: each index is handed out exactly once, for
// any count and limit, and no more than limit calls run at once.
func TestEachCallsEveryIndexOnce(t *testing.T) {
	for _, tc := range []struct{ n, limit int }{{0, 4}, {1, 4}, {7, 1}, {7, 3}, {100, 8}, {5, 50}, {64, 0}, {64, -1}} {
		calls := make([]atomic.Int32, tc.n)
		var running, most atomic.Int32
		Each(tc.n, tc.limit, func(i int) {
			now := running.Add(1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			time.Sleep(100 * time.Microsecond)
			calls[i].Add(1)
			running.Add(-1)
		})
		for i := range calls {
			if c := calls[i].Load(); c != 1 {
				t.Errorf("n=%d limit=%d: index %d called %d times", tc.n, tc.limit, i, c)
			}
		}
		limit := tc.limit
		if limit <= 0 {
			limit = runtime.GOMAXPROCS(0)
		}
		if m := int(most.Load()); m > limit || m > max(tc.n, 1) {
			t.Errorf("n=%d limit=%d: %d calls at once", tc.n, tc.limit, m)
		}
	}
}

// TestEachRunsAtOnce: with a limit of several, calls overlap; a call that
// waits for another proves two ran at the same time.
func TestEachRunsAtOnce(t *testing.T) {
	var first sync.WaitGroup
	first.Add(2)
	done := make(chan struct{})
	go func() {
		Each(2, 2, func(int) {
			first.Done()
			first.Wait() // returns only once both calls have started
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("two calls with a limit of two did not run at once")
	}
}

// TestEachInOrderOnOne: one goroutine calls in order, on the caller's
// goroutine.
func TestEachInOrderOnOne(t *testing.T) {
	var got []int
	Each(5, 1, func(i int) { got = append(got, i) }) // no lock: one goroutine
	for i, v := range got {
		if v != i {
			t.Fatalf("order %v", got)
		}
	}
	if len(got) != 5 {
		t.Fatalf("calls %v", got)
	}
}
