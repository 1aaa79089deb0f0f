package freelist

import (
	"sync"
	"testing"
)

// A List gives back what was put, last first, keeps no more than Max, and
// survives workers putting and getting at once.
func TestListKeepsUpToMax(t *testing.T) {
	var none List[int]
	none.Put(1)
	if v, ok := none.Get(); ok {
		t.Errorf("the zero List kept %d", v)
	}
	l := List[int]{Max: 2}
	for _, v := range []int{1, 2, 3} {
		l.Put(v)
	}
	for _, want := range []int{2, 1} {
		if v, ok := l.Get(); !ok || v != want {
			t.Fatalf("Get = %d, %v; want %d", v, ok, want)
		}
	}
	if v, ok := l.Get(); ok {
		t.Errorf("a third value kept: %d", v)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				l.Put(w*1000 + i)
				l.Get()
			}
		}()
	}
	wg.Wait()
	if n := len(l.free); n > l.Max {
		t.Errorf("%d values kept, more than %d", n, l.Max)
	}
}
