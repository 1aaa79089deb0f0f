package memo

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Callers asking for one key at the same time share one computation; other
// keys are computed on their own.
func TestGetComputesOncePerKey(t *testing.T) {
	var m Map[string, int]
	var calls atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]int, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = m.Get("a", func() int {
				calls.Add(1)
				<-release
				return 7
			})
		}()
	}
	close(release)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("computed %d times for one key", n)
	}
	for i, v := range got {
		if v != 7 {
			t.Errorf("caller %d got %d", i, v)
		}
	}
	if v := m.Get("b", func() int { return 9 }); v != 9 {
		t.Errorf("another key got %d", v)
	}
	if v := m.Get("a", func() int { return 0 }); v != 7 {
		t.Errorf("a kept value was computed again: %d", v)
	}
}

// Ready says nothing of a key not asked for or still being computed, and
// gives the value, without waiting, once it is.
func TestReadyNeverWaits(t *testing.T) {
	var m Map[string, int]
	if _, ok := m.Ready("a"); ok {
		t.Fatal("a key never asked for is ready")
	}
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		m.Get("a", func() int {
			close(started)
			<-release
			return 7
		})
	}()
	<-started
	if _, ok := m.Ready("a"); ok {
		t.Fatal("a key being computed is ready")
	}
	close(release)
	<-done
	if v, ok := m.Ready("a"); !ok || v != 7 {
		t.Fatalf("Ready after Get = %d, %v; want 7, true", v, ok)
	}
}

// Keys names every key asked for, once.
func TestKeysNamesEachKeyAsked(t *testing.T) {
	var m Map[string, int]
	for _, k := range []string{"a", "b", "a", "c"} {
		m.Get(k, func() int { return len(k) })
	}
	seen := map[string]int{}
	m.Keys(func(k string) bool {
		seen[k]++
		return true
	})
	if len(seen) != 3 || seen["a"] != 1 || seen["b"] != 1 || seen["c"] != 1 {
		t.Fatalf("Keys named %v", seen)
	}
}
