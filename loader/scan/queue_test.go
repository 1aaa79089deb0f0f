package scan

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every root added is handed out once as fresh, every import put back is
// handed out once, none is lost when the walk ends while imports wait, and
// an import is taken before the walk ends only once it is ready.
func TestRootQueueHandsOutEachOnce(t *testing.T) {
	var readyAfter atomic.Bool // imports become ready once this is set
	q := newRootQueue(func(string) bool { return readyAfter.Load() }, 1000)
	const roots, workers = 500, 8
	var mu sync.Mutex
	fresh, imported := map[string]int{}, map[string]int{}
	earlyNotReady := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j, ok := q.next()
				if !ok {
					return
				}
				mu.Lock()
				if j.alone == nil {
					fresh[j.path]++
					mu.Unlock()
					q.wait(&rootJob{path: j.path, alone: &Root{Path: j.path}})
					continue
				}
				imported[j.path]++
				q.mu.Lock()
				closed := q.closed
				q.mu.Unlock()
				// Both only ever turn true: false now was false when
				// next handed it out.
				if !readyAfter.Load() && !closed {
					earlyNotReady++
				}
				mu.Unlock()
			}
		}()
	}
	for i := range roots {
		q.add(fmt.Sprintf("/r/%03d.so", i))
		q.add(fmt.Sprintf("/r/%03d.so", i)) // found twice: handed out once
		if i == roots/2 {
			time.Sleep(time.Millisecond)
			readyAfter.Store(true)
		}
	}
	q.close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the workers did not finish")
	}
	if len(fresh) != roots || len(imported) != roots {
		t.Fatalf("%d roots handed out fresh, %d imports, want %d each", len(fresh), len(imported), roots)
	}
	for p, n := range fresh {
		if n != 1 || imported[p] != 1 {
			t.Fatalf("%s handed out %d times fresh, %d times to import", p, n, imported[p])
		}
	}
	if earlyNotReady > 0 {
		t.Fatalf("%d imports taken before they were ready and before the walk ended", earlyNotReady)
	}
}

// No more than most imports wait at once: past that a worker is handed
// the oldest, ready or not, and every root is still handed out once each
// way.
func TestRootQueueBoundsWaitingImports(t *testing.T) {
	const roots, workers, most = 300, 6, 10
	q := newRootQueue(func(string) bool { return false }, most)
	var mu sync.Mutex
	fresh, imported := map[string]int{}, map[string]int{}
	mostSeen := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j, ok := q.next()
				if !ok {
					return
				}
				mu.Lock()
				if j.alone == nil {
					fresh[j.path]++
					mu.Unlock()
					q.wait(&rootJob{path: j.path, alone: &Root{Path: j.path}})
					q.mu.Lock()
					n := len(q.waiting)
					q.mu.Unlock()
					mu.Lock()
					mostSeen = max(mostSeen, n)
					mu.Unlock()
					continue
				}
				imported[j.path]++
				mu.Unlock()
			}
		}()
	}
	for i := range roots {
		q.add(fmt.Sprintf("/r/%03d.so", i))
	}
	q.close()
	wg.Wait()
	if len(fresh) != roots || len(imported) != roots {
		t.Fatalf("%d roots handed out fresh, %d imports, want %d each", len(fresh), len(imported), roots)
	}
	for p, n := range fresh {
		if n != 1 || imported[p] != 1 {
			t.Fatalf("%s handed out %d times fresh, %d times to import", p, n, imported[p])
		}
	}
	// A worker puts its import back after next looked: at most one more
	// each than most.
	if mostSeen > most+workers {
		t.Errorf("%d imports waited at once, more than %d and a worker's each", mostSeen, most)
	}
}
