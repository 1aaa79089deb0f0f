// Package workers calls a function for each index of a list from a bounded number of goroutines at once.
package workers

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Each calls fn(i) for every i in [0, n), from at most limit goroutines at
// once (GOMAXPROCS when limit <= 0), and returns when every call has
// returned. With one goroutine the calls run in order on the caller's.
// Each call takes the next index not yet taken, so a slow call holds up no
// other. fn returns at once for work that no longer matters (a context
// done, an answer already found): every index is still handed out.
func Each(n, limit int, fn func(i int)) {
	if limit <= 0 {
		limit = runtime.GOMAXPROCS(0)
	}
	limit = min(limit, n)
	if limit <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
