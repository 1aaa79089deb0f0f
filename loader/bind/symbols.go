package bind

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// symbol is a reference as the loader looks it up. Tens of thousands are
// kept for a whole scan, so what references share (their version need)
// is kept once, apart.
type symbol struct {
	name string
	need *need // nil: an unversioned reference
	hash elfscan.Hash
	next *symbol // another symbol of the same name
	// id numbers the symbols of a Binder from 1, in the order first met:
	// what a file's known answers are kept by.
	id uint32
}

// need is the version a reference requires and whom from.
type need struct {
	version string
	file    string // the soname the version is needed from
	hash    uint32 // of version
	hidden  bool   // the reference does not fall back to an unversioned definition
}

// needKey identifies a need among a shard's.
type needKey struct {
	version, file string
	hidden        bool
}

func (s *symbol) version() string {
	if s.need == nil {
		return ""
	}
	return s.need.version
}

// is reports whether s is the symbol of reference r.
func (s *symbol) is(r *elfscan.Reference) bool {
	if s.need == nil {
		return r.Version == "" && r.File == "" && !r.VersionHidden
	}
	return s.need.version == r.Version && s.need.file == r.File && s.need.hidden == r.VersionHidden
}

func (s *symbol) file() string {
	if s.need == nil {
		return ""
	}
	return s.need.file
}

// symbols keeps every referenced symbol once: the objects of an
// environment reference the same few thousand names (malloc, the C++
// runtime, the CUDA runtime) many times over. It is split in shards by
// name, so that the workers of a scan interning their files' references
// seldom wait for each other.
type symbols struct {
	seed   maphash.Seed
	shards [64]symbolShard
	last   atomic.Uint64 // the symbols made
}

type symbolShard struct {
	mu     sync.Mutex
	byName map[string]*symbol
	needs  map[needKey]*need
	// slab is where new symbols are taken from: one allocation for many,
	// none of them freed before the scan ends.
	slab []symbol
	text []byte // the bytes of the names kept (keep)
}

// slabSize is how many symbols one allocation of a shard holds.
const slabSize = 128

func newSymbols() *symbols {
	t := &symbols{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].byName = map[string]*symbol{}
		t.shards[i].needs = map[needKey]*need{}
	}
	return t
}

// references reads f's strong references, each symbol kept once and each
// name read into a string once across the files. The list is gathered in
// buf (grown as needed, and returned for the next file) and kept as a copy
// of its size: appending to a fresh list for each file allocated three
// times what is kept.
func (t *symbols) references(f *elfscan.File, buf []*symbol) (refs, grown []*symbol, err error) {
	buf = buf[:0]
	err = f.EachReference(t.name, func(r *elfscan.Reference) {
		if !r.Weak { // a weak reference that stays unbound is no error
			buf = append(buf, t.one(r))
		}
	})
	return slices.Clone(buf), buf, err
}

// name is the kept string of a name already interned, else a copy of b
// kept in the shard's text.
func (t *symbols) name(b []byte) string {
	sh := &t.shards[maphash.Bytes(t.seed, b)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s, ok := sh.byName[string(b)]; ok {
		return s.name
	}
	return sh.keep(b)
}

// keep copies b into the shard's text and returns it as a string. The
// names of a scan are tens of thousands of small strings, all kept to its
// end: made one at a time, they were 7% of the objects a default scan of
// /usr/lib allocated, each for the collector to mark. The text is only
// ever appended to, so what a string points at never changes.
func (sh *symbolShard) keep(b []byte) string {
	if len(b) == 0 || len(b) > maxKeptName {
		return string(b)
	}
	if cap(sh.text)-len(sh.text) < len(b) {
		sh.text = make([]byte, 0, textChunk)
	}
	start := len(sh.text)
	sh.text = append(sh.text, b...)
	return unsafe.String(&sh.text[start], len(b))
}

// A shard's text grows by textChunk bytes; longer names (C++ templates)
// are strings of their own.
const textChunk, maxKeptName = 4 << 10, 256

func (t *symbols) one(r *elfscan.Reference) *symbol {
	sh := &t.shards[maphash.String(t.seed, r.Name)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	first := sh.byName[r.Name]
	for s := first; s != nil; s = s.next {
		if s.is(r) {
			return s
		}
	}
	if len(sh.slab) == 0 {
		sh.slab = make([]symbol, slabSize)
	}
	s := &sh.slab[0]
	sh.slab = sh.slab[1:]
	*s = symbol{name: r.Name, next: first, id: uint32(min(t.last.Add(1), maxKnownID+1))}
	if r.Version != "" || r.File != "" || r.VersionHidden {
		k := needKey{r.Version, r.File, r.VersionHidden}
		n := sh.needs[k]
		if n == nil {
			n = &need{version: r.Version, file: r.File, hash: r.VersionHash, hidden: r.VersionHidden}
			sh.needs[k] = n
		}
		s.need = n
	}
	if first != nil {
		s.hash = first.hash
	} else {
		s.hash = elfscan.HashOf(r.Name)
	}
	sh.byName[r.Name] = s
	return s
}
