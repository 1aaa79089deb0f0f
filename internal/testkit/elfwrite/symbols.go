package elfwrite

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/cudadeps/cudadeps/internal/elfhash"
)

// Linked describes a 64-bit little-endian shared object whose symbols
// bind: definitions with values, and references that relocations make the
// loader look up, so that `ldd -r` (and a real dlopen) judges them. It
// carries no code; the relocations fill data slots.
type Linked struct {
	Machine elf.Machine // EM_X86_64 (default) or EM_AARCH64
	Soname  string
	Needed  []string
	RPath   *string // DT_RPATH when non-nil
	RunPath *string

	// VersionDefs are the versions the object defines; a base definition
	// named after Soname comes first when there are any.
	VersionDefs  []string
	VersionNeeds []VersionNeed

	Defs []Def
	Refs []Ref

	// GNUHash writes DT_GNU_HASH (with a bloom filter) instead of DT_HASH.
	GNUHash bool
}

// Def is a defined dynamic symbol.
type Def struct {
	Name string
	// Version names one of VersionDefs; Hidden makes it a non-default
	// version (name@VER rather than name@@VER).
	Version string
	Hidden  bool
	Weak    bool        // STB_WEAK
	Local   bool        // STB_LOCAL
	Unique  bool        // STB_GNU_UNIQUE
	Type    elf.SymType // default STT_OBJECT
	Vis     elf.SymVis  // default STV_DEFAULT
	// Undefined writes the symbol with SHN_UNDEF and a value, like a
	// program's PLT entry: not a definition for the loader.
	Undefined bool
	// NoValue writes a zero value.
	NoValue bool
}

// Ref is an undefined dynamic symbol with a relocation against it.
type Ref struct {
	Name    string
	Version string // one of the versions of VersionNeeds
	Weak    bool
	// Unrelocated leaves the symbol in the table with no relocation
	// against it, as linkers do when the code that used it was dropped:
	// ld.so never looks such a symbol up.
	Unrelocated bool
}

// WriteLinked builds the object and writes it to path, creating directories.
func WriteLinked(path string, spec Linked) error {
	b, err := BuildLinked(spec)
	return writeBuilt(path, b, err)
}

// linkedSym is a symbol table entry in the making.
type linkedSym struct {
	name    string
	info    byte
	other   byte
	shndx   uint16
	versym  uint16
	hashed  bool
	hashVal uint32
	noValue bool
	noReloc bool
}

// BuildLinked returns the bytes of the object.
func BuildLinked(spec Linked) ([]byte, error) {
	if spec.Machine == elf.EM_NONE {
		spec.Machine = elf.EM_X86_64
	}
	var globDat uint32
	switch spec.Machine {
	case elf.EM_X86_64:
		globDat = uint32(elf.R_X86_64_GLOB_DAT)
	case elf.EM_AARCH64:
		globDat = uint32(elf.R_AARCH64_GLOB_DAT)
	default:
		return nil, fmt.Errorf("elfwrite: no relocation type for %v", spec.Machine)
	}
	le := binary.LittleEndian
	strs := &bytes.Buffer{}
	strIdx := map[string]uint32{}
	str := func(s string) uint32 {
		if off, ok := strIdx[s]; ok {
			return off
		}
		off := uint32(strs.Len())
		strs.WriteString(s)
		strs.WriteByte(0)
		strIdx[s] = off
		return off
	}
	str("")

	// Version indexes: the base definition 1, then definitions, then needs.
	verIndex := map[string]uint16{}
	var defNames []string
	next := uint16(2)
	if len(spec.VersionDefs) > 0 {
		defNames = append([]string{spec.Soname}, spec.VersionDefs...)
		for i, v := range defNames {
			verIndex[v] = uint16(i + 1)
		}
		next = uint16(len(defNames) + 1)
	}
	needIndex := map[string]uint16{}
	for _, vn := range spec.VersionNeeds {
		for _, v := range vn.Versions {
			if _, ok := needIndex[v]; !ok {
				needIndex[v] = next
				next++
			}
		}
	}
	versioned := len(defNames) > 0 || len(spec.VersionNeeds) > 0

	// Symbols: references (not hashed) first, then definitions, sorted by
	// bucket as DT_GNU_HASH requires. Buckets and bloom words grow with
	// the definitions, as a linker sizes them: a large table has short
	// chains and a filter that rules most names out.
	nbuckets := uint32(max(3, len(spec.Defs)/4))
	bloomWords := uint32(1)
	for bloomWords*32 < uint32(len(spec.Defs)) {
		bloomWords *= 2
	}
	syms := []linkedSym{{}}
	for _, r := range spec.Refs {
		bind := elf.STB_GLOBAL
		if r.Weak {
			bind = elf.STB_WEAK
		}
		vs := uint16(1)
		if r.Version != "" {
			if vs = needIndex[r.Version]; vs == 0 {
				return nil, fmt.Errorf("elfwrite: reference %s: version %s is not needed", r.Name, r.Version)
			}
		}
		syms = append(syms, linkedSym{name: r.Name, info: elf.ST_INFO(bind, elf.STT_NOTYPE), versym: vs, noReloc: r.Unrelocated})
	}
	firstDef := len(syms)
	for _, d := range spec.Defs {
		bind, typ := elf.STB_GLOBAL, d.Type
		switch {
		case d.Weak:
			bind = elf.STB_WEAK
		case d.Local:
			bind = elf.STB_LOCAL
		case d.Unique:
			bind = elf.SymBind(10)
		}
		if typ == elf.STT_NOTYPE {
			typ = elf.STT_OBJECT
		}
		vs := uint16(1)
		if d.Version != "" {
			if vs = verIndex[d.Version]; vs == 0 {
				return nil, fmt.Errorf("elfwrite: definition %s: version %s is not defined", d.Name, d.Version)
			}
		}
		if d.Hidden {
			vs |= 0x8000
		}
		shndx := uint16(1)
		if d.Undefined {
			shndx = 0
		}
		syms = append(syms, linkedSym{name: d.Name, info: elf.ST_INFO(bind, typ), other: byte(d.Vis), shndx: shndx, versym: vs, hashed: true, hashVal: elfhash.GNU(d.Name), noValue: d.NoValue})
	}
	if spec.GNUHash {
		defs := syms[firstDef:]
		sort.SliceStable(defs, func(i, j int) bool { return defs[i].hashVal%nbuckets < defs[j].hashVal%nbuckets })
	}

	// Layout: headers, then tables, then the data slots the relocations
	// fill and the definitions point at.
	const ehsize, phentsize, nph = 64, 56, 3
	buf := &bytes.Buffer{}
	buf.Write(make([]byte, ehsize+nph*phentsize))
	align := func(n int) {
		for buf.Len()%n != 0 {
			buf.WriteByte(0)
		}
	}
	w := func(v any) { _ = binary.Write(buf, le, v) }

	for i := range syms {
		str(syms[i].name)
	}
	for _, n := range spec.Needed {
		str(n)
	}
	if spec.Soname != "" {
		str(spec.Soname)
	}
	if spec.RPath != nil {
		str(*spec.RPath)
	}
	if spec.RunPath != nil {
		str(*spec.RunPath)
	}
	for _, vn := range spec.VersionNeeds {
		str(vn.File)
		for _, v := range vn.Versions {
			str(v)
		}
	}
	for _, v := range defNames {
		str(v)
	}

	// Data slots come last; their addresses are known once the tables are
	// laid out, so the tables are written with placeholders and patched.
	align(8)
	symOff := buf.Len()
	buf.Write(make([]byte, 24*len(syms)))

	var hashOff int
	if spec.GNUHash {
		align(8)
		hashOff = buf.Len()
		symoffset := uint32(firstDef)
		w(nbuckets)
		w(symoffset)
		w(bloomWords)
		w(uint32(6)) // shift
		bloom := make([]uint64, bloomWords)
		for _, s := range syms[firstDef:] {
			bloom[(s.hashVal/64)&(bloomWords-1)] |= 1<<(s.hashVal%64) | 1<<((s.hashVal>>6)%64)
		}
		w(bloom)
		buckets := make([]uint32, nbuckets)
		for i := len(syms) - 1; i >= firstDef; i-- {
			buckets[syms[i].hashVal%nbuckets] = uint32(i)
		}
		for _, b := range buckets {
			w(b)
		}
		for i := firstDef; i < len(syms); i++ {
			v := syms[i].hashVal &^ 1
			if i == len(syms)-1 || syms[i+1].hashVal%nbuckets != syms[i].hashVal%nbuckets {
				v |= 1
			}
			w(v)
		}
	} else {
		align(4)
		hashOff = buf.Len()
		// One bucket chaining every symbol in table order, the order of
		// the DT_GNU_HASH chains.
		w(uint32(1))
		w(uint32(len(syms)))
		if len(syms) > 1 {
			w(uint32(1))
		} else {
			w(uint32(0))
		}
		for i := range syms {
			if i == 0 || i+1 >= len(syms) {
				w(uint32(0))
			} else {
				w(uint32(i + 1))
			}
		}
	}

	var versymOff, verneedOff, verdefOff int
	if versioned {
		align(2)
		versymOff = buf.Len()
		for i, s := range syms {
			if i == 0 {
				w(uint16(0))
				continue
			}
			w(s.versym)
		}
	}
	if len(spec.VersionNeeds) > 0 {
		align(4)
		verneedOff = buf.Len()
		for i, vn := range spec.VersionNeeds {
			w(uint16(1))
			w(uint16(len(vn.Versions)))
			w(strIdx[vn.File])
			w(uint32(16))
			if i == len(spec.VersionNeeds)-1 {
				w(uint32(0))
			} else {
				w(uint32(16 + 16*len(vn.Versions)))
			}
			for j, v := range vn.Versions {
				w(Hash(v))
				flags := uint16(0)
				if j < len(vn.Weak) && vn.Weak[j] {
					flags = 2
				}
				w(flags)
				w(needIndex[v])
				w(strIdx[v])
				if j == len(vn.Versions)-1 {
					w(uint32(0))
				} else {
					w(uint32(16))
				}
			}
		}
	}
	if len(defNames) > 0 {
		align(4)
		verdefOff = buf.Len()
		for i, v := range defNames {
			w(uint16(1))
			if i == 0 {
				w(uint16(1)) // VER_FLG_BASE
			} else {
				w(uint16(0))
			}
			w(uint16(i + 1))
			w(uint16(1))
			w(Hash(v))
			w(uint32(20))
			if i == len(defNames)-1 {
				w(uint32(0))
			} else {
				w(uint32(28))
			}
			w(strIdx[v])
			w(uint32(0))
		}
	}
	strOff := buf.Len()
	buf.Write(strs.Bytes())

	relocs := 0
	for _, r := range spec.Refs {
		if !r.Unrelocated {
			relocs++
		}
	}
	align(8)
	relaOff := buf.Len()
	buf.Write(make([]byte, 24*relocs))

	align(8)
	dynOff := buf.Len()
	dyn := func(tag elf.DynTag, val uint64) { w(uint64(tag)); w(val) }
	for _, n := range spec.Needed {
		dyn(elf.DT_NEEDED, uint64(strIdx[n]))
	}
	if spec.Soname != "" {
		dyn(elf.DT_SONAME, uint64(strIdx[spec.Soname]))
	}
	if spec.RPath != nil {
		dyn(elf.DT_RPATH, uint64(strIdx[*spec.RPath]))
	}
	if spec.RunPath != nil {
		dyn(elf.DT_RUNPATH, uint64(strIdx[*spec.RunPath]))
	}
	if spec.GNUHash {
		dyn(elf.DT_GNU_HASH, uint64(hashOff))
	} else {
		dyn(elf.DT_HASH, uint64(hashOff))
	}
	dyn(elf.DT_STRTAB, uint64(strOff))
	dyn(elf.DT_SYMTAB, uint64(symOff))
	dyn(elf.DT_STRSZ, uint64(strs.Len()))
	dyn(elf.DT_SYMENT, 24)
	if relocs > 0 {
		dyn(elf.DT_RELA, uint64(relaOff))
		dyn(elf.DT_RELASZ, uint64(24*relocs))
		dyn(elf.DT_RELAENT, 24)
	}
	if versioned {
		dyn(elf.DT_VERSYM, uint64(versymOff))
	}
	if len(spec.VersionNeeds) > 0 {
		dyn(elf.DT_VERNEED, uint64(verneedOff))
		dyn(elf.DT_VERNEEDNUM, uint64(len(spec.VersionNeeds)))
	}
	if len(defNames) > 0 {
		dyn(elf.DT_VERDEF, uint64(verdefOff))
		dyn(elf.DT_VERDEFNUM, uint64(len(defNames)))
	}
	dyn(elf.DT_NULL, 0)
	dynSize := buf.Len() - dynOff

	// One 8-byte slot per symbol: definitions point at theirs, relocations
	// write into the references'.
	align(8)
	slotsOff := buf.Len()
	buf.Write(make([]byte, 8*len(syms)))
	end := buf.Len()

	out := buf.Bytes()
	for i, s := range syms {
		if i == 0 {
			continue
		}
		e := out[symOff+24*i:]
		le.PutUint32(e[0:], strIdx[s.name])
		e[4], e[5] = s.info, s.other
		le.PutUint16(e[6:], s.shndx)
		if s.hashed && !s.noValue {
			le.PutUint64(e[8:], uint64(slotsOff+8*i))
			le.PutUint64(e[16:], 8)
		}
	}
	ri := 0
	for i, s := range syms {
		if i == 0 || s.hashed || s.noReloc {
			continue
		}
		e := out[relaOff+24*ri:]
		le.PutUint64(e[0:], uint64(slotsOff+8*i))
		le.PutUint64(e[8:], uint64(i)<<32|uint64(globDat))
		le.PutUint64(e[16:], 0)
		ri++
	}

	hb := &bytes.Buffer{}
	hw := func(v any) { _ = binary.Write(hb, le, v) }
	hb.Write([]byte(elf.ELFMAG))
	hb.Write([]byte{byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT), 0})
	hb.Write(make([]byte, 8))
	hw(uint16(elf.ET_DYN))
	hw(uint16(spec.Machine))
	hw(uint32(elf.EV_CURRENT))
	hw(uint64(0))      // entry
	hw(uint64(ehsize)) // phoff
	hw(uint64(0))      // shoff
	hw(uint32(0))      // flags
	hw(uint16(ehsize))
	hw(uint16(phentsize))
	hw(uint16(nph))
	hw(uint16(64))
	hw(uint16(0))
	hw(uint16(0))
	ph := func(typ elf.ProgType, flags elf.ProgFlag, off, size, align uint64) {
		hw(uint32(typ))
		hw(uint32(flags))
		hw(off)
		hw(off)
		hw(off)
		hw(size)
		hw(size)
		hw(align)
	}
	ph(elf.PT_LOAD, elf.PF_R|elf.PF_W, 0, uint64(end), 0x1000)
	ph(elf.PT_DYNAMIC, elf.PF_R|elf.PF_W, uint64(dynOff), uint64(dynSize), 8)
	ph(elf.PT_GNU_STACK, elf.PF_R|elf.PF_W, 0, 0, 16)
	copy(out, hb.Bytes())
	return out, nil
}
