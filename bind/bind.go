// Package bind finds the symbol references of loaded objects that glibc's ld.so would fail to bind when it binds them all at load time (RTLD_NOW, LD_BIND_NOW).
//
// For each object checked, every undefined dynamic symbol of binding
// STB_GLOBAL or STB_WEAK is looked up in the object's scope as ld.so's
// do_lookup_x does: object after object, through each one's DT_GNU_HASH (or
// DT_HASH) table, taking the first symbol of the chain that passes the
// loader's checks (a value, a code or data type, a matching version), then
// refusing it when it is local or hidden. A versioned reference binds only
// to its version (or to an unversioned definition of an object that has no
// version for it); an unversioned one binds to the oldest version, to the
// only default version, or to an object without versions. A weak
// reference that stays unbound is no error.
//
// Whether a reference binds does not depend on the order of the scope, only
// on its members: a Binder remembers, for every reference of every file,
// an object known to define it, so that the many roots of a scan sharing
// the same libraries cost one lookup per reference, not one per root.
package bind

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cudadeps/cudadeps/elfscan"
	"github.com/cudadeps/cudadeps/ldso"
)

// Undefined is a reference that no object in scope defines, as ld.so
// reports it: "OBJECT: undefined symbol: SYMBOL, version VERSION".
type Undefined struct {
	Object  *ldso.Object
	Symbol  string
	Version string // empty for an unversioned reference
	File    string // the soname the version is needed from
}

// Message is the loader's words for the miss.
func (u Undefined) Message() string {
	if u.Version == "" {
		return "undefined symbol: " + u.Symbol
	}
	return "undefined symbol: " + u.Symbol + ", version " + u.Version
}

// Binder binds the references of objects; it is safe for concurrent use
// and remembers what it read across calls.
type Binder struct {
	mu    sync.Mutex
	files map[string]*file
	next  int32
	pages sync.Pool
}

// New returns an empty Binder.
func New() *Binder { return &Binder{files: map[string]*file{}} }

// file is what the Binder knows of one file, by the path it was read at.
type file struct {
	id   int32
	path string

	once sync.Once
	refs []elfscan.Reference
	err  error
	// provider holds, for each reference, the id of a file known to define
	// it (0: none known yet).
	provider []atomic.Int32

	tableOnce sync.Once
	table     *elfscan.SymbolTable // closed: reopened for each use
	tableErr  error

	mu sync.Mutex
	// defines holds references this file was found to define.
	defines map[refKey]bool
}

// refKey is what decides whether a file defines a reference.
type refKey struct {
	name, version string
	hidden        bool
}

func keyOf(r *elfscan.Reference) refKey {
	return refKey{r.Name, r.Version, r.VersionHidden}
}

func (b *Binder) file(path string) *file {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.files[path]
	if !ok {
		b.next++
		f = &file{id: b.next, path: path}
		b.files[path] = f
	}
	return f
}

func (b *Binder) getPages() *elfscan.Pages {
	if p, ok := b.pages.Get().(*elfscan.Pages); ok {
		return p
	}
	return new(elfscan.Pages)
}

// references reads the file's references once.
func (b *Binder) references(f *file) ([]elfscan.Reference, error) {
	f.once.Do(func() {
		ef, err := elfscan.Open(f.path)
		if err != nil {
			f.err = err
			return
		}
		defer ef.Close()
		pages := b.getPages()
		ef.UsePages(pages)
		f.refs, f.err = ef.References()
		b.pages.Put(pages)
		f.provider = make([]atomic.Int32, len(f.refs))
	})
	return f.refs, f.err
}

// ErrUnreadable reports an object of the scope whose file cannot be read
// here (a member of a wheel, a file removed since): nothing can be said
// about the symbols of that scope.
var ErrUnreadable = errors.New("object cannot be read for its symbols")

// Check binds the references of every object of check in scope, the
// objects ld.so searches in order (the global scope, then the object's own
// dependency group), and returns the ones that no object of scope defines,
// strong references only, in the order of check and of each object's
// symbol table. Objects not found (Found() false) are skipped in both.
func (b *Binder) Check(ctx context.Context, scope, check []*ldso.Object) ([]Undefined, error) {
	type member struct {
		o *ldso.Object
		f *file
	}
	var members []member
	inScope := map[int32]bool{}
	for _, o := range scope {
		if !o.Found() || o.HostPath == "" {
			continue
		}
		f := b.file(o.HostPath)
		if !inScope[f.id] {
			inScope[f.id] = true
			members = append(members, member{o, f})
		}
	}
	type pending struct {
		o   *ldso.Object
		f   *file
		idx int
		ok  bool
	}
	var todo []pending
	for _, o := range check {
		if !o.Found() || o.HostPath == "" {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f := b.file(o.HostPath)
		refs, err := b.references(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
		}
		for i := range refs {
			if refs[i].Weak {
				continue
			}
			if p := f.provider[i].Load(); p != 0 && inScope[p] {
				continue
			}
			todo = append(todo, pending{o: o, f: f, idx: i})
		}
	}
	// Each member of the scope in order, for the references still
	// unbound; what a file defines is remembered across calls, and its
	// table opened only for references it was never asked for.
	left := len(todo)
	for _, m := range members {
		if left == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var t *elfscan.SymbolTable
		var fh *os.File
		var pages *elfscan.Pages
		for i := range todo {
			p := &todo[i]
			if p.ok {
				continue
			}
			ref := &p.f.refs[p.idx]
			k := keyOf(ref)
			m.f.mu.Lock()
			def, known := m.f.defines[k]
			m.f.mu.Unlock()
			if !known {
				if t == nil {
					var err error
					if t, fh, pages, err = b.open(m.f); err != nil {
						return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
					}
				}
				var err error
				if def, err = Defines(t, ref); err != nil {
					b.close(t, fh, pages)
					return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
				}
				// Only what a file defines is worth keeping: a lookup that
				// fails mostly fails at the bloom filter, for less than
				// keeping it costs.
				if def {
					m.f.mu.Lock()
					if m.f.defines == nil {
						m.f.defines = map[refKey]bool{}
					}
					m.f.defines[k] = true
					m.f.mu.Unlock()
				}
			}
			if def {
				p.ok = true
				p.f.provider[p.idx].Store(m.f.id)
				left--
			}
		}
		if t != nil {
			b.close(t, fh, pages)
		}
	}
	var out []Undefined
	for _, p := range todo {
		if p.ok {
			continue
		}
		r := p.f.refs[p.idx]
		out = append(out, Undefined{Object: p.o, Symbol: r.Name, Version: r.Version, File: r.File})
	}
	return out, nil
}

// open opens the symbol table of f for lookups: read once, then reopened
// with its file for each use.
func (b *Binder) open(f *file) (*elfscan.SymbolTable, *os.File, *elfscan.Pages, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, nil, nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, nil, nil, err
	}
	pages := b.getPages()
	f.tableOnce.Do(func() {
		var t *elfscan.SymbolTable
		t, f.tableErr = elfscan.NewFile(fh, st.Size(), f.path).SymbolTable()
		if f.tableErr == nil {
			t.Close()
			f.table = t
		}
	})
	if f.tableErr != nil {
		fh.Close()
		b.pages.Put(pages)
		return nil, nil, nil, f.tableErr
	}
	return f.table.Reopen(fh, pages), fh, pages, nil
}

func (b *Binder) close(t *elfscan.SymbolTable, fh *os.File, pages *elfscan.Pages) {
	t.Close()
	fh.Close()
	b.pages.Put(pages)
}

// allowedTypes are the symbol types the loader takes as definitions: code
// and data, common, thread-local and indirect functions.
const allowedTypes = 1<<elf.STT_NOTYPE | 1<<elf.STT_OBJECT | 1<<elf.STT_FUNC | 1<<elf.STT_COMMON | 1<<elf.STT_TLS | 1<<elf.STT_GNU_IFUNC

// stbGNUUnique is STB_GNU_UNIQUE, which debug/elf does not name.
const stbGNUUnique = elf.SymBind(10)

// Defines reports whether the object of table t satisfies ref, by ld.so's
// rules for one object of a scope.
func Defines(t *elfscan.SymbolTable, ref *elfscan.Reference) (bool, error) {
	var chosen, versioned *elfscan.Definition
	numVersions := 0
	err := t.Lookup(ref.Name, ref.Hash, func(d elfscan.Definition) bool {
		switch {
		case d.Value == 0 && d.Section != elf.SHN_ABS && d.Type != elf.STT_TLS:
			return true // no value
		case d.Section == elf.SHN_UNDEF:
			return true // a reference, not a definition
		case (1<<d.Type)&allowedTypes == 0:
			return true
		}
		if t.Versioned {
			ndx := d.VersionIndex & 0x7fff
			hidden := d.VersionIndex&0x8000 != 0
			if ref.Version != "" {
				// Another version is refused, and so is an unversioned
				// definition when the reference must not fall back to one
				// or the definition is hidden.
				if (d.VersionHash != ref.VersionHash || d.Version != ref.Version) && (ref.VersionHidden || d.VersionHash != 0 || hidden) {
					return true
				}
			} else if ndx >= 3 {
				// An unversioned reference takes the local, global or first
				// defined version; a later version only when it is the sole
				// non-hidden one.
				if !hidden {
					numVersions++
					if numVersions == 1 {
						dd := d
						versioned = &dd
					}
				}
				return true
			}
		}
		chosen = &d
		return false
	})
	if err != nil {
		return false, err
	}
	if chosen == nil && numVersions == 1 {
		chosen = versioned
	}
	if chosen == nil {
		return false, nil
	}
	// The first acceptable symbol decides for the whole object: hidden or
	// local, the object is passed over.
	if chosen.Visibility == elf.STV_HIDDEN || chosen.Visibility == elf.STV_INTERNAL {
		return false, nil
	}
	switch chosen.Bind {
	case elf.STB_GLOBAL, elf.STB_WEAK, stbGNUUnique:
		return true, nil
	}
	return false, nil
}
