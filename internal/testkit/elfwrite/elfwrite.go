// Package elfwrite writes small ELF objects that glibc's loader accepts, for any machine, class and byte order: the trees tests build and the demo wheel.
//
// The objects have one PT_LOAD segment that covers the whole file (virtual
// address = file offset), a PT_DYNAMIC segment, an optional PT_INTERP, a
// non-executable PT_GNU_STACK, a dynamic symbol table with a DT_HASH table,
// and optional version needs, version definitions and section headers. They
// carry no code: enough for `ld.so --list` and for readers, not for running.
package elfwrite

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cudadeps/cudadeps/internal/elfhash"
)

// Spec describes one object.
type Spec struct {
	Class   elf.Class   // default ELFCLASS64
	Data    elf.Data    // default ELFDATA2LSB
	Machine elf.Machine // default EM_X86_64
	OSABI   elf.OSABI
	Type    elf.Type // default ET_DYN
	Flags   uint32   // e_flags

	Interp  string
	Soname  string
	Needed  []string
	RPath   *string // DT_RPATH when non-nil (an empty string is a present, empty entry)
	RunPath *string // DT_RUNPATH when non-nil
	Flags1  elf.DynFlag1

	VersionNeeds []VersionNeed
	// VersionDefs are the versions the object defines. When non-empty, a base
	// definition named after Soname is added first, as linkers do.
	VersionDefs []string
	// VersionBase names the base definition instead of Soname (linkers use
	// the output name, which tools such as auditwheel leave behind when they
	// rename a library). When set, the base definition is written even if
	// VersionDefs is empty.
	VersionBase string

	// Symbols are dynamic symbols; Defined ones get a non-zero section index.
	Symbols []Symbol

	// Sections are extra sections with contents (a .nv_fatbin), placed
	// inside the loaded segment after the dynamic section.
	Sections []Section

	NoSectionHeaders bool
	// Static writes the dynamic segment's program header as PT_NULL, so the
	// object reads as statically linked (its dynamic section stays, unused).
	Static bool
}

// VersionNeed lists versions required from one file.
type VersionNeed struct {
	File     string
	Versions []string
	Weak     []bool // optional, parallel to Versions
}

// Symbol is one dynamic symbol.
type Symbol struct {
	Name    string
	Defined bool
	Func    bool
	// Version names a version of VersionDefs (defined symbols) or of
	// VersionNeeds (undefined ones); empty means unversioned.
	Version string
}

// Section is an extra section of an object.
type Section struct {
	Name  string
	Type  elf.SectionType // default SHT_PROGBITS
	Flags elf.SectionFlag // default SHF_ALLOC
	Align int             // default 8
	Data  []byte
}

// Str returns a pointer to s, for Spec.RPath and Spec.RunPath.
func Str(s string) *string { return &s }

// Write builds the object and writes it to path, creating directories.
func Write(path string, spec Spec) error {
	b, err := Build(spec)
	return writeBuilt(path, b, err)
}

// writeBuilt writes what a builder made, creating directories.
func writeBuilt(path string, b []byte, err error) error {
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o755)
}

// Hash is the System V ELF hash used in version records.
func Hash(name string) uint32 { return elfhash.SysV(name) }

type builder struct {
	spec  Spec
	is64  bool
	order binary.ByteOrder
	buf   bytes.Buffer
	strs  bytes.Buffer
	index map[string]uint32
}

func (b *builder) str(s string) uint32 {
	if off, ok := b.index[s]; ok {
		return off
	}
	off := uint32(b.strs.Len())
	b.strs.WriteString(s)
	b.strs.WriteByte(0)
	b.index[s] = off
	return off
}

func (b *builder) word(v uint32)  { _ = binary.Write(&b.buf, b.order, v) }
func (b *builder) half(v uint16)  { _ = binary.Write(&b.buf, b.order, v) }
func (b *builder) xword(v uint64) { _ = binary.Write(&b.buf, b.order, v) }

func (b *builder) align(n int) {
	for b.buf.Len()%n != 0 {
		b.buf.WriteByte(0)
	}
}

type section struct {
	name      string
	typ       elf.SectionType
	flags     elf.SectionFlag
	off, size uint64
	link      uint32
	info      uint32
	align     uint64
	entsize   uint64
}

// Build returns the bytes of the object.
func Build(spec Spec) ([]byte, error) {
	if spec.Class == elf.ELFCLASSNONE {
		spec.Class = elf.ELFCLASS64
	}
	if spec.Data == elf.ELFDATANONE {
		spec.Data = elf.ELFDATA2LSB
	}
	if spec.Machine == elf.EM_NONE {
		spec.Machine = elf.EM_X86_64
	}
	if spec.Type == elf.ET_NONE {
		spec.Type = elf.ET_DYN
	}
	b := &builder{spec: spec, is64: spec.Class == elf.ELFCLASS64, index: map[string]uint32{}}
	if spec.Data == elf.ELFDATA2MSB {
		b.order = binary.BigEndian
	} else {
		b.order = binary.LittleEndian
	}
	return b.build()
}

func (b *builder) build() ([]byte, error) {
	s := b.spec
	ehsize, phentsize, shentsize := 52, 32, 40
	dynent, syment := 8, 16
	if b.is64 {
		ehsize, phentsize, shentsize = 64, 56, 64
		dynent, syment = 16, 24
	}
	b.str("") // index 0 is the empty string

	// Version indexes: 0 local, 1 global, then definitions, then needs.
	verIndex := map[string]uint16{}
	next := uint16(2)
	var defNames []string // the base definition first
	if len(s.VersionDefs) > 0 || s.VersionBase != "" {
		base := s.VersionBase
		if base == "" {
			base = s.Soname
		}
		defNames = append([]string{base}, s.VersionDefs...)
		next = 1 // the base definition takes index 1
		for _, v := range defNames {
			verIndex[v] = next // a version named like the base wins over it
			next++
		}
	}
	needIndex := map[string]uint16{}
	for _, vn := range s.VersionNeeds {
		for _, v := range vn.Versions {
			if _, ok := needIndex[v]; !ok {
				needIndex[v] = next
				next++
			}
		}
	}
	// Intern every string first so the string table is final before layout.
	for _, n := range s.Needed {
		b.str(n)
	}
	if s.Soname != "" {
		b.str(s.Soname)
	}
	if s.RPath != nil {
		b.str(*s.RPath)
	}
	if s.RunPath != nil {
		b.str(*s.RunPath)
	}
	for _, vn := range s.VersionNeeds {
		b.str(vn.File)
		for _, v := range vn.Versions {
			b.str(v)
		}
	}
	for _, v := range defNames {
		b.str(v)
	}
	for _, sym := range s.Symbols {
		b.str(sym.Name)
	}

	nph := 3 // PT_LOAD, PT_DYNAMIC, PT_GNU_STACK
	if s.Interp != "" {
		nph++
	}
	phoff := uint64(ehsize)
	b.buf.Write(make([]byte, ehsize+nph*phentsize))

	var secs []section
	var interpOff uint64
	if s.Interp != "" {
		interpOff = uint64(b.buf.Len())
		b.buf.WriteString(s.Interp)
		b.buf.WriteByte(0)
		secs = append(secs, section{name: ".interp", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, off: interpOff, size: uint64(len(s.Interp) + 1), align: 1})
	}

	// Dynamic symbols (null symbol first).
	b.align(8)
	symOff := uint64(b.buf.Len())
	nsyms := len(s.Symbols) + 1
	b.buf.Write(make([]byte, syment))
	for _, sym := range s.Symbols {
		shndx := uint16(0)
		if sym.Defined {
			shndx = 1 // any defined section; nothing is ever relocated
		}
		typ := elf.STT_OBJECT
		if sym.Func {
			typ = elf.STT_FUNC
		}
		info := elf.ST_INFO(elf.STB_GLOBAL, typ)
		name := b.index[sym.Name]
		if b.is64 {
			b.word(name)
			b.buf.WriteByte(info)
			b.buf.WriteByte(0)
			b.half(shndx)
			b.xword(0)
			b.xword(0)
		} else {
			b.word(name)
			b.word(0)
			b.word(0)
			b.buf.WriteByte(info)
			b.buf.WriteByte(0)
			b.half(shndx)
		}
	}
	symSize := uint64(b.buf.Len()) - symOff

	// DT_HASH with one bucket chaining every symbol.
	b.align(4)
	hashOff := uint64(b.buf.Len())
	b.word(1)
	b.word(uint32(nsyms))
	if nsyms > 1 {
		b.word(1)
	} else {
		b.word(0)
	}
	for i := 0; i < nsyms; i++ {
		if i == 0 || i+1 >= nsyms {
			b.word(0)
		} else {
			b.word(uint32(i + 1))
		}
	}
	hashSize := uint64(b.buf.Len()) - hashOff

	haveVersions := len(defNames) > 0 || len(s.VersionNeeds) > 0
	var versymOff, versymSize uint64
	if haveVersions {
		b.align(2)
		versymOff = uint64(b.buf.Len())
		b.half(0)
		for _, sym := range s.Symbols {
			idx := uint16(1)
			if sym.Version != "" {
				if sym.Defined {
					idx = verIndex[sym.Version]
				} else {
					idx = needIndex[sym.Version]
				}
				if idx == 0 {
					return nil, fmt.Errorf("symbol %s: unknown version %s", sym.Name, sym.Version)
				}
			}
			b.half(idx)
		}
		versymSize = uint64(b.buf.Len()) - versymOff
	}

	var verneedOff, verneedSize uint64
	if len(s.VersionNeeds) > 0 {
		b.align(4)
		verneedOff = uint64(b.buf.Len())
		for i, vn := range s.VersionNeeds {
			b.half(1)
			b.half(uint16(len(vn.Versions)))
			b.word(b.index[vn.File])
			b.word(16)
			if i == len(s.VersionNeeds)-1 {
				b.word(0)
			} else {
				b.word(uint32(16 + 16*len(vn.Versions)))
			}
			for j, v := range vn.Versions {
				b.word(Hash(v))
				flags := uint16(0)
				if j < len(vn.Weak) && vn.Weak[j] {
					flags = 2
				}
				b.half(flags)
				b.half(needIndex[v])
				b.word(b.index[v])
				if j == len(vn.Versions)-1 {
					b.word(0)
				} else {
					b.word(16)
				}
			}
		}
		verneedSize = uint64(b.buf.Len()) - verneedOff
	}

	var verdefOff, verdefSize uint64
	if len(defNames) > 0 {
		b.align(4)
		verdefOff = uint64(b.buf.Len())
		names := defNames
		for i, v := range names {
			b.half(1)
			if i == 0 {
				b.half(1) // VER_FLG_BASE
			} else {
				b.half(0)
			}
			b.half(uint16(i + 1))
			b.half(1)
			b.word(Hash(v))
			b.word(20)
			if i == len(names)-1 {
				b.word(0)
			} else {
				b.word(28)
			}
			b.word(b.index[v])
			b.word(0)
		}
		verdefSize = uint64(b.buf.Len()) - verdefOff
	}

	strOff := uint64(b.buf.Len())
	b.buf.Write(b.strs.Bytes())
	strSize := uint64(b.strs.Len())

	// The dynamic array.
	b.align(8)
	dynOff := uint64(b.buf.Len())
	dyn := func(tag elf.DynTag, val uint64) {
		if b.is64 {
			b.xword(uint64(tag))
			b.xword(val)
		} else {
			b.word(uint32(tag))
			b.word(uint32(val))
		}
	}
	for _, n := range s.Needed {
		dyn(elf.DT_NEEDED, uint64(b.index[n]))
	}
	if s.Soname != "" {
		dyn(elf.DT_SONAME, uint64(b.index[s.Soname]))
	}
	if s.RPath != nil {
		dyn(elf.DT_RPATH, uint64(b.index[*s.RPath]))
	}
	if s.RunPath != nil {
		dyn(elf.DT_RUNPATH, uint64(b.index[*s.RunPath]))
	}
	dyn(elf.DT_HASH, hashOff)
	dyn(elf.DT_STRTAB, strOff)
	dyn(elf.DT_SYMTAB, symOff)
	dyn(elf.DT_STRSZ, strSize)
	dyn(elf.DT_SYMENT, uint64(syment))
	if haveVersions {
		dyn(elf.DT_VERSYM, versymOff)
	}
	if len(s.VersionNeeds) > 0 {
		dyn(elf.DT_VERNEED, verneedOff)
		dyn(elf.DT_VERNEEDNUM, uint64(len(s.VersionNeeds)))
	}
	if len(defNames) > 0 {
		dyn(elf.DT_VERDEF, verdefOff)
		dyn(elf.DT_VERDEFNUM, uint64(len(defNames)))
	}
	if s.Flags1 != 0 {
		dyn(elf.DT_FLAGS_1, uint64(s.Flags1))
	}
	dyn(elf.DT_NULL, 0)
	dynSize := uint64(b.buf.Len()) - dynOff

	secs = append(secs,
		section{name: ".dynsym", typ: elf.SHT_DYNSYM, flags: elf.SHF_ALLOC, off: symOff, size: symSize, link: 0 /* patched */, info: 1, align: 8, entsize: uint64(syment)},
		section{name: ".hash", typ: elf.SHT_HASH, flags: elf.SHF_ALLOC, off: hashOff, size: hashSize, align: 4, entsize: 4},
	)
	if haveVersions {
		secs = append(secs, section{name: ".gnu.version", typ: elf.SHT_GNU_VERSYM, flags: elf.SHF_ALLOC, off: versymOff, size: versymSize, align: 2, entsize: 2})
	}
	if verneedSize > 0 {
		secs = append(secs, section{name: ".gnu.version_r", typ: elf.SHT_GNU_VERNEED, flags: elf.SHF_ALLOC, off: verneedOff, size: verneedSize, info: uint32(len(s.VersionNeeds)), align: 4})
	}
	if verdefSize > 0 {
		secs = append(secs, section{name: ".gnu.version_d", typ: elf.SHT_GNU_VERDEF, flags: elf.SHF_ALLOC, off: verdefOff, size: verdefSize, info: uint32(len(defNames)), align: 4})
	}
	secs = append(secs,
		section{name: ".dynstr", typ: elf.SHT_STRTAB, flags: elf.SHF_ALLOC, off: strOff, size: strSize, align: 1},
		section{name: ".dynamic", typ: elf.SHT_DYNAMIC, flags: elf.SHF_ALLOC | elf.SHF_WRITE, off: dynOff, size: dynSize, align: 8, entsize: uint64(dynent)},
	)
	for _, x := range s.Sections {
		align := x.Align
		if align <= 0 {
			align = 8
		}
		typ, flags := x.Type, x.Flags
		if typ == elf.SHT_NULL {
			typ = elf.SHT_PROGBITS
		}
		if flags == 0 {
			flags = elf.SHF_ALLOC
		}
		b.align(align)
		off := uint64(b.buf.Len())
		b.buf.Write(x.Data)
		secs = append(secs, section{name: x.Name, typ: typ, flags: flags, off: off, size: uint64(len(x.Data)), align: uint64(align)})
	}
	loadEnd := uint64(b.buf.Len())

	var shoff uint64
	var shnum, shstrndx uint16
	if !s.NoSectionHeaders {
		// Section indexes start at 1 (0 is the null section).
		idx := map[string]uint32{}
		for i, sec := range secs {
			idx[sec.name] = uint32(i + 1)
		}
		for i := range secs {
			switch secs[i].typ {
			case elf.SHT_DYNSYM, elf.SHT_HASH, elf.SHT_GNU_VERSYM:
				secs[i].link = idx[".dynsym"]
				if secs[i].typ == elf.SHT_DYNSYM {
					secs[i].link = idx[".dynstr"]
				}
			case elf.SHT_GNU_VERNEED, elf.SHT_GNU_VERDEF, elf.SHT_DYNAMIC:
				secs[i].link = idx[".dynstr"]
			}
		}
		var shstr bytes.Buffer
		shstr.WriteByte(0)
		nameOff := map[string]uint32{}
		for _, sec := range append(secs, section{name: ".shstrtab"}) {
			nameOff[sec.name] = uint32(shstr.Len())
			shstr.WriteString(sec.name)
			shstr.WriteByte(0)
		}
		shstrOff := uint64(b.buf.Len())
		b.buf.Write(shstr.Bytes())
		secs = append(secs, section{name: ".shstrtab", typ: elf.SHT_STRTAB, off: shstrOff, size: uint64(shstr.Len()), align: 1})
		b.align(8)
		shoff = uint64(b.buf.Len())
		b.buf.Write(make([]byte, shentsize)) // null section
		for _, sec := range secs {
			b.word(nameOff[sec.name])
			b.word(uint32(sec.typ))
			addr := sec.off
			if sec.flags&elf.SHF_ALLOC == 0 {
				addr = 0
			}
			if b.is64 {
				b.xword(uint64(sec.flags))
				b.xword(addr)
				b.xword(sec.off)
				b.xword(sec.size)
				b.word(sec.link)
				b.word(sec.info)
				b.xword(sec.align)
				b.xword(sec.entsize)
			} else {
				b.word(uint32(sec.flags))
				b.word(uint32(addr))
				b.word(uint32(sec.off))
				b.word(uint32(sec.size))
				b.word(sec.link)
				b.word(sec.info)
				b.word(uint32(sec.align))
				b.word(uint32(sec.entsize))
			}
		}
		shnum = uint16(len(secs) + 1)
		shstrndx = uint16(len(secs))
	}

	out := b.buf.Bytes()
	// ELF header.
	var h bytes.Buffer
	h.Write([]byte(elf.ELFMAG))
	h.WriteByte(byte(s.Class))
	h.WriteByte(byte(s.Data))
	h.WriteByte(byte(elf.EV_CURRENT))
	h.WriteByte(byte(s.OSABI))
	h.Write(make([]byte, 8))
	w := func(v any) { _ = binary.Write(&h, b.order, v) }
	w(uint16(s.Type))
	w(uint16(s.Machine))
	w(uint32(elf.EV_CURRENT))
	if b.is64 {
		w(uint64(0)) // entry
		w(phoff)
		w(shoff)
	} else {
		w(uint32(0))
		w(uint32(phoff))
		w(uint32(shoff))
	}
	w(s.Flags)
	w(uint16(ehsize))
	w(uint16(phentsize))
	w(uint16(nph))
	w(uint16(shentsize))
	w(shnum)
	w(shstrndx)
	// Program headers.
	ph := func(typ elf.ProgType, flags elf.ProgFlag, off, filesz, align uint64) {
		w(uint32(typ))
		if b.is64 {
			w(uint32(flags))
			w(off)
			w(off) // vaddr
			w(off) // paddr
			w(filesz)
			w(filesz)
			w(align)
		} else {
			w(uint32(off))
			w(uint32(off))
			w(uint32(off))
			w(uint32(filesz))
			w(uint32(filesz))
			w(uint32(flags))
			w(uint32(align))
		}
	}
	if s.Interp != "" {
		ph(elf.PT_INTERP, elf.PF_R, interpOff, uint64(len(s.Interp)+1), 1)
	}
	ph(elf.PT_LOAD, elf.PF_R|elf.PF_W, 0, loadEnd, 0x1000)
	dynType := elf.PT_DYNAMIC
	if s.Static {
		dynType = elf.PT_NULL
	}
	ph(dynType, elf.PF_R|elf.PF_W, dynOff, dynSize, 8)
	ph(elf.PT_GNU_STACK, elf.PF_R|elf.PF_W, 0, 0, 16)
	copy(out, h.Bytes())
	return out, nil
}
