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
// on its members. A Binder therefore shares what it learns across the roots
// of a scan: every symbol name is kept once; each file's references are read
// once and remembered with an object known to define each, grouped by that
// object, so that a root whose scope holds those objects costs one test per
// group, not one lookup per reference; and what each file was asked about
// past its bloom filter (kept in memory) is remembered too.
package bind

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/eintr"
	"github.com/cudadeps/cudadeps/internal/freelist"
	"github.com/cudadeps/cudadeps/internal/workers"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/ldso"
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
	all   []*file // by id - 1
	syms  *symbols
	pages *elfscan.PagesPool
	kept  *Kept // nil: every check computed
	// refBuffers are the lists files' references are gathered in: at most
	// maxRefBuffers of up to maxRefBuffer ids are kept, since what is kept
	// is live heap for the whole scan, which the collector's goal doubles;
	// the few files with tens of thousands of references grow a list of
	// their own.
	refBuffers freelist.List[[]uint32]
}

const maxRefBuffers, maxRefBuffer = 4, 8 << 10

// New returns an empty Binder.
func New() *Binder { return NewWithPages(elfscan.NewPagesPool(runtime.GOMAXPROCS(0))) }

// NewWithPages returns an empty Binder that reads through the page
// buffers of pages: a scan's loader and binder work in turn on each
// worker, and one pool serves both.
func NewWithPages(pages *elfscan.PagesPool) *Binder {
	return &Binder{files: map[string]*file{}, syms: newSymbols(), pages: pages, refBuffers: freelist.List[[]uint32]{Max: maxRefBuffers}}
}

// Keeping makes b answer the checks kept answers hold from k, and keep
// there those it computes; it is called before b is used.
func (b *Binder) Keeping(k *Kept) *Binder {
	b.kept = k
	return b
}

// fileOf is the file of o (found, with a host path), made at the first
// object met for it, with what stat said of it then: the loader reads a
// path once, so every object of one path carries the same stamp.
func (b *Binder) fileOf(o *ldso.Object) *file {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.files[o.HostPath]
	if !ok {
		f = &file{id: int32(len(b.all) + 1), path: o.HostPath, stamp: o.Stamp()}
		b.files[o.HostPath] = f
		b.all = append(b.all, f)
	}
	return f
}

// count is the number of files known, the largest id.
func (b *Binder) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.all)
}

func (b *Binder) getPages() *elfscan.Pages { return b.pages.Get() }

// ErrUnreadable reports an object of the scope whose file cannot be read
// here (a member of a wheel, a file removed since): nothing can be said
// about the symbols of that scope.
var ErrUnreadable = errors.New("object cannot be read for its symbols")

// pending is a reference of a checked object not yet known to bind in
// the scope. It holds no pointer: a closure's list runs to a hundred
// thousand, which the collector need not scan.
type pending struct {
	of  int32 // into the checked objects (checked)
	idx int32 // into their file's refs
	ok  bool
}

// checked is an object whose references are pending.
type checked struct {
	o *ldso.Object
	f *file
}

// Check binds the references of every object of check in scope, the
// objects ld.so searches in order (the global scope, then the object's own
// dependency group), and returns the ones that no object of scope defines,
// strong references only, in the order of check and of each object's
// symbol table. Objects not found (Found() false) are skipped in both.
// A Binder keeping answers (Keeping) gives a check of files unchanged
// since the answer kept for them, reading none of them.
func (b *Binder) Check(ctx context.Context, scope, check []*ldso.Object) ([]Undefined, error) {
	members, inScope := b.members(scope)
	if b.kept == nil {
		return b.check(ctx, members, inScope, check)
	}
	examined := slices.DeleteFunc(slices.Clone(check), func(o *ldso.Object) bool { return !o.Found() || o.HostPath == "" })
	key, ok := b.kept.key(members, examined)
	if !ok {
		b.kept.notKeyed()
		return b.check(ctx, members, inScope, check)
	}
	if misses, ok := b.kept.recall(key); ok {
		out := make([]Undefined, 0, len(misses))
		for _, m := range misses {
			if m.Of < 0 || int(m.Of) >= len(examined) {
				return b.check(ctx, members, inScope, check) // not this check's answer
			}
			out = append(out, Undefined{Object: examined[m.Of], Symbol: m.Symbol, Version: m.Version, File: m.File})
		}
		return out, nil
	}
	out, err := b.check(ctx, members, inScope, check)
	if err != nil {
		return nil, err
	}
	misses := make([]KeptMiss, len(out))
	at := 0
	for i, u := range out {
		j := indexFrom(examined, u.Object, at)
		at = max(j, 0)
		misses[i] = KeptMiss{Of: int32(j), Symbol: u.Symbol, Version: u.Version, File: u.File}
	}
	b.kept.keep(key, misses)
	return out, nil
}

// indexFrom is the index of o in objs, looked for from start on, then
// from the beginning: misses come in the order of the objects checked, so
// each is found at or after the one before. -1 when o is not there.
func indexFrom(objs []*ldso.Object, o *ldso.Object, start int) int {
	for i := start; i < len(objs); i++ {
		if objs[i] == o {
			return i
		}
	}
	return slices.Index(objs[:min(start, len(objs))], o)
}

// check is Check computed, for the scope whose distinct files are
// members.
func (b *Binder) check(ctx context.Context, members []*file, inScope []bool, check []*ldso.Object) ([]Undefined, error) {
	objs, todo, err := b.pendingOf(ctx, check, inScope)
	if err != nil {
		return nil, err
	}
	// A reference binds to the first member, in scope order, that
	// defines it, whatever the other references do: a long list (the
	// hundred thousand of libtorch_cuda.so) is bound in pieces side by
	// side, each through the members in order.
	pieces := min(runtime.GOMAXPROCS(0), len(todo)/minPiece)
	if pieces < 2 {
		if err := b.bindAll(ctx, members, objs, todo); err != nil {
			return nil, err
		}
	} else {
		errs := make([]error, pieces)
		size := (len(todo) + pieces - 1) / pieces
		workers.Each(pieces, pieces, func(i int) {
			errs[i] = b.bindAll(ctx, members, objs, todo[i*size:min(len(todo), (i+1)*size)])
		})
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
	}
	var out []Undefined
	var last *file
	for _, p := range todo {
		c := objs[p.of]
		if c.f != last {
			c.f.summarize()
			last = c.f
		}
		if p.ok {
			continue
		}
		s := b.syms.at(c.f.refs[p.idx])
		out = append(out, Undefined{Object: c.o, Symbol: s.name, Version: s.version(), File: s.file()})
	}
	return out, nil
}

// minPiece is the fewest references bound apart from the others.
const minPiece = 4096

// bindAll binds todo in members, in order, until every one is bound.
func (b *Binder) bindAll(ctx context.Context, members []*file, objs []checked, todo []pending) error {
	left := len(todo)
	for _, m := range members {
		if left == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := b.bindIn(m, objs, todo)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUnreadable, err)
		}
		left -= n
	}
	return nil
}

// members lists the distinct files of scope in order, and marks them by
// id.
func (b *Binder) members(scope []*ldso.Object) ([]*file, []bool) {
	members := make([]*file, 0, len(scope))
	for _, o := range scope {
		if o.Found() && o.HostPath != "" {
			members = append(members, b.fileOf(o))
		}
	}
	inScope := make([]bool, b.count()+1)
	out := members[:0]
	for _, f := range members {
		if !inScope[f.id] {
			inScope[f.id] = true
			out = append(out, f)
		}
	}
	return out, inScope
}

// pendingOf lists the references of the objects of check not known to bind
// to a member of the scope, in the order of check and of each object's
// references, with the objects they are of.
func (b *Binder) pendingOf(ctx context.Context, check []*ldso.Object, inScope []bool) ([]checked, []pending, error) {
	// Counted first: the list of a large closure runs to a hundred
	// thousand entries, which growing by appending would copy over and
	// over.
	var objs []checked
	var lists [][]int32
	var all []bool
	n := 0
	for _, o := range check {
		if !o.Found() || o.HostPath == "" {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		f := b.fileOf(o)
		if err := b.readReferences(f); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
		}
		list, every := f.unboundIn(inScope)
		if every {
			n += len(f.refs)
		} else {
			n += len(list)
		}
		objs = append(objs, checked{o, f})
		lists = append(lists, list)
		all = append(all, every)
	}
	todo := make([]pending, 0, n)
	for k, c := range objs {
		if all[k] {
			for i := range c.f.refs {
				todo = append(todo, pending{of: int32(k), idx: int32(i)})
			}
			continue
		}
		for _, i := range lists[k] {
			todo = append(todo, pending{of: int32(k), idx: i})
		}
	}
	return objs, todo, nil
}

// bindIn looks the pending references up in the scope member m and
// returns how many it binds.
func (b *Binder) bindIn(m *file, objs []checked, todo []pending) (int, error) {
	t, err := b.table(m)
	if err != nil {
		return 0, err
	}
	bound := 0
	take := func(p *pending, f *file) {
		p.ok = true
		f.bound(p.idx, m.id)
		bound++
	}
	// What the bloom filter and earlier lookups answer first; the rest
	// are looked up in the file.
	var ask []uint64 // bucket << 32 | index into todo
	for i := range todo {
		p := &todo[i]
		if p.ok {
			continue
		}
		f := objs[p.of].f
		s := b.syms.at(f.refs[p.idx])
		if !t.MayDefine(s.hash) {
			continue
		}
		if def, known := m.knows(s); known {
			if def {
				take(p, f)
			}
			continue
		}
		ask = append(ask, uint64(t.Bucket(s.hash))<<32|uint64(i))
	}
	if len(ask) == 0 {
		return bound, nil
	}
	// In bucket order the lookups walk the hash table and the symbols
	// front to back, through the few pages a reading keeps, instead of
	// reading pages all over a large table again and again.
	slices.Sort(ask)
	open, fd, pages, err := b.reopen(m)
	if err != nil {
		return bound, err
	}
	defer b.close(open, fd, pages)
	for _, a := range ask {
		p := &todo[uint32(a)]
		f := objs[p.of].f
		s := b.syms.at(f.refs[p.idx])
		def, known := m.knows(s) // a name asked twice in the list
		if !known {
			if def, err = defines(open, s); err != nil {
				return bound, err
			}
			m.learn(s, def)
		}
		if def {
			take(p, f)
		}
	}
	return bound, nil
}

// table is m's symbol table, kept closed (its bloom filter answers most
// questions without the file).
func (b *Binder) table(m *file) (*elfscan.SymbolTable, error) {
	b.read(m)
	return m.table, m.tableErr
}

// reopen opens m's table with its file, for lookups past the bloom filter
// (plain system calls: os.Open costs five more per file).
func (b *Binder) reopen(m *file) (*elfscan.SymbolTable, int, *elfscan.Pages, error) {
	fd, err := eintr.Retry(func() (int, error) {
		return syscall.Open(m.path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	})
	if err != nil {
		return nil, -1, nil, &fs.PathError{Op: "open", Path: m.path, Err: err}
	}
	pages := b.getPages()
	return m.table.Reopen(elfscan.FDReader(fd), pages), fd, pages, nil
}

func (b *Binder) close(t *elfscan.SymbolTable, fd int, pages *elfscan.Pages) {
	t.Close()
	syscall.Close(fd)
	b.pages.Put(pages)
}

// readReferences reads the strong references of f.
func (b *Binder) readReferences(f *file) error {
	b.read(f)
	return f.err
}

// read reads, once, f's references and symbol table: a file is checked
// and a member of scopes alike, and one opening parses its headers and
// version records for both.
func (b *Binder) read(f *file) {
	f.once.Do(func() {
		ef, err := elfscan.Open(f.path)
		if err != nil {
			f.err, f.tableErr = err, err
			return
		}
		pages := b.getPages()
		ef.UsePages(pages)
		defer func() {
			ef.Close()
			b.pages.Put(pages)
		}()
		buf, _ := b.refBuffers.Get()
		refs, buf, err := b.syms.references(ef, buf)
		if cap(buf) <= maxRefBuffer {
			b.refBuffers.Put(buf)
		}
		if err != nil {
			f.err = err
		} else {
			f.refs = refs
			f.provider = make([]atomic.Int32, len(f.refs))
		}
		if t, err := ef.SymbolTable(); err != nil {
			f.tableErr = err
		} else {
			t.Close()
			f.table = t
		}
	})
}

// allowedTypes are the symbol types the loader takes as definitions: code
// and data, common, thread-local and indirect functions.
const allowedTypes = 1<<elf.STT_NOTYPE | 1<<elf.STT_OBJECT | 1<<elf.STT_FUNC | 1<<elf.STT_COMMON | 1<<elf.STT_TLS | 1<<elf.STT_GNU_IFUNC

// stbGNUUnique is STB_GNU_UNIQUE, which debug/elf does not name.
const stbGNUUnique = elf.SymBind(10)

// defines reports whether the object of table t satisfies a reference to
// s, by ld.so's rules for one object of a scope.
func defines(t *elfscan.SymbolTable, s *symbol) (bool, error) {
	var chosen, versioned elfscan.Definition
	found, numVersions := false, 0
	err := t.Lookup(s.name, s.hash, func(d elfscan.Definition) bool {
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
			if n := s.need; n != nil && n.version != "" {
				// Another version is refused, and so is an unversioned
				// definition when the reference must not fall back to one
				// or the definition is hidden.
				if (d.VersionHash != n.hash || d.Version != n.version) && (n.hidden || d.VersionHash != 0 || hidden) {
					return true
				}
			} else if ndx >= 3 {
				// An unversioned reference takes the local, global or first
				// defined version; a later version only when it is the sole
				// non-hidden one.
				if !hidden {
					numVersions++
					if numVersions == 1 {
						versioned = d
					}
				}
				return true
			}
		}
		chosen, found = d, true
		return false
	})
	if err != nil {
		return false, err
	}
	if !found && numVersions == 1 {
		chosen, found = versioned, true
	}
	if !found {
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
