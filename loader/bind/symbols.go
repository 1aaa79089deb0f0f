package bind

import (
	"fmt"
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
	// id numbers the symbols of a Binder from 1, in the order first met:
	// what files' references and known answers hold.
	id   uint32
	next uint32 // the id of another symbol of the same name; 0: none
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
// seldom wait for each other. Symbols are kept in chunks by id: a file's
// references are ids, four bytes each and no pointer for the collector to
// follow (the 860 files of the GPU environment hold 173,000 references).
type symbols struct {
	seed   maphash.Seed
	shards [64]symbolShard
	last   atomic.Uint64 // the ids given
	grow   sync.Mutex    // held to add chunks
	chunks atomic.Pointer[[]*symbolChunk]
}

// symbolChunk holds the symbols of consecutive ids: one allocation for
// many, none of them freed before the scan ends.
type symbolChunk [chunkSymbols]symbol

const chunkSymbols = 1024

// maxSymbolID bounds the ids: an id must fit beside a known answer's bit.
const maxSymbolID = 1<<31 - 1

type symbolShard struct {
	mu     sync.Mutex
	byName map[string]uint32 // the id of the last symbol made of the name
	needs  map[needKey]*need
	text   []byte // the bytes of the names kept (keep)
}

func newSymbols() *symbols {
	t := &symbols{seed: maphash.MakeSeed()}
	t.chunks.Store(new([]*symbolChunk))
	for i := range t.shards {
		t.shards[i].byName = map[string]uint32{}
		t.shards[i].needs = map[needKey]*need{}
	}
	return t
}

// at is the symbol of id. Whoever holds an id got it from one, whose
// chunk was stored before the id was handed out.
func (t *symbols) at(id uint32) *symbol {
	return &(*t.chunks.Load())[id/chunkSymbols][id%chunkSymbols]
}

// place returns where the symbol of a new id goes, adding its chunk when
// it is the first of one.
func (t *symbols) place(id uint32) *symbol {
	cs := *t.chunks.Load()
	if int(id/chunkSymbols) >= len(cs) {
		t.grow.Lock()
		cs = *t.chunks.Load()
		for int(id/chunkSymbols) >= len(cs) {
			cs = append(slices.Clip(cs), new(symbolChunk))
		}
		t.chunks.Store(&cs)
		t.grow.Unlock()
	}
	return &cs[id/chunkSymbols][id%chunkSymbols]
}

// errTooManySymbols: more distinct references than ids.
var errTooManySymbols = fmt.Errorf("more than %d distinct symbol references", maxSymbolID)

// references reads f's strong references as symbol ids, each symbol kept
// once and each name read into a string once across the files. The list
// is gathered in buf (grown as needed, and returned for the next file)
// and kept as a copy of its size: appending to a fresh list for each file
// allocated three times what is kept.
func (t *symbols) references(f *elfscan.File, buf []uint32) (refs, grown []uint32, err error) {
	buf = buf[:0]
	full := false
	err = f.EachReference(t.name, func(r *elfscan.Reference) {
		if r.Weak || full { // a weak reference that stays unbound is no error
			return
		}
		id, ok := t.one(r)
		if !ok {
			full = true
			return
		}
		buf = append(buf, id)
	})
	if err == nil && full {
		err = errTooManySymbols
	}
	return slices.Clone(buf), buf, err
}

// name is the kept string of a name already interned, else a copy of b
// kept in the shard's text.
func (t *symbols) name(b []byte) string {
	sh := &t.shards[maphash.Bytes(t.seed, b)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if id, ok := sh.byName[string(b)]; ok {
		return t.at(id).name
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

// one is the id of the symbol of r, made the first time it is met; false
// when every id is taken.
func (t *symbols) one(r *elfscan.Reference) (uint32, bool) {
	sh := &t.shards[maphash.String(t.seed, r.Name)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	first := sh.byName[r.Name]
	for id := first; id != 0; {
		s := t.at(id)
		if s.is(r) {
			return id, true
		}
		id = s.next
	}
	n := t.last.Add(1)
	if n > maxSymbolID {
		return 0, false
	}
	id := uint32(n)
	s := t.place(id)
	*s = symbol{name: r.Name, id: id, next: first}
	if r.Version != "" || r.File != "" || r.VersionHidden {
		k := needKey{r.Version, r.File, r.VersionHidden}
		n := sh.needs[k]
		if n == nil {
			n = &need{version: r.Version, file: r.File, hash: r.VersionHash, hidden: r.VersionHidden}
			sh.needs[k] = n
		}
		s.need = n
	}
	if first != 0 {
		s.hash = t.at(first).hash
	} else {
		s.hash = elfscan.HashOf(r.Name)
	}
	sh.byName[r.Name] = id
	return id, true
}
