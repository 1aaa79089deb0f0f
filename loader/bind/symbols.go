package bind

import (
	"hash/maphash"
	"slices"
	"sync"

	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// symbol is a reference as the loader looks it up.
type symbol struct {
	name, version string
	file          string // the soname the version is needed from
	versionHash   uint32
	hidden        bool // the reference does not fall back to an unversioned definition
	hash          elfscan.Hash
	next          *symbol // another symbol of the same name
}

// symbols keeps every referenced symbol once: the objects of an
// environment reference the same few thousand names (malloc, the C++
// runtime, the CUDA runtime) many times over. It is split in shards by
// name, so that the workers of a scan interning their files' references
// seldom wait for each other.
type symbols struct {
	seed   maphash.Seed
	shards [64]symbolShard
}

type symbolShard struct {
	mu     sync.Mutex
	byName map[string]*symbol
}

func newSymbols() *symbols {
	t := &symbols{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].byName = map[string]*symbol{}
	}
	return t
}

// references reads f's strong references, each symbol kept once and each
// name read into a string once across the files.
func (t *symbols) references(f *elfscan.File) ([]*symbol, error) {
	var out []*symbol
	err := f.EachReference(t.name, func(r *elfscan.Reference) {
		if !r.Weak { // a weak reference that stays unbound is no error
			out = append(out, t.one(r))
		}
	})
	if cap(out)-len(out) > 64 {
		out = slices.Clone(out) // kept for the whole scan: not the room appending left
	}
	return out, err
}

// name is the kept string of a name already interned, else a copy of b.
func (t *symbols) name(b []byte) string {
	sh := &t.shards[maphash.Bytes(t.seed, b)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s, ok := sh.byName[string(b)]; ok {
		return s.name
	}
	return string(b)
}

func (t *symbols) one(r *elfscan.Reference) *symbol {
	sh := &t.shards[maphash.String(t.seed, r.Name)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	first := sh.byName[r.Name]
	for s := first; s != nil; s = s.next {
		if s.version == r.Version && s.file == r.File && s.hidden == r.VersionHidden {
			return s
		}
	}
	s := &symbol{name: r.Name, version: r.Version, file: r.File, versionHash: r.VersionHash, hidden: r.VersionHidden, next: first}
	if first != nil {
		s.hash = first.hash
	} else {
		s.hash = elfscan.HashOf(r.Name)
	}
	sh.byName[r.Name] = s
	return s
}
