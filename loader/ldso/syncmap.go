package ldso

import "sync"

// syncMap is a sync.Map of one key and value type: the loader's caches are
// read by every worker of a scan at once and written once per key, where
// a mutex would make the workers queue for each other.
type syncMap[K comparable, V any] struct{ m sync.Map }

func (s *syncMap[K, V]) load(k K) (V, bool) {
	v, ok := s.m.Load(k)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (s *syncMap[K, V]) store(k K, v V) { s.m.Store(k, v) }

// loadOrStore returns the value of k, storing v first when there is none.
func (s *syncMap[K, V]) loadOrStore(k K, v V) (V, bool) {
	got, loaded := s.m.LoadOrStore(k, v)
	return got.(V), loaded
}
