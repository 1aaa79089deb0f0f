package elfscan

import (
	"debug/elf"
	"fmt"
	"io"

	"github.com/cudadeps/cudadeps/internal/elfhash"
)

// Reference is an undefined dynamic symbol that the loader binds: a name
// (and version) that some other object of the process must define.
type Reference struct {
	Name string
	// Version is the version needed (from DT_VERNEED through DT_VERSYM);
	// empty for an unversioned reference.
	Version string
	// VersionHash is the ELF hash of Version as the record gives it (the
	// loader compares hashes, then names).
	VersionHash uint32
	// VersionHidden is the hidden bit of the needed version's index: such a
	// reference does not fall back to an unversioned definition.
	VersionHidden bool
	// File is the soname the version is needed from (vn_file).
	File string
	// Weak marks an STB_WEAK reference, which may stay unbound.
	Weak bool
}

// Hash holds both hashes of a symbol name, so that looking one name up in
// many objects computes them once.
type Hash struct {
	GNU  uint32
	SysV uint32
}

// HashOf computes the hashes of a symbol name.
func HashOf(name string) Hash { return Hash{GNU: elfhash.GNU(name), SysV: elfhash.SysV(name)} }

// refChunk is how many symbol table entries one read of a walk covers.
const refChunk = 1024

func (s *scanner) references(name func([]byte) string, fn func(*Reference)) error {
	st, err := s.openSymtab()
	if err != nil || st == nil {
		return err
	}
	count, err := s.symbolCount(st.t)
	if err != nil {
		return err
	}
	if count > maxSymbols || count*st.entSize > uint64(s.size-st.off) {
		return s.errorf("symbol table of %d entries at %#x runs past the end of the file", count, st.off)
	}
	if st.versym >= 0 && 2*count > uint64(s.size-st.versym) {
		return s.errorf("DT_VERSYM of %d entries runs past the end of the file", count)
	}
	relocated, err := s.relocatedSymbols(st.t, count)
	if err != nil {
		return err
	}
	chunk := min(refChunk, count)
	tab := s.r.buffer(chunk * st.entSize)
	defer s.r.giveBack(tab)
	var ver []byte
	if st.versym >= 0 {
		ver = s.r.buffer(2 * chunk)
		defer s.r.giveBack(ver)
	}
	ref := new(Reference) // handed to fn for each in turn
	for first := uint64(0); first < count; first += refChunk {
		n := min(refChunk, count-first)
		if !relocated.any(first, first+n) {
			continue // nothing here is looked up: not even read
		}
		if err := s.r.readDirect(tab[:n*st.entSize], st.off+int64(first*st.entSize)); err != nil {
			return s.errorf("symbol table: %v", err)
		}
		if st.versym >= 0 {
			if err := s.r.readDirect(ver[:2*n], st.versym+int64(2*first)); err != nil {
				return s.errorf("version table: %v", err)
			}
		}
		if err := s.chunkReferences(st, relocated, first, n, tab, ver, name, fn, ref); err != nil {
			return err
		}
	}
	return nil
}

// chunkReferences calls fn with each reference among the n symbols from
// first on, whose entries are in tab and version indexes in ver, made in
// ref.
func (s *scanner) chunkReferences(st *symtab, relocated symbolSet, first, n uint64, tab, ver []byte, name func([]byte) string, fn func(*Reference), ref *Reference) error {
	for j := uint64(0); j < n; j++ {
		if first+j == 0 || !relocated.has(first+j) {
			continue // the null symbol, or one no relocation names: ld.so never looks it up
		}
		e := s.decodeSym(tab[j*st.entSize:])
		if e.shndx != elf.SHN_UNDEF || e.nameOff == 0 {
			continue
		}
		bind := elf.ST_BIND(e.info)
		if bind != elf.STB_GLOBAL && bind != elf.STB_WEAK {
			continue
		}
		if vis := elf.ST_VISIBILITY(e.other); vis == elf.STV_HIDDEN || vis == elf.STV_INTERNAL {
			continue
		}
		nm, err := st.strs.getWith(uint64(e.nameOff), name)
		if err != nil {
			return s.errorf("name of symbol %d: %v", first+j, err)
		}
		*ref = Reference{Name: nm, Weak: bind == elf.STB_WEAK}
		if st.versym >= 0 {
			vs := s.order.Uint16(ver[2*j:])
			if v, ok := st.versions[vs&0x7fff]; ok && vs&0x7fff > 1 {
				ref.Version, ref.VersionHash, ref.File = v.name, v.hash, v.file
				ref.VersionHidden = v.hidden
			}
		}
		fn(ref)
	}
	return nil
}

// symbolSet is a set of symbol table indexes.
type symbolSet []uint64

func (b symbolSet) has(i uint64) bool { return i/64 < uint64(len(b)) && b[i/64]&(1<<(i%64)) != 0 }

// any reports whether the set holds an index in [from, to).
func (b symbolSet) any(from, to uint64) bool {
	for i := from; i < to; {
		if i%64 == 0 && i+64 <= to {
			if i/64 < uint64(len(b)) && b[i/64] != 0 {
				return true
			}
			i += 64
			continue
		}
		if b.has(i) {
			return true
		}
		i++
	}
	return false
}

// relocatedSymbols are the indexes of the symbols that the object's dynamic
// relocations (DT_RELA, DT_REL, DT_JMPREL) name with a relocation type other
// than NONE: the only symbols ld.so looks up when it relocates the object.
// A linker may leave in the table an undefined symbol that no relocation
// names (its user was dropped), and ld.so reports no error for it.
func (s *scanner) relocatedSymbols(t *dynamicTags, count uint64) (symbolSet, error) {
	set := make(symbolSet, (count+63)/64)
	word := uint64(8)
	if !s.is64 {
		word = 4
	}
	tables := [...]relocTable{
		{"DT_RELA", t.haveRela, t.rela, t.relasz, true, t.relacount},
		{"DT_REL", t.haveRel, t.rel, t.relsz, false, t.relcount},
		{"DT_JMPREL", t.haveJmprel, t.jmprel, t.pltrelsz, t.pltrel != uint64(elf.DT_REL), 0},
	}
	var buf []byte
	defer func() {
		if buf != nil {
			s.r.giveBack(buf)
		}
	}()
	for _, tb := range tables {
		if !tb.have || tb.size == 0 {
			continue
		}
		ent := 2 * word
		if tb.addend {
			ent = 3 * word
		}
		off, err := s.vaddrToOffset(tb.addr)
		if err != nil {
			return nil, s.errorf("%s %#x: %v", tb.tag, tb.addr, err)
		}
		if tb.size > uint64(s.size-off) {
			return nil, s.errorf("%s of %d bytes at %#x runs past the end of the file", tb.tag, tb.size, off)
		}
		n := tb.size / ent
		// ld.so takes the first DT_RELACOUNT entries as relative ones
		// whatever they say (elf/do-rel.h): in a large C++ library they are
		// most of the table, and reading them would tell nothing.
		skip := min(tb.relative, n)
		need := min(refChunk, n-skip) * ent
		if uint64(cap(buf)) < need {
			if buf != nil {
				s.r.giveBack(buf)
			}
			buf = s.r.buffer(need)
		}
		buf = buf[:need]
		if err := s.markRelocated(set, buf, off+int64(skip*ent), n-skip, ent, count); err != nil {
			return nil, s.errorf("%s: %v", tb.tag, err)
		}
	}
	return set, nil
}

// relocTable is one table of dynamic relocations.
type relocTable struct {
	tag        string
	have       bool
	addr, size uint64
	addend     bool
	relative   uint64 // leading relative relocations
}

// markRelocated adds to set the symbols that n relocations of ent bytes at
// off name, reading them in chunks through buf.
func (s *scanner) markRelocated(set symbolSet, buf []byte, off int64, n, ent, count uint64) error {
	for first := uint64(0); first < n; first += refChunk {
		k := min(refChunk, n-first)
		if err := s.r.readDirect(buf[:k*ent], off+int64(first*ent)); err != nil {
			return err
		}
		for j := uint64(0); j < k; j++ {
			var sym, typ uint64
			if s.is64 {
				info := s.order.Uint64(buf[j*ent+8:])
				sym, typ = info>>32, info&0xffffffff
			} else {
				info := uint64(s.order.Uint32(buf[j*ent+4:]))
				sym, typ = info>>8, info&0xff
			}
			if sym != 0 && typ != 0 && sym < count {
				set[sym/64] |= 1 << (sym % 64)
			}
		}
	}
	return nil
}

// dtRelaCount and dtRelCount are DT_RELACOUNT and DT_RELCOUNT, which
// debug/elf does not name.
const (
	dtRelaCount elf.DynTag = 0x6ffffff9
	dtRelCount  elf.DynTag = 0x6ffffffa
)

// rawSym is one decoded Elf_Sym.
type rawSym struct {
	nameOff     uint32
	info, other uint8
	shndx       elf.SectionIndex
	value       uint64
}

func (s *scanner) decodeSym(b []byte) rawSym {
	if s.is64 {
		return rawSym{nameOff: s.order.Uint32(b[0:]), info: b[4], other: b[5], shndx: elf.SectionIndex(s.order.Uint16(b[6:])), value: s.order.Uint64(b[8:])}
	}
	return rawSym{nameOff: s.order.Uint32(b[0:]), value: uint64(s.order.Uint32(b[4:])), info: b[12], other: b[13], shndx: elf.SectionIndex(s.order.Uint16(b[14:]))}
}

// Definition is a symbol of an object's hash chain, with what the loader
// needs to decide whether it satisfies a reference.
type Definition struct {
	Value      uint64
	Section    elf.SectionIndex
	Type       elf.SymType
	Bind       elf.SymBind
	Visibility elf.SymVis
	// VersionIndex is the raw DT_VERSYM entry (hidden bit included); 0 when
	// the object has no version table.
	VersionIndex uint16
	// Version and VersionHash name the version VersionIndex stands for; both
	// are zero for the local and global indexes and for the base definition,
	// which carry no version for matching.
	Version     string
	VersionHash uint32
}

// SymbolTable is the dynamic symbol table of one object, opened for lookups
// through its hash table the way the loader looks symbols up: a lookup
// reads a bloom filter word, a bucket, a few chain entries, symbols and
// names, through a bounded page cache.
type SymbolTable struct {
	s     *scanner
	st    *symtab
	pages *pagedReader
	// Versioned is whether the loader keeps a version table for the
	// object: DT_VERSYM and at least one version record. Without it every
	// definition matches any version.
	Versioned bool
	gnu       *gnuTable
}

type gnuTable struct {
	nbuckets, symoffset, bloomSize, shift uint64
	bloomOff, bucketsOff, chainsOff       int64
	word                                  uint64 // bytes in a bloom word
	// bloom is the bloom filter, widened to 64-bit words; nil when it is
	// too large to keep.
	bloom []uint64
}

// maxBloomWords bounds the bloom filter kept in memory per table (512 KiB;
// the largest real libraries have a few thousand words).
const maxBloomWords = 1 << 16

// passes is the loader's bloom filter test for hash h, on a filter in
// memory.
func (g *gnuTable) passes(h uint32) bool {
	bits := g.word * 8
	hh := uint64(h)
	// The loader masks with bloomSize-1 (a power of two in every table a
	// linker writes).
	w := g.bloom[(hh/bits)&(g.bloomSize-1)]
	return (w>>(hh%bits))&(w>>((hh>>(g.shift%64))%bits))&1 != 0
}

// symbolTable opens the dynamic symbol table for lookups through pr.
func (s *scanner) symbolTable(pr *pagedReader) (*SymbolTable, error) {
	t := &SymbolTable{s: s, pages: pr}
	var err error
	if t.st, err = s.openSymtab(); err != nil {
		return nil, err
	}
	if t.st == nil {
		return t, nil
	}
	t.Versioned = t.st.versym >= 0 && len(t.st.versions) > 0
	if t.st.t.haveGnu {
		if t.gnu, err = s.openGNU(t.st.t.gnuHash); err != nil {
			return nil, err
		}
		if err := s.loadBloom(t.gnu); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Close gives the table's pages back; a table kept after Close reads
// nothing through them again (only Reopen copies read).
func (t *SymbolTable) Close() {
	t.pages.release()
	t.pages.spare = nil
	// A closed table is kept: on a scanner of its own that holds what
	// lookups need, not its file's parsed headers, nor its last name.
	s := t.s.kept()
	t.s = s
	if t.st != nil {
		st := *t.st
		st.s = s
		strs := *st.strs
		strs.s, strs.buf = s, nil
		st.strs = &strs
		t.st = &st
	}
}

func (s *scanner) openGNU(addr uint64) (*gnuTable, error) {
	off, err := s.vaddrToOffset(addr)
	if err != nil {
		return nil, s.errorf("DT_GNU_HASH %#x: %v", addr, err)
	}
	var hdr [16]byte
	if _, err := s.r.ReadAt(hdr[:], off); err != nil {
		return nil, s.errorf("DT_GNU_HASH header: %v", err)
	}
	g := &gnuTable{
		nbuckets:  uint64(s.order.Uint32(hdr[0:])),
		symoffset: uint64(s.order.Uint32(hdr[4:])),
		bloomSize: uint64(s.order.Uint32(hdr[8:])),
		shift:     uint64(s.order.Uint32(hdr[12:])),
	}
	word := uint64(4)
	if s.is64 {
		word = 8
	}
	rest := uint64(s.size - off - 16)
	if g.bloomSize > rest/word || g.nbuckets > (rest-g.bloomSize*word)/4 {
		return nil, s.errorf("DT_GNU_HASH of %d buckets and %d bloom words runs past the end of the file", g.nbuckets, g.bloomSize)
	}
	g.word = word
	g.bloomOff = off + 16
	g.bucketsOff = g.bloomOff + int64(word*g.bloomSize)
	g.chainsOff = g.bucketsOff + int64(4*g.nbuckets)
	return g, nil
}

// loadBloom reads g's bloom filter into memory when it is small enough:
// most lookups end at the filter, which then costs no read.
func (s *scanner) loadBloom(g *gnuTable) error {
	if g.bloomSize == 0 || g.bloomSize > maxBloomWords {
		return nil
	}
	raw := make([]byte, g.bloomSize*g.word)
	if err := s.r.readDirect(raw, g.bloomOff); err != nil {
		return s.errorf("DT_GNU_HASH bloom filter: %v", err)
	}
	g.bloom = make([]uint64, g.bloomSize)
	for i := range g.bloom {
		if g.word == 8 {
			g.bloom[i] = s.order.Uint64(raw[8*i:])
		} else {
			g.bloom[i] = uint64(s.order.Uint32(raw[4*i:]))
		}
	}
	return nil
}

// MayDefine reports whether the table may define a name of hash h: false
// when the loader would find nothing without reading further (no hash
// table, or a bloom filter that rules h out), which is the answer for most
// names an object is asked about. It reads nothing: the bloom filter is
// kept from when the table was opened.
func (t *SymbolTable) MayDefine(h Hash) bool {
	switch {
	case t.st == nil:
		return false
	case t.gnu == nil:
		return t.st.t.haveHash
	case t.gnu.nbuckets == 0 || t.gnu.bloomSize == 0:
		return false
	case t.gnu.bloom == nil:
		return true
	}
	return t.gnu.passes(h.GNU)
}

// Bucket is the hash bucket that a lookup of a name of hash h starts at,
// for ordering many lookups in one table: DT_GNU_HASH keeps its chains and
// symbols in bucket order, so lookups made in that order read the table
// front to back. Zero without such a table.
func (t *SymbolTable) Bucket(h Hash) uint32 {
	if t.gnu == nil || t.gnu.nbuckets == 0 {
		return 0
	}
	return uint32(uint64(h.GNU) % t.gnu.nbuckets)
}

// Lookup calls fn with each symbol of the hash chain of name whose name is
// name, in chain order, until fn returns false. The loader takes the first
// symbol its checks accept; the order matters.
func (t *SymbolTable) Lookup(name string, h Hash, fn func(Definition) bool) (err error) {
	if t.st == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = t.s.errorf("unreadable structure (%v)", p)
		}
	}()
	if t.gnu != nil {
		return t.lookupGNU(name, h.GNU, fn)
	}
	if t.st.t.haveHash {
		idxs, err := t.s.sysvChain(t.st.t.hash, name)
		if err != nil {
			return err
		}
		_ = h.SysV // sysvChain hashes the name itself
		for _, i := range idxs {
			d, ok, err := t.definition(i, name)
			if err != nil {
				return err
			}
			if ok && !fn(d) {
				return nil
			}
		}
	}
	// No hash table: the loader finds nothing in the object.
	return nil
}

func (t *SymbolTable) lookupGNU(name string, h uint32, fn func(Definition) bool) error {
	return t.s.walkGNU(t.gnu, h, func(idx uint64) (bool, error) {
		d, ok, err := t.definition(idx, name)
		if err != nil {
			return false, err
		}
		return !ok || fn(d), nil
	})
}

// walkGNU calls fn with each symbol index of hash h's DT_GNU_HASH chain
// whose hash matches, once the bloom filter lets h through, until fn
// returns false.
func (s *scanner) walkGNU(g *gnuTable, h uint32, fn func(idx uint64) (bool, error)) error {
	if g.nbuckets == 0 || g.bloomSize == 0 {
		return nil
	}
	word := uint64(4)
	if s.is64 {
		word = 8
	}
	bits := word * 8
	hh := uint64(h)
	if g.bloom != nil {
		if !g.passes(h) {
			return nil
		}
	} else {
		var wbuf [8]byte
		// The loader masks with bloomSize-1 (a power of two in every table
		// a linker writes).
		if _, err := s.r.ReadAt(wbuf[:word], g.bloomOff+int64(word*((hh/bits)&(g.bloomSize-1)))); err != nil {
			return s.errorf("DT_GNU_HASH bloom filter: %v", err)
		}
		var bloom uint64
		if s.is64 {
			bloom = s.order.Uint64(wbuf[:])
		} else {
			bloom = uint64(s.order.Uint32(wbuf[:]))
		}
		if (bloom>>(hh%bits))&(bloom>>((hh>>(g.shift%64))%bits))&1 == 0 {
			return nil
		}
	}
	var b [4]byte
	if _, err := s.r.ReadAt(b[:], g.bucketsOff+int64(4*(hh%g.nbuckets))); err != nil {
		return s.errorf("DT_GNU_HASH bucket: %v", err)
	}
	idx := uint64(s.order.Uint32(b[:]))
	if idx == 0 || idx < g.symoffset {
		return nil
	}
	for n := 0; ; n++ {
		if n > maxSymbols {
			return s.errorf("DT_GNU_HASH chain does not end")
		}
		if _, err := s.r.ReadAt(b[:], g.chainsOff+int64(4*(idx-g.symoffset))); err != nil {
			return s.errorf("DT_GNU_HASH chain: %v", err)
		}
		ch := s.order.Uint32(b[:])
		if (ch^h)>>1 == 0 {
			more, err := fn(idx)
			if err != nil || !more {
				return err
			}
		}
		if ch&1 != 0 {
			return nil
		}
		idx++
	}
}

// definition decodes symbol i when its name is name.
func (t *SymbolTable) definition(i uint64, name string) (Definition, bool, error) {
	s, st := t.s, t.st
	if i*st.entSize >= uint64(s.size-st.off) || (i+1)*st.entSize > uint64(s.size-st.off) {
		return Definition{}, false, s.errorf("symbol %d lies outside the file", i)
	}
	var buf [24]byte
	if _, err := s.r.ReadAt(buf[:st.entSize], st.off+int64(i*st.entSize)); err != nil {
		return Definition{}, false, s.errorf("symbol %d: %v", i, err)
	}
	e := s.decodeSym(buf[:])
	if ok, err := st.strs.equal(uint64(e.nameOff), name); err != nil || !ok {
		return Definition{}, false, err
	}
	d := Definition{Value: e.value, Section: e.shndx, Type: elf.ST_TYPE(e.info), Bind: elf.ST_BIND(e.info), Visibility: elf.ST_VISIBILITY(e.other)}
	if st.versym >= 0 {
		var vb [2]byte
		if _, err := s.r.ReadAt(vb[:], st.versym+int64(2*i)); err != nil {
			return Definition{}, false, s.errorf("version of symbol %d: %v", i, err)
		}
		d.VersionIndex = s.order.Uint16(vb[:])
		if v, ok := st.versions[d.VersionIndex&0x7fff]; ok && !v.base {
			d.Version, d.VersionHash = v.name, v.hash
		}
	}
	return d, true, nil
}

// equal reports whether the string at idx is name, reading no further than
// needed to tell.
func (t *stringTable) equal(idx uint64, name string) (bool, error) {
	if t.size != 0 && idx >= t.size {
		return false, fmt.Errorf("string index %#x beyond DT_STRSZ %#x", idx, t.size)
	}
	start := t.off + int64(idx)
	if idx > uint64(t.s.size) || start >= t.s.size {
		return false, fmt.Errorf("string index %#x lies outside the file", idx)
	}
	// name and its terminating NUL.
	n := int64(len(name)) + 1
	if start+n > t.s.size {
		return false, nil
	}
	var small [128]byte
	var buf []byte
	if n <= int64(len(small)) {
		buf = small[:n]
	} else {
		buf = make([]byte, n)
	}
	if _, err := t.s.r.ReadAt(buf, start); err != nil {
		return false, err
	}
	return string(buf[:n-1]) == name && buf[n-1] == 0, nil
}

// Reopen returns a table that reads through r, the same file opened
// again, with what t already read (its dynamic entries, version records
// and hash table header) and pages of its own: tables opened once can be
// kept closed, and used by several goroutines at once through copies.
func (t *SymbolTable) Reopen(r io.ReaderAt, pages *Pages) *SymbolTable {
	pr := newPagedReader(r, t.s.size).withPages(pages)
	s := *t.s
	s.r = pr
	c := &SymbolTable{s: &s, pages: pr, Versioned: t.Versioned, gnu: t.gnu}
	if t.st != nil {
		st := *t.st
		st.s = &s
		strs := *t.st.strs
		strs.s, strs.buf = &s, nil // the copies are read side by side
		st.strs = &strs
		c.st = &st
	}
	return c
}
