package scan

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// handOut starts workers that take q's work until none is left, as a
// scan's do: a fresh root is put back as an import that waits (then
// waited is called), an import is handed to imported. Both are called
// under one lock. The returned function waits for the workers and gives
// how often each root was handed out fresh and to import.
func handOut(t *testing.T, q *rootQueue, workers int, waited func(), imported func(*rootJob)) func() (fresh, imports map[string]int) {
	var mu sync.Mutex
	fresh, imports := map[string]int{}, map[string]int{}
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
				if j.alone == nil {
					q.wait(&rootJob{path: j.path, alone: &Root{Path: j.path}})
					mu.Lock()
					fresh[j.path]++
					waited()
					mu.Unlock()
					continue
				}
				mu.Lock()
				imports[j.path]++
				imported(j)
				mu.Unlock()
			}
		}()
	}
	return func() (map[string]int, map[string]int) {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the workers did not finish")
		}
		return fresh, imports
	}
}

// checkEachOnce fails t unless each of roots was handed out once fresh and
// once to import.
func checkEachOnce(t *testing.T, roots int, fresh, imports map[string]int) {
	t.Helper()
	if len(fresh) != roots || len(imports) != roots {
		t.Fatalf("%d roots handed out fresh, %d imports, want %d each", len(fresh), len(imports), roots)
	}
	for p, n := range fresh {
		if n != 1 || imports[p] != 1 {
			t.Fatalf("%s handed out %d times fresh, %d times to import", p, n, imports[p])
		}
	}
}

// Every root added is handed out once as fresh, every import put back is
// handed out once, none is lost when the walk ends while imports wait, and
// an import is taken before the walk ends only once it is ready.
func TestRootQueueHandsOutEachOnce(t *testing.T) {
	var readyAfter atomic.Bool // imports become ready once this is set
	q := newRootQueue(func(string) bool { return readyAfter.Load() }, 1000)
	const roots, workers = 500, 8
	earlyNotReady := 0
	wait := handOut(t, q, workers, func() {}, func(*rootJob) {
		q.mu.Lock()
		closed := q.closed
		q.mu.Unlock()
		// Both only ever turn true: false now was false when next handed
		// it out.
		if !readyAfter.Load() && !closed {
			earlyNotReady++
		}
	})
	for i := range roots {
		q.add(fmt.Sprintf("/r/%03d.so", i))
		q.add(fmt.Sprintf("/r/%03d.so", i)) // found twice: handed out once
		if i == roots/2 {
			time.Sleep(time.Millisecond)
			readyAfter.Store(true)
		}
	}
	q.close()
	fresh, imports := wait()
	checkEachOnce(t, roots, fresh, imports)
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
	mostSeen := 0
	wait := handOut(t, q, workers, func() {
		q.mu.Lock()
		mostSeen = max(mostSeen, len(q.waiting))
		q.mu.Unlock()
	}, func(*rootJob) {})
	for i := range roots {
		q.add(fmt.Sprintf("/r/%03d.so", i))
	}
	q.close()
	fresh, imports := wait()
	checkEachOnce(t, roots, fresh, imports)
	// A worker puts its import back after next looked: at most one more
	// each than most.
	if mostSeen > most+workers {
		t.Errorf("%d imports waited at once, more than %d and a worker's each", mostSeen, most)
	}
}
