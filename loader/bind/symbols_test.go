package bind

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// TestKnownTableAgreesWithMap: a knownTable answers as a map of the same
// answers does, through growth, answers changed, and ids met in any order.
func TestKnownTableAgreesWithMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 100, 5000} {
		var tab knownTable
		want := map[uint32]bool{}
		for range n {
			id := uint32(r.IntN(4*n+1)) + 1
			def := r.IntN(2) == 0
			tab.put(id, def)
			want[id] = def
		}
		if tab.n != len(want) {
			t.Errorf("n=%d: %d answers kept, want %d", n, tab.n, len(want))
		}
		for id := uint32(1); id <= uint32(4*n+2); id++ {
			def, ok := tab.get(id)
			wdef, wok := want[id]
			if ok != wok || def != wdef {
				t.Fatalf("n=%d: get(%d) = %v, %v; want %v, %v", n, id, def, ok, wdef, wok)
			}
		}
		if len(tab.slots) > 0 && tab.n*4 > len(tab.slots)*3 {
			t.Errorf("n=%d: %d answers in %d slots", n, tab.n, len(tab.slots))
		}
	}
	var tab knownTable
	tab.put(maxSymbolID, true)
	if def, ok := tab.get(maxSymbolID); !ok || !def {
		t.Errorf("the largest id: get = %v, %v", def, ok)
	}
}

// TestSymbolsAreKeptOncePerReference: workers interning the same
// references at once get one id per distinct reference (name, version,
// file, hiddenness), ids from 1 without a gap, and each id's symbol is the
// reference it was made for; once every id is taken, a new reference is
// refused and a known one is still answered.
func TestSymbolsAreKeptOncePerReference(t *testing.T) {
	syms := newSymbols()
	var refs []elfscan.Reference
	for i := range 3000 {
		r := elfscan.Reference{Name: fmt.Sprintf("sym%d", i%1500)}
		if i%3 == 0 {
			r.Version, r.File = "V"+strconv.Itoa(i%2), "libx.so.1"
		}
		refs = append(refs, r)
	}
	ids := make([][]uint32, 8)
	var wg sync.WaitGroup
	for w := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range refs {
				r := refs[(k*7+w*389)%len(refs)]
				id, ok := syms.one(&r)
				if !ok {
					t.Errorf("reference %v refused", r)
					return
				}
				ids[w] = append(ids[w], id)
			}
		}()
	}
	wg.Wait()
	distinct := map[elfscan.Reference]uint32{}
	for _, r := range refs {
		distinct[r] = 0
	}
	byID := map[uint32]elfscan.Reference{}
	for w := range ids {
		for k, id := range ids[w] {
			r := refs[(k*7+w*389)%len(refs)]
			if got, ok := byID[id]; ok && got != r {
				t.Fatalf("id %d is %v and %v", id, got, r)
			}
			byID[id] = r
			if s := syms.at(id); !s.is(&r) || s.name != r.Name || s.id != id {
				t.Fatalf("at(%d) = %+v, want %v", id, s, r)
			}
		}
	}
	if len(byID) != len(distinct) {
		t.Errorf("%d ids for %d distinct references", len(byID), len(distinct))
	}
	for id := uint32(1); id <= uint32(len(distinct)); id++ {
		if _, ok := byID[id]; !ok {
			t.Errorf("id %d not given", id)
		}
	}
	syms.last.Store(maxSymbolID)
	if _, ok := syms.one(&elfscan.Reference{Name: "new"}); ok {
		t.Errorf("a new reference got an id past the last")
	}
	if id, ok := syms.one(&refs[0]); !ok || byID[id] != refs[0] {
		t.Errorf("a known reference after the ids ran out: %d, %v", id, ok)
	}
}
