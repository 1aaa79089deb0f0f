package elfscan

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"

	"github.com/cudadeps/cudadeps/internal/elfhash"
)

// Symbol is one dynamic symbol, as the loader sees it through DT_SYMTAB.
type Symbol struct {
	Name    string
	Defined bool // st_shndx is not SHN_UNDEF
	Type    elf.SymType
	Bind    elf.SymBind
	Value   uint64
	// Version is the name of the symbol's version: a definition of this object
	// for a defined symbol, a version needed from File for an undefined one.
	// It is empty for an unversioned symbol (no DT_VERSYM, or version index 0
	// or 1).
	Version string
	// Hidden marks a defined symbol whose version is not the default one
	// (name@VER rather than name@@VER): it binds only to references that ask
	// for VER.
	Hidden bool
	// File is the soname a version is needed from, for undefined versioned
	// symbols (the vn_file of the DT_VERNEED record).
	File string
}

// String writes the symbol the way nm -D and the linker do: name@@VERSION for
// a default version definition, name@VERSION otherwise, name when unversioned.
func (s Symbol) String() string {
	switch {
	case s.Version == "":
		return s.Name
	case s.Defined && !s.Hidden:
		return s.Name + "@@" + s.Version
	default:
		return s.Name + "@" + s.Version
	}
}

// SymbolFilter chooses the symbols to return by name and whether they are
// defined; nil keeps every symbol. Symbols it drops cost no allocation.
type SymbolFilter func(name string, defined bool) bool

// maxSymbols bounds the symbol count a hostile hash table can claim; the
// largest real libraries have a few hundred thousand dynamic symbols.
const maxSymbols = 1 << 24

// dynamicTags are the single-valued dynamic entries the symbol walk needs.
type dynamicTags struct {
	symtab, strtab, strsz, syment    uint64
	hash, gnuHash                    uint64
	versym, verdef, verneed          uint64
	haveSymtab, haveStrtab           bool
	haveSyment, haveHash, haveGnu    bool
	haveVersym, haveVerdef, haveVern bool
	// The relocation tables: ld.so looks up only the symbols these name.
	rela, relasz, rel, relsz      uint64
	jmprel, pltrelsz, pltrel      uint64
	haveRela, haveRel, haveJmprel bool
	// relacount and relcount are DT_RELACOUNT and DT_RELCOUNT: the
	// relative relocations at the start of DT_RELA and DT_REL, which ld.so
	// applies without looking a symbol up.
	relacount, relcount uint64
}

func (s *scanner) dynamicTags() (*dynamicTags, bool, error) {
	var dyn *elf.ProgHeader
	for i := range s.progs {
		if s.progs[i].Type == elf.PT_DYNAMIC {
			dyn = &s.progs[i]
			break
		}
	}
	if dyn == nil {
		return nil, false, nil
	}
	entries, err := s.dynamicEntries(dyn)
	if err != nil {
		return nil, false, err
	}
	t := &dynamicTags{}
	// Like ld.so, the last entry of a tag wins.
	for _, e := range entries {
		switch e.tag {
		case elf.DT_SYMTAB:
			t.symtab, t.haveSymtab = e.val, true
		case elf.DT_STRTAB:
			t.strtab, t.haveStrtab = e.val, true
		case elf.DT_STRSZ:
			t.strsz = e.val
		case elf.DT_SYMENT:
			t.syment, t.haveSyment = e.val, true
		case elf.DT_HASH:
			t.hash, t.haveHash = e.val, true
		case elf.DT_GNU_HASH:
			t.gnuHash, t.haveGnu = e.val, true
		case elf.DT_VERSYM:
			t.versym, t.haveVersym = e.val, true
		case elf.DT_VERDEF:
			t.verdef, t.haveVerdef = e.val, true
		case elf.DT_VERNEED:
			t.verneed, t.haveVern = e.val, true
		case elf.DT_RELA:
			t.rela, t.haveRela = e.val, true
		case elf.DT_RELASZ:
			t.relasz = e.val
		case elf.DT_REL:
			t.rel, t.haveRel = e.val, true
		case elf.DT_RELSZ:
			t.relsz = e.val
		case elf.DT_JMPREL:
			t.jmprel, t.haveJmprel = e.val, true
		case elf.DT_PLTRELSZ:
			t.pltrelsz = e.val
		case elf.DT_PLTREL:
			t.pltrel = e.val
		case dtRelaCount:
			t.relacount = e.val
		case dtRelCount:
			t.relcount = e.val
		}
	}
	return t, true, nil
}

// symVersion is what one version index stands for.
type symVersion struct {
	name   string
	file   string // for needed versions
	hash   uint32
	hidden bool // a needed version whose index has the hidden bit
	base   bool // the base definition: the file's name, not a version
}

func (s *scanner) symbols(keep SymbolFilter) ([]Symbol, error) {
	st, err := s.openSymtab()
	if err != nil || st == nil {
		return nil, err
	}
	return s.symbolsFrom(st, keep)
}

// symbolVersions maps version indexes to names and returns the file offset of
// DT_VERSYM, or -1 when the object has none.
func (s *scanner) symbolVersions(t *dynamicTags, strs *stringTable) (map[uint16]symVersion, int64, error) {
	if !t.haveVersym {
		return nil, -1, nil
	}
	versymOff, err := s.vaddrToOffset(t.versym)
	if err != nil {
		return nil, -1, s.errorf("DT_VERSYM %#x: %v", t.versym, err)
	}
	versions := map[uint16]symVersion{}
	if t.haveVerdef {
		off, err := s.vaddrToOffset(t.verdef)
		if err != nil {
			return nil, -1, s.errorf("DT_VERDEF %#x: %v", t.verdef, err)
		}
		defs, err := s.readVerdef(off, strs)
		if err != nil {
			return nil, -1, err
		}
		for _, d := range defs {
			versions[d.Index&0x7fff] = symVersion{name: d.Name, hash: d.Hash, base: d.Base()}
		}
	}
	if t.haveVern {
		off, err := s.vaddrToOffset(t.verneed)
		if err != nil {
			return nil, -1, s.errorf("DT_VERNEED %#x: %v", t.verneed, err)
		}
		needs, err := s.readVerneed(off, strs)
		if err != nil {
			return nil, -1, err
		}
		for _, n := range needs {
			for _, v := range n.Versions {
				versions[v.Index&0x7fff] = symVersion{name: v.Name, file: n.File, hash: v.Hash, hidden: v.Index&0x8000 != 0}
			}
		}
	}
	return versions, versymOff, nil
}

// symbolCount finds how many entries DT_SYMTAB has; the dynamic section does
// not say. DT_HASH's nchain is exact; a .dynsym section header says it for
// free when present; DT_GNU_HASH gives it as the end of the last hash chain.
func (s *scanner) symbolCount(t *dynamicTags) (uint64, error) {
	if t.haveHash {
		off, err := s.vaddrToOffset(t.hash)
		if err != nil {
			return 0, s.errorf("DT_HASH %#x: %v", t.hash, err)
		}
		// 64-bit s390 and Alpha use 8-byte hash table entries.
		word := int64(4)
		if s.is64 && (s.header.Machine == elf.EM_S390 || s.header.Machine == elf.EM_ALPHA) {
			word = 8
		}
		buf := make([]byte, 2*word)
		if _, err := s.r.ReadAt(buf, off); err != nil {
			return 0, s.errorf("DT_HASH header: %v", err)
		}
		if word == 8 {
			return s.order.Uint64(buf[8:]), nil
		}
		return uint64(s.order.Uint32(buf[4:])), nil
	}
	if s.sections {
		// A section table that cannot be read is passed over, as the
		// loader never reads it.
		var count uint64
		_, _ = s.eachSection(func(h sectionHeader) bool {
			if h.typ == elf.SHT_DYNSYM && h.addr == t.symtab && h.entsize > 0 && h.size/h.entsize <= maxSymbols {
				count = h.size / h.entsize
				return false
			}
			return true
		})
		if count > 0 {
			return count, nil
		}
	}
	if t.haveGnu {
		return s.gnuHashCount(t.gnuHash)
	}
	return 0, s.errorf("no DT_HASH, DT_GNU_HASH or .dynsym section: the number of dynamic symbols is unknown")
}

// gnuHashCount walks a DT_GNU_HASH table: symbols below symoffset are not
// hashed; every hashed symbol is in one chain, chains are laid out in symbol
// order, and the last entry of each chain has its low bit set. The highest
// bucket start therefore leads to the last chain, whose end is the count.
func (s *scanner) gnuHashCount(addr uint64) (uint64, error) {
	off, err := s.vaddrToOffset(addr)
	if err != nil {
		return 0, s.errorf("DT_GNU_HASH %#x: %v", addr, err)
	}
	var hdr [16]byte
	if _, err := s.r.ReadAt(hdr[:], off); err != nil {
		return 0, s.errorf("DT_GNU_HASH header: %v", err)
	}
	nbuckets := uint64(s.order.Uint32(hdr[0:]))
	symoffset := uint64(s.order.Uint32(hdr[4:]))
	bloomSize := uint64(s.order.Uint32(hdr[8:]))
	word := uint64(4)
	if s.is64 {
		word = 8
	}
	rest := uint64(s.size - off - 16)
	if bloomSize > rest/word || nbuckets > (rest-bloomSize*word)/4 {
		return 0, s.errorf("DT_GNU_HASH of %d buckets and %d bloom words runs past the end of the file", nbuckets, bloomSize)
	}
	bucketsOff := off + 16 + int64(bloomSize*word)
	buckets := make([]byte, 4*nbuckets)
	if _, err := s.r.ReadAt(buckets, bucketsOff); err != nil {
		return 0, s.errorf("DT_GNU_HASH buckets: %v", err)
	}
	var last uint64
	for i := uint64(0); i < nbuckets; i++ {
		last = max(last, uint64(s.order.Uint32(buckets[4*i:])))
	}
	if last < symoffset {
		return symoffset, nil
	}
	chainsOff := bucketsOff + int64(4*nbuckets)
	var b [4]byte
	for idx := last; ; idx++ {
		if idx-symoffset > maxSymbols {
			return 0, s.errorf("DT_GNU_HASH chain does not end")
		}
		if _, err := s.r.ReadAt(b[:], chainsOff+int64(4*(idx-symoffset))); err != nil {
			return 0, s.errorf("DT_GNU_HASH chain: %v", err)
		}
		if s.order.Uint32(b[:])&1 != 0 {
			return idx + 1, nil
		}
	}
}

// symtab is an opened dynamic symbol table. A walk of the whole table
// loads the table, its strings and its versions into memory first (tab,
// strData, verData), each with one sequential read; a lookup reads the few
// entries it needs.
type symtab struct {
	s        *scanner
	t        *dynamicTags
	off      int64
	entSize  uint64
	strs     *stringTable
	versions map[uint16]symVersion
	versym   int64

	tab, strData, verData []byte
}

// readDirect reads a large range straight from the file, bypassing (and
// not evicting) the page cache, and counts it.
func (p *pagedReader) readDirect(b []byte, off int64) error {
	if off < 0 || off > p.size || int64(len(b)) > p.size-off {
		return io.ErrUnexpectedEOF
	}
	n, err := p.r.ReadAt(b, off)
	p.stats.Reads++
	p.stats.BytesRead += int64(n)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// load reads the first count entries of the table, the whole string table
// (when DT_STRSZ bounds it) and the version indexes into memory.
func (st *symtab) load(count uint64) error {
	s := st.s
	st.tab = make([]byte, count*st.entSize)
	if err := s.r.readDirect(st.tab, st.off); err != nil {
		return s.errorf("symbol table: %v", err)
	}
	if sz := st.strs.size; sz > 0 && sz <= uint64(s.size-st.strs.off) {
		st.strData = make([]byte, sz)
		if err := s.r.readDirect(st.strData, st.strs.off); err != nil {
			return s.errorf("string table: %v", err)
		}
	}
	if st.versym >= 0 {
		if 2*count > uint64(s.size-st.versym) {
			return s.errorf("DT_VERSYM of %d entries runs past the end of the file", count)
		}
		st.verData = make([]byte, 2*count)
		if err := s.r.readDirect(st.verData, st.versym); err != nil {
			return s.errorf("version table: %v", err)
		}
	}
	return nil
}

func (st *symtab) name(idx uint32) (string, error) {
	if st.strData == nil {
		return st.strs.get(uint64(idx))
	}
	if uint64(idx) >= uint64(len(st.strData)) {
		return "", fmt.Errorf("string index %#x beyond DT_STRSZ %#x", idx, len(st.strData))
	}
	rest := st.strData[idx:]
	end := bytes.IndexByte(rest, 0)
	if end < 0 {
		return "", fmt.Errorf("string at index %#x is not terminated", idx)
	}
	return string(rest[:end]), nil
}

func (s *scanner) openSymtab() (*symtab, error) {
	if !s.symtabDone {
		s.symtab, s.symtabErr = s.readSymtab()
		s.symtabDone = true
	}
	return s.symtab, s.symtabErr
}

// readSymtab opens the dynamic symbol table, nil when there is none.
func (s *scanner) readSymtab() (*symtab, error) {
	t, ok, err := s.dynamicTags()
	if err != nil || !ok || !t.haveSymtab {
		return nil, err
	}
	if !t.haveStrtab {
		return nil, s.errorf("dynamic section has DT_SYMTAB but no DT_STRTAB")
	}
	entSize := uint64(24)
	if !s.is64 {
		entSize = 16
	}
	if t.haveSyment && t.syment != entSize {
		return nil, s.errorf("DT_SYMENT is %d, want %d", t.syment, entSize)
	}
	symOff, err := s.vaddrToOffset(t.symtab)
	if err != nil {
		return nil, s.errorf("DT_SYMTAB %#x: %v", t.symtab, err)
	}
	strOff, err := s.vaddrToOffset(t.strtab)
	if err != nil {
		return nil, s.errorf("DT_STRTAB %#x: %v", t.strtab, err)
	}
	st := &symtab{s: s, t: t, off: symOff, entSize: entSize, strs: &stringTable{s: s, off: strOff, size: t.strsz}}
	st.versions, st.versym, err = s.symbolVersions(t, st.strs)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// entry decodes symbol i, its name only when keep accepts it.
func (st *symtab) entry(i uint64, keep SymbolFilter) (Symbol, bool, error) {
	s := st.s
	if i*st.entSize >= uint64(s.size-st.off) {
		return Symbol{}, false, s.errorf("symbol %d lies outside the file", i)
	}
	var buf []byte
	if st.tab != nil && (i+1)*st.entSize <= uint64(len(st.tab)) {
		buf = st.tab[i*st.entSize : (i+1)*st.entSize]
	} else {
		buf = make([]byte, st.entSize)
		if _, err := s.r.ReadAt(buf, st.off+int64(i*st.entSize)); err != nil {
			return Symbol{}, false, s.errorf("symbol %d: %v", i, err)
		}
	}
	var nameOff uint32
	var info uint8
	var shndx uint16
	var value uint64
	if s.is64 {
		nameOff, info = s.order.Uint32(buf[0:]), buf[4]
		shndx, value = s.order.Uint16(buf[6:]), s.order.Uint64(buf[8:])
	} else {
		nameOff, value = s.order.Uint32(buf[0:]), uint64(s.order.Uint32(buf[4:]))
		info, shndx = buf[12], s.order.Uint16(buf[14:])
	}
	defined := elf.SectionIndex(shndx) != elf.SHN_UNDEF
	name, err := st.name(nameOff)
	if err != nil {
		return Symbol{}, false, s.errorf("name of symbol %d: %v", i, err)
	}
	if keep != nil && !keep(name, defined) {
		return Symbol{}, false, nil
	}
	sym := Symbol{Name: name, Defined: defined, Type: elf.ST_TYPE(info), Bind: elf.ST_BIND(info), Value: value}
	if st.versym >= 0 {
		var vbuf [2]byte
		if st.verData != nil && 2*i+2 <= uint64(len(st.verData)) {
			copy(vbuf[:], st.verData[2*i:])
		} else if _, err := s.r.ReadAt(vbuf[:], st.versym+int64(2*i)); err != nil {
			return Symbol{}, false, s.errorf("version of symbol %d: %v", i, err)
		}
		vs := s.order.Uint16(vbuf[:])
		if idx := vs & 0x7fff; idx > 1 {
			v, ok := st.versions[idx]
			if !ok {
				return Symbol{}, false, s.errorf("symbol %s has version index %d, which no version record defines", name, idx)
			}
			sym.Version, sym.File = v.name, v.file
			sym.Hidden = vs&0x8000 != 0
		}
	}
	return sym, true, nil
}

func (s *scanner) lookup(names []string) ([]Symbol, error) {
	st, err := s.openSymtab()
	if err != nil || st == nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	keep := func(name string, defined bool) bool { return defined && want[name] }
	var out []Symbol
	for _, name := range names {
		if !want[name] {
			continue // asked twice
		}
		var idxs []uint64
		switch {
		case st.t.haveGnu:
			idxs, err = s.gnuChain(st.t.gnuHash, name)
		case st.t.haveHash:
			idxs, err = s.sysvChain(st.t.hash, name)
		default:
			// No hash table: the loader could not look anything up either,
			// but a reader can still walk the table.
			return s.symbolsFrom(st, keep)
		}
		if err != nil {
			return nil, err
		}
		this := func(n string, defined bool) bool { return defined && n == name }
		for _, i := range idxs {
			sym, ok, err := st.entry(i, this)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, sym)
			}
		}
		delete(want, name)
	}
	return out, nil
}

// symbolsFrom walks the whole symbol table.
func (s *scanner) symbolsFrom(st *symtab, keep SymbolFilter) ([]Symbol, error) {
	count, err := s.symbolCount(st.t)
	if err != nil {
		return nil, err
	}
	if count > maxSymbols || count*st.entSize > uint64(s.size-st.off) {
		return nil, s.errorf("symbol table of %d entries at %#x runs past the end of the file", count, st.off)
	}
	if err := st.load(count); err != nil {
		return nil, err
	}
	// The loaded tables serve this walk only.
	defer func() { st.tab, st.strData, st.verData = nil, nil, nil }()
	var out []Symbol
	for i := uint64(1); i < count; i++ {
		sym, ok, err := st.entry(i, keep)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, sym)
		}
	}
	return out, nil
}

// gnuChain returns the indexes of the symbols in name's DT_GNU_HASH chain
// whose hash matches, after the bloom filter lets it through.
func (s *scanner) gnuChain(addr uint64, name string) ([]uint64, error) {
	g, err := s.openGNU(addr)
	if err != nil {
		return nil, err
	}
	var out []uint64
	err = s.walkGNU(g, elfhash.GNU(name), func(idx uint64) (bool, error) {
		out = append(out, idx)
		return true, nil
	})
	return out, err
}

// sysvChain returns the indexes of name's DT_HASH chain; names are compared
// by the caller.
func (s *scanner) sysvChain(addr uint64, name string) ([]uint64, error) {
	off, err := s.vaddrToOffset(addr)
	if err != nil {
		return nil, s.errorf("DT_HASH %#x: %v", addr, err)
	}
	word := int64(4)
	if s.is64 && (s.header.Machine == elf.EM_S390 || s.header.Machine == elf.EM_ALPHA) {
		word = 8
	}
	read := func(at int64) (uint64, error) {
		var b [8]byte
		if _, err := s.r.ReadAt(b[:word], at); err != nil {
			return 0, err
		}
		if word == 8 {
			return s.order.Uint64(b[:]), nil
		}
		return uint64(s.order.Uint32(b[:])), nil
	}
	nbucket, err := read(off)
	if err != nil {
		return nil, s.errorf("DT_HASH header: %v", err)
	}
	nchain, err := read(off + word)
	if err != nil {
		return nil, s.errorf("DT_HASH header: %v", err)
	}
	if nbucket == 0 {
		return nil, nil
	}
	if nbucket > uint64(s.size) || nchain > uint64(s.size) {
		return nil, s.errorf("DT_HASH of %d buckets and %d chains runs past the end of the file", nbucket, nchain)
	}
	h := uint64(elfhash.SysV(name))
	idx, err := read(off + word*int64(2+h%nbucket))
	if err != nil {
		return nil, s.errorf("DT_HASH bucket: %v", err)
	}
	var out []uint64
	for n := uint64(0); idx != 0; n++ {
		if idx >= nchain || n > nchain {
			return nil, s.errorf("DT_HASH chain leaves the table")
		}
		out = append(out, idx)
		if idx, err = read(off + word*int64(2+nbucket+idx)); err != nil {
			return nil, s.errorf("DT_HASH chain: %v", err)
		}
	}
	return out, nil
}
