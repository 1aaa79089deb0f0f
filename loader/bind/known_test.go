package bind

import (
	"math/rand/v2"
	"testing"
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
	tab.put(maxKnownID, true)
	if def, ok := tab.get(maxKnownID); !ok || !def {
		t.Errorf("the largest id: get = %v, %v", def, ok)
	}
}

// TestLearnSkipsIDsPastTheLimit: a symbol whose id does not fit is never
// answered from what a file learned, so that it is looked up again
// instead of taking another symbol's answer.
func TestLearnSkipsIDsPastTheLimit(t *testing.T) {
	f := &file{}
	small, large := &symbol{id: 5}, &symbol{id: maxKnownID + 1}
	f.learn(small, true)
	f.learn(large, true)
	if def, known := f.knows(small); !known || !def {
		t.Errorf("id 5: knows = %v, %v", def, known)
	}
	if _, known := f.knows(large); known {
		t.Errorf("id past the limit is answered")
	}
	if _, known := f.knows(&symbol{id: (maxKnownID + 1) & maxKnownID}); known {
		t.Errorf("an id never learned is answered")
	}
}
