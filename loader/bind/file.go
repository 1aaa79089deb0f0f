package bind

import (
	"sync"
	"sync/atomic"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// file is what the Binder knows of one file, by the path it was read at.
type file struct {
	id   int32
	path string
	// stamp is what stat said of it when the loader read it: kept
	// answers are keyed by it.
	stamp factcache.Stamp

	once sync.Once
	refs []uint32 // its strong references (symbol ids), in symbol table order
	err  error
	// provider holds, for each reference, the id of a file known to define
	// it (0: none known yet).
	provider []atomic.Int32
	// groups is provider summarized; stale once a provider changes.
	groups atomic.Pointer[groups]
	stale  atomic.Bool

	table    *elfscan.SymbolTable // closed: reopened for lookups
	tableErr error

	// known holds what lookups past the bloom filter found: whether this
	// file defines each symbol asked; nil until the first.
	known atomic.Pointer[knownSet]
}

// knownSet is split in shards by symbol: the files every scope holds
// (libc) are asked by every worker at once. Each shard is a knownTable:
// tens of thousands of answers are kept, and a map per shard cost 26
// bytes an answer and two hundred per map (most files are asked a few
// names), where a table of ids costs five.
type knownSet [knownShards]struct {
	mu sync.RWMutex
	t  knownTable
	_  [32]byte // one cache line each
}

const knownShards = 8

// knownTable is a set of answers, each a symbol's id shifted left once
// with whether the file defines it in the low bit, in open addressing;
// 0 is an empty slot (ids start at 1, and are at most maxSymbolID).
type knownTable struct {
	slots []uint32
	n     int
}

func (t *knownTable) slot(id uint32) int {
	return int((id * 0x9e3779b1) >> 8) // Fibonacci hashing spreads consecutive ids
}

// get reports the answer kept for id, if any.
func (t *knownTable) get(id uint32) (def, ok bool) {
	mask := len(t.slots) - 1
	if mask < 0 {
		return false, false
	}
	for i := t.slot(id) & mask; ; i = (i + 1) & mask {
		switch e := t.slots[i]; {
		case e == 0:
			return false, false
		case e>>1 == id:
			return e&1 == 1, true
		}
	}
}

// put keeps the answer def for id, growing the table to stay at most
// three quarters full.
func (t *knownTable) put(id uint32, def bool) {
	if (t.n+1)*4 > len(t.slots)*3 {
		old := t.slots
		t.slots, t.n = make([]uint32, max(8, 2*len(old))), 0
		for _, e := range old {
			if e != 0 {
				t.put(e>>1, e&1 == 1)
			}
		}
	}
	e := id << 1
	if def {
		e |= 1
	}
	mask := len(t.slots) - 1
	for i := t.slot(id) & mask; ; i = (i + 1) & mask {
		if t.slots[i] == 0 {
			t.slots[i] = e
			t.n++
			return
		}
		if t.slots[i]>>1 == id {
			t.slots[i] = e
			return
		}
	}
}

// groups are a file's references by the file known to define them: a
// scope that holds a provider binds its whole group.
type groups struct {
	providers []int32
	refs      [][]int32 // per provider, indexes into file.refs
	unbound   []int32   // references no file is known to define
}

// unboundIn lists the references of f not known to bind to a member of a
// scope, in order; all is set instead when none is known to bind yet.
func (f *file) unboundIn(inScope []bool) (list []int32, all bool) {
	g := f.groups.Load()
	if g == nil {
		return nil, true
	}
	out := g.unbound
	sorted := true
	for i, p := range g.providers {
		if int(p) < len(inScope) && inScope[p] {
			continue
		}
		if len(out) == len(g.unbound) {
			out = append([]int32(nil), g.unbound...)
		}
		out = append(out, g.refs[i]...)
		sorted = false
	}
	if !sorted {
		sortInt32(out)
	}
	return out, false
}

// bound records that reference idx binds to the file of id provider.
func (f *file) bound(idx int32, provider int32) {
	f.provider[idx].Store(provider)
	f.stale.Store(true)
}

// summarize rebuilds f's groups after a Check changed its providers. Every
// group is a piece of one array, so a rebuild costs a handful of
// allocations, not one per group and growth.
func (f *file) summarize() {
	if f.groups.Load() != nil && !f.stale.Load() {
		return
	}
	f.stale.Store(false)
	// Providers are file ids, few and small: indexed by id, each is given
	// its group's place in the order first met.
	most := int32(0)
	for i := range f.provider {
		most = max(most, f.provider[i].Load())
	}
	at := make([]int32, most+1)
	g := &groups{}
	var counts []int
	for i := range f.provider {
		p := f.provider[i].Load()
		if p == 0 || p > most {
			continue
		}
		if at[p] == 0 {
			g.providers = append(g.providers, p)
			counts = append(counts, 0)
			at[p] = int32(len(g.providers))
		}
		counts[at[p]-1]++
	}
	all := make([]int32, len(f.provider))
	g.refs = make([][]int32, len(g.providers))
	rest := all
	for k, n := range counts {
		g.refs[k], rest = rest[:0:n], rest[n:]
	}
	g.unbound = rest[:0:len(rest)]
	// Other checks may bind more references meanwhile: one whose provider
	// is new here is left unbound, to be looked up again.
	for i := range f.provider {
		p := f.provider[i].Load()
		if p == 0 || p > most || at[p] == 0 {
			g.unbound = append(g.unbound, int32(i))
		} else {
			k := at[p] - 1
			g.refs[k] = append(g.refs[k], int32(i))
		}
	}
	f.groups.Store(g)
}

// knows says whether f was found to define symbol s, if it was asked.
func (f *file) knows(s *symbol) (def, known bool) {
	k := f.known.Load()
	if k == nil {
		return false, false
	}
	sh := &k[s.hash.GNU%knownShards]
	sh.mu.RLock()
	def, known = sh.t.get(s.id)
	sh.mu.RUnlock()
	return def, known
}

// learn keeps whether f defines s.
func (f *file) learn(s *symbol, def bool) {
	k := f.known.Load()
	if k == nil {
		f.known.CompareAndSwap(nil, new(knownSet))
		k = f.known.Load()
	}
	sh := &k[s.hash.GNU%knownShards]
	sh.mu.Lock()
	sh.t.put(s.id, def)
	sh.mu.Unlock()
}

func sortInt32(s []int32) {
	// Insertion sort: the lists are short and nearly sorted.
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
