package bind

import (
	"sync"
	"sync/atomic"

	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// file is what the Binder knows of one file, by the path it was read at.
type file struct {
	id   int32
	path string

	once sync.Once
	refs []*symbol // its strong references, in symbol table order
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
// (libc) are asked by every worker at once. Maps, not a sync.Map: tens of
// thousands of answers are kept, at a fifth of the memory.
type knownSet [knownShards]struct {
	mu sync.RWMutex
	m  map[*symbol]bool
	_  [32]byte // one cache line each
}

const knownShards = 8

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

// knows says whether f was found to define symbol id, if it was asked.
func (f *file) knows(s *symbol) (def, known bool) {
	k := f.known.Load()
	if k == nil {
		return false, false
	}
	sh := &k[s.hash.GNU%knownShards]
	sh.mu.RLock()
	def, known = sh.m[s]
	sh.mu.RUnlock()
	return def, known
}

func (f *file) learn(s *symbol, def bool) {
	k := f.known.Load()
	if k == nil {
		f.known.CompareAndSwap(nil, new(knownSet))
		k = f.known.Load()
	}
	sh := &k[s.hash.GNU%knownShards]
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = map[*symbol]bool{}
	}
	sh.m[s] = def
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
