// Package freelist keeps a bounded number of values (buffers) for reuse, across garbage collections.
//
// Unlike a sync.Pool, which every collection empties, what a List keeps
// survives them: a scan collects every few milliseconds while it starts,
// and a pool emptied by each made every worker allocate its buffers again.
// What is kept is live heap for as long as the List is, so the bound
// matters.
package freelist

import "sync"

// List keeps up to Max values; the zero List keeps none. It is safe for
// concurrent use.
type List[T any] struct {
	Max  int
	mu   sync.Mutex
	free []T
}

// Get returns a value kept, the last one put, and true; the zero value and
// false when none is kept.
func (l *List[T]) Get() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.free)
	if n == 0 {
		var zero T
		return zero, false
	}
	v := l.free[n-1]
	var zero T
	l.free[n-1] = zero // holds nothing alive
	l.free = l.free[:n-1]
	return v, true
}

// Put keeps v when fewer than Max values are kept, and drops it
// otherwise.
func (l *List[T]) Put(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.free) < l.Max {
		l.free = append(l.free, v)
	}
}
