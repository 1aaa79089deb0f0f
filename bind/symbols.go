package bind

import (
	"sync"

	"github.com/cudadeps/cudadeps/elfscan"
)

// symbol is a reference as the loader looks it up.
type symbol struct {
	name, version string
	file          string // the soname the version is needed from
	versionHash   uint32
	hidden        bool // the reference does not fall back to an unversioned definition
	hash          elfscan.Hash
}

type symbolKey struct {
	name, version, file string
	hidden              bool
}

// symbols keeps every referenced symbol once: the objects of an
// environment reference the same few thousand names (malloc, the C++
// runtime, the CUDA runtime) many times over.
type symbols struct {
	mu  sync.Mutex
	ids map[symbolKey]*symbol
}

// intern returns refs' strong references, each symbol kept once.
func (t *symbols) intern(refs []elfscan.Reference) []*symbol {
	out := make([]*symbol, 0, len(refs))
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range refs {
		r := &refs[i]
		if r.Weak {
			continue // a weak reference that stays unbound is no error
		}
		k := symbolKey{r.Name, r.Version, r.File, r.VersionHidden}
		s, ok := t.ids[k]
		if !ok {
			s = &symbol{name: r.Name, version: r.Version, file: r.File, versionHash: r.VersionHash, hidden: r.VersionHidden, hash: elfscan.HashOf(r.Name)}
			t.ids[k] = s
		}
		out = append(out, s)
	}
	return out
}
