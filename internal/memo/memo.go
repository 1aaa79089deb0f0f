// Package memo computes a value once per key for callers that ask at the
// same time: the others wait for the first instead of computing it again.
package memo

import (
	"sync"
	"sync/atomic"
)

// Map holds one value per key. The zero Map is ready to use; it must not
// be copied after first use. Asking for a key already computed takes no
// lock: many workers ask for the same keys all the time.
type Map[K comparable, V any] struct {
	entries sync.Map // K → *entry[V]
}

type entry[V any] struct {
	once sync.Once
	done atomic.Bool // v is computed
	v    V
}

// Get returns the value for k, computing it with compute the first time k
// is asked for; callers asking for k meanwhile wait for that computation.
func (m *Map[K, V]) Get(k K, compute func() V) V {
	got, ok := m.entries.Load(k)
	if !ok {
		got, _ = m.entries.LoadOrStore(k, &entry[V]{})
	}
	e := got.(*entry[V])
	if e.done.Load() {
		return e.v
	}
	e.once.Do(func() {
		e.v = compute()
		e.done.Store(true)
	})
	return e.v
}

// Ready returns the value for k and true when it has been computed, never
// waiting: a caller with other work to do asks Get later, when it would
// not wait (or when nothing else is left).
func (m *Map[K, V]) Ready(k K) (V, bool) {
	got, ok := m.entries.Load(k)
	if !ok || !got.(*entry[V]).done.Load() {
		var zero V
		return zero, false
	}
	return got.(*entry[V]).v, true
}

// Keys calls fn with each key asked for (computed or being computed),
// in no order, until fn returns false.
func (m *Map[K, V]) Keys(fn func(K) bool) {
	m.entries.Range(func(k, _ any) bool { return fn(k.(K)) })
}
