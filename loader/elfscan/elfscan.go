// Package elfscan reads the dynamic-linking facts of one ELF object cheaply and safely.
//
// It reads what glibc's dynamic loader reads: the ELF header, the program
// headers and the PT_DYNAMIC segment, then only the strings and version
// records that the dynamic entries point at. The header and program headers
// are checked as the standard library's debug/elf checks them (readHeaders);
// the dynamic segment is walked through the program headers, as ld.so does,
// so files without (or with damaged) section headers read the same. A 450 MB
// library costs a few pages, not the file.
package elfscan

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ErrNotELF reports a file that is not an ELF object at all (a linker script
// such as libc.so, a Python file, a text file). Scanners skip these quietly.
var ErrNotELF = errors.New("not an ELF file")

// FormatError reports an ELF file that cannot be read as one.
type FormatError struct {
	Path string // file name as given, may be empty
	Msg  string
}

func (e *FormatError) Error() string {
	if e.Path == "" {
		return "malformed ELF: " + e.Msg
	}
	return e.Path + ": malformed ELF: " + e.Msg
}

// Info holds the dynamic-linking facts of one ELF object.
type Info struct {
	Class      elf.Class
	Data       elf.Data
	Machine    elf.Machine
	OSABI      elf.OSABI
	ABIVersion uint8
	Type       elf.Type
	Flags      uint32 // e_flags (float ABI on ARM, ISA on RISC-V, ...)
	Version    uint32 // e_version
	Ident      [elf.EI_NIDENT]byte
	Phentsize  uint16

	Interp string // PT_INTERP, empty when absent

	Dynamic    bool // has a PT_DYNAMIC segment
	Soname     string
	Needed     []string // DT_NEEDED in file order
	RPath      string   // DT_RPATH, raw (tokens unexpanded)
	HasRPath   bool
	RunPath    string // DT_RUNPATH, raw
	HasRunPath bool
	Flags1     elf.DynFlag1 // DT_FLAGS_1
	DynFlags   elf.DynFlag  // DT_FLAGS

	VersionNeeds []VersionNeed // DT_VERNEED
	VersionDefs  []VersionDef  // DT_VERDEF
}

// VersionNeed lists the symbol versions an object requires from one file.
type VersionNeed struct {
	File     string // the soname the versions are needed from (vn_file)
	Versions []NeededVersion
}

// NeededVersion is one Elf_Vernaux record.
type NeededVersion struct {
	Name  string
	Hash  uint32
	Flags uint16 // VER_FLG_WEAK = 0x2
	Index uint16
}

// Weak reports a version whose absence is not fatal to ld.so.
func (v NeededVersion) Weak() bool { return v.Flags&verFlagWeak != 0 }

// VersionDef is one Elf_Verdef record: a version the object defines.
type VersionDef struct {
	Name    string
	Hash    uint32
	Flags   uint16 // VER_FLG_BASE = 0x1 marks the file's own name
	Index   uint16
	Parents []string
}

// Base reports the definition that names the file itself, not a version.
func (v VersionDef) Base() bool { return v.Flags&verFlagBase != 0 }

const (
	verFlagBase = 0x1
	verFlagWeak = 0x2
)

// NoDefaultLib reports DF_1_NODEFLIB: ld.so.cache entries in the default
// directories and the default directories themselves are not searched.
func (in *Info) NoDefaultLib() bool { return in.Flags1&elf.DF_1_NODEFLIB != 0 }

// HasVersion reports whether the object defines a version with this name
// and ELF hash, the test ld.so applies (the base definition, which carries
// the file's own name, counts too).
func (in *Info) HasVersion(name string, hash uint32) bool {
	for _, d := range in.VersionDefs {
		if d.Hash == hash && d.Name == name {
			return true
		}
	}
	return false
}

// DefinesVersion reports whether a non-base version called name is defined.
func (in *Info) DefinesVersion(name string) bool {
	for _, d := range in.VersionDefs {
		if !d.Base() && d.Name == name {
			return true
		}
	}
	return false
}

// String describes the object class and machine the way file(1) would.
func (in *Info) String() string {
	return fmt.Sprintf("%s %s %s %s", in.Class, in.Data, in.Machine, in.Type)
}

func notELF(name string) error {
	if name == "" {
		return ErrNotELF
	}
	return fmt.Errorf("%s: %w", name, ErrNotELF)
}

// scanner walks one file.
type scanner struct {
	r      *pagedReader
	size   int64
	name   string
	order  byteOrder
	is64   bool
	header elf.FileHeader
	progs  []elf.ProgHeader
	// sections says whether the section header table may be read for the
	// number of dynamic symbols (see symbolCount).
	sections bool

	// The dynamic symbol table, once opened: References and SymbolTable
	// of one File open it once.
	symtab     *symtab
	symtabErr  error
	symtabDone bool
}

func newScanner(r *pagedReader, size int64, name string, skipSections bool) (*scanner, error) {
	fh, progs, err := readHeaders(r, size)
	if err != nil {
		return nil, &FormatError{Path: name, Msg: trimELFError(err)}
	}
	return &scanner{r: r, size: size, name: name, header: fh, progs: progs,
		order: byteOrder{big: fh.Data == elf.ELFDATA2MSB}, is64: fh.Class == elf.ELFCLASS64, sections: !skipSections}, nil
}

// byteOrder decodes the object's integers. It is a concrete type, not
// binary.ByteOrder: a call through an interface makes every small buffer
// passed to it escape to the heap, one allocation per field read.
type byteOrder struct{ big bool }

func (o byteOrder) Uint16(b []byte) uint16 {
	if o.big {
		return binary.BigEndian.Uint16(b)
	}
	return binary.LittleEndian.Uint16(b)
}

func (o byteOrder) Uint32(b []byte) uint32 {
	if o.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (o byteOrder) Uint64(b []byte) uint64 {
	if o.big {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

func trimELFError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "elf: ")
	return msg
}

func (s *scanner) errorf(format string, a ...any) error {
	return &FormatError{Path: s.name, Msg: fmt.Sprintf(format, a...)}
}

func (s *scanner) scan() (*Info, error) {
	fh := s.header
	in := &Info{
		Class:      fh.Class,
		Data:       fh.Data,
		Machine:    fh.Machine,
		OSABI:      fh.OSABI,
		ABIVersion: fh.ABIVersion,
		Type:       fh.Type,
		Version:    uint32(fh.Version),
	}
	if _, err := s.r.ReadAt(in.Ident[:], 0); err != nil {
		return nil, s.errorf("read identification: %v", err)
	}
	in.Phentsize = s.uint16At(54, 42)
	in.Flags = s.uint32At(48, 36)

	var dyn *elf.ProgHeader
	for i := range s.progs {
		p := &s.progs[i]
		switch p.Type {
		case elf.PT_INTERP:
			if in.Interp != "" {
				continue
			}
			str, err := s.readBounded(int64(p.Off), int64(p.Filesz))
			if err != nil {
				return nil, s.errorf("PT_INTERP: %v", err)
			}
			in.Interp = str
		case elf.PT_DYNAMIC:
			if dyn == nil {
				dyn = p
			}
		}
	}
	// A PT_DYNAMIC with no bytes in the file (separate debug information
	// keeps the headers, not the contents) is none: ld.so says "object file
	// has no dynamic section".
	if dyn == nil || dyn.Filesz == 0 {
		return in, nil
	}
	in.Dynamic = true
	if err := s.readDynamic(in, dyn); err != nil {
		return nil, err
	}
	return in, nil
}

// uint16At and uint32At read ELF header fields that elf.FileHeader does
// not hold, at their offsets in the 64- and 32-bit header.
func (s *scanner) uint16At(off64, off32 int64) uint16 {
	var b [2]byte
	if _, err := s.r.ReadAt(b[:], s.pick(off64, off32)); err != nil {
		return 0
	}
	return s.order.Uint16(b[:])
}

func (s *scanner) uint32At(off64, off32 int64) uint32 {
	var b [4]byte
	if _, err := s.r.ReadAt(b[:], s.pick(off64, off32)); err != nil {
		return 0
	}
	return s.order.Uint32(b[:])
}

func (s *scanner) pick(off64, off32 int64) int64 {
	if s.is64 {
		return off64
	}
	return off32
}

// dynEntry is one decoded Elf_Dyn.
type dynEntry struct {
	tag elf.DynTag
	val uint64
}

// maxDynEntries bounds the dynamic segment walk; real objects have well under
// a hundred entries.
const maxDynEntries = 1 << 16

// dynamicEntries reads the entries of the PT_DYNAMIC segment up to
// DT_NULL, bounded for a hostile file.
func (s *scanner) dynamicEntries(dyn *elf.ProgHeader) ([]dynEntry, error) {
	entSize := int64(16)
	if !s.is64 {
		entSize = 8
	}
	if int64(dyn.Off) < 0 || int64(dyn.Off) > s.size || int64(dyn.Filesz) > s.size-int64(dyn.Off) {
		return nil, s.errorf("PT_DYNAMIC at offset %#x (size %#x) lies outside the file (%#x bytes)", dyn.Off, dyn.Filesz, s.size)
	}
	n := min(int64(dyn.Filesz)/entSize, maxDynEntries)
	entries := make([]dynEntry, 0, min(n, 128))
	buf := make([]byte, entSize)
	for i := int64(0); i < n; i++ {
		if _, err := s.r.ReadAt(buf, int64(dyn.Off)+i*entSize); err != nil {
			return nil, s.errorf("read dynamic entry %d: %v", i, err)
		}
		var e dynEntry
		if s.is64 {
			e = dynEntry{elf.DynTag(int64(s.order.Uint64(buf))), s.order.Uint64(buf[8:])}
		} else {
			e = dynEntry{elf.DynTag(int32(s.order.Uint32(buf))), uint64(s.order.Uint32(buf[4:]))}
		}
		if e.tag == elf.DT_NULL {
			break
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// dynamicRefs are the entries of the dynamic section that Info needs:
// offsets into the string table and addresses of the version records.
type dynamicRefs struct {
	strtab, strsz, verneed, verdef    uint64
	haveStrtab, haveVerneed, haveVerd bool
	needed                            []uint64
	soname, rpath, runpath            uint64
	haveSoname                        bool
}

// collect takes the entries Info needs, filling in the flags directly. Like
// ld.so, the last entry of a tag wins for single-valued tags.
func (d *dynamicRefs) collect(in *Info, entries []dynEntry) {
	for _, e := range entries {
		switch e.tag {
		case elf.DT_STRTAB:
			d.strtab, d.haveStrtab = e.val, true
		case elf.DT_STRSZ:
			d.strsz = e.val
		case elf.DT_NEEDED:
			d.needed = append(d.needed, e.val)
		case elf.DT_SONAME:
			d.soname, d.haveSoname = e.val, true
		case elf.DT_RPATH:
			d.rpath, in.HasRPath = e.val, true
		case elf.DT_RUNPATH:
			d.runpath, in.HasRunPath = e.val, true
		case elf.DT_FLAGS_1:
			in.Flags1 = elf.DynFlag1(e.val)
		case elf.DT_FLAGS:
			in.DynFlags = elf.DynFlag(e.val)
		case elf.DT_VERNEED:
			d.verneed, d.haveVerneed = e.val, true
		case elf.DT_VERDEF:
			d.verdef, d.haveVerd = e.val, true
		}
	}
}

func (s *scanner) readDynamic(in *Info, dyn *elf.ProgHeader) error {
	entries, err := s.dynamicEntries(dyn)
	if err != nil {
		return err
	}
	var d dynamicRefs
	d.collect(in, entries)
	if len(d.needed) == 0 && !d.haveSoname && !in.HasRPath && !in.HasRunPath && !d.haveVerneed && !d.haveVerd {
		return nil
	}
	if !d.haveStrtab {
		return s.errorf("dynamic section has no DT_STRTAB")
	}
	strOff, err := s.vaddrToOffset(d.strtab)
	if err != nil {
		return s.errorf("DT_STRTAB %#x: %v", d.strtab, err)
	}
	strs := &stringTable{s: s, off: strOff, size: d.strsz}
	if err := s.readNames(in, &d, strs); err != nil {
		return err
	}
	return s.readVersions(in, &d, strs)
}

// readNames reads DT_NEEDED, DT_SONAME, DT_RPATH and DT_RUNPATH.
func (s *scanner) readNames(in *Info, d *dynamicRefs, strs *stringTable) error {
	if len(d.needed) > 0 {
		in.Needed = make([]string, 0, len(d.needed))
	}
	for _, o := range d.needed {
		name, err := strs.get(o)
		if err != nil {
			return s.errorf("DT_NEEDED: %v", err)
		}
		in.Needed = append(in.Needed, name)
	}
	var err error
	if d.haveSoname {
		if in.Soname, err = strs.get(d.soname); err != nil {
			return s.errorf("DT_SONAME: %v", err)
		}
	}
	if in.HasRPath {
		if in.RPath, err = strs.get(d.rpath); err != nil {
			return s.errorf("DT_RPATH: %v", err)
		}
	}
	if in.HasRunPath {
		if in.RunPath, err = strs.get(d.runpath); err != nil {
			return s.errorf("DT_RUNPATH: %v", err)
		}
	}
	return nil
}

// readVersions reads the version needs and definitions.
func (s *scanner) readVersions(in *Info, d *dynamicRefs, strs *stringTable) error {
	if d.haveVerneed {
		off, err := s.vaddrToOffset(d.verneed)
		if err != nil {
			return s.errorf("DT_VERNEED %#x: %v", d.verneed, err)
		}
		if in.VersionNeeds, err = s.readVerneed(off, strs); err != nil {
			return err
		}
	}
	if d.haveVerd {
		off, err := s.vaddrToOffset(d.verdef)
		if err != nil {
			return s.errorf("DT_VERDEF %#x: %v", d.verdef, err)
		}
		if in.VersionDefs, err = s.readVerdef(off, strs); err != nil {
			return err
		}
	}
	return nil
}

// kept is a copy of s for a table kept between lookups: of the program
// headers, only the segments that map addresses to offsets, which is all
// nine hundred kept tables need of them.
func (s *scanner) kept() *scanner {
	k := *s
	k.progs = nil
	for _, p := range s.progs {
		if p.Type == elf.PT_LOAD {
			k.progs = append(k.progs, p)
		}
	}
	k.symtab, k.symtabErr = nil, nil
	return &k
}

// vaddrToOffset maps a virtual address to a file offset through the PT_LOAD
// segments, the way the loader's mapping places it.
func (s *scanner) vaddrToOffset(addr uint64) (int64, error) {
	for _, p := range s.progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		if addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			off := p.Off + (addr - p.Vaddr)
			if off >= uint64(s.size) {
				return 0, fmt.Errorf("maps to offset %#x beyond the end of the file (%#x bytes)", off, s.size)
			}
			return int64(off), nil
		}
	}
	return 0, errors.New("address is not inside any PT_LOAD segment")
}

// maxRecords bounds version record walks of a hostile file.
const maxRecords = 1 << 16

func (s *scanner) readVerneed(off int64, strs *stringTable) ([]VersionNeed, error) {
	// ld.so follows vn_next/vna_next and ignores the counts; so do we. The
	// links are unsigned, so every step moves forward and reads past the end
	// of the file fail: the walk always ends.
	var out []VersionNeed
	var hdr [16]byte
	var aux [16]byte
	for i := 0; ; i++ {
		if i >= maxRecords {
			return nil, s.errorf("more than %d version need records", maxRecords)
		}
		if _, err := s.r.ReadAt(hdr[:], off); err != nil {
			return nil, s.errorf("version need record %d at %#x: %v", i, off, err)
		}
		if v := s.order.Uint16(hdr[0:]); v != 1 {
			return nil, s.errorf("unsupported version %d of Verneed record", v)
		}
		file, err := strs.get(uint64(s.order.Uint32(hdr[4:])))
		if err != nil {
			return nil, s.errorf("version need record %d: %v", i, err)
		}
		vn := VersionNeed{File: file, Versions: make([]NeededVersion, 0, min(s.order.Uint16(hdr[2:]), 64))}
		auxOff := off + int64(s.order.Uint32(hdr[8:]))
		for j := 0; s.order.Uint16(hdr[2:]) > 0; j++ {
			if j >= maxRecords {
				return nil, s.errorf("more than %d versions needed from %s", maxRecords, file)
			}
			if _, err := s.r.ReadAt(aux[:], auxOff); err != nil {
				return nil, s.errorf("version need aux %d of %s at %#x: %v", j, file, auxOff, err)
			}
			name, err := strs.get(uint64(s.order.Uint32(aux[8:])))
			if err != nil {
				return nil, s.errorf("version need aux %d of %s: %v", j, file, err)
			}
			vn.Versions = append(vn.Versions, NeededVersion{
				Name:  name,
				Hash:  s.order.Uint32(aux[0:]),
				Flags: s.order.Uint16(aux[4:]),
				Index: s.order.Uint16(aux[6:]),
			})
			next := s.order.Uint32(aux[12:])
			if next == 0 {
				break
			}
			auxOff += int64(next)
		}
		out = append(out, vn)
		next := s.order.Uint32(hdr[12:])
		if next == 0 {
			break
		}
		off += int64(next)
	}
	return out, nil
}

func (s *scanner) readVerdef(off int64, strs *stringTable) ([]VersionDef, error) {
	var out []VersionDef
	var hdr [20]byte
	var aux [8]byte
	for i := 0; ; i++ {
		if i >= maxRecords {
			return nil, s.errorf("more than %d version definitions", maxRecords)
		}
		if _, err := s.r.ReadAt(hdr[:], off); err != nil {
			return nil, s.errorf("version definition %d at %#x: %v", i, off, err)
		}
		if v := s.order.Uint16(hdr[0:]); v != 1 {
			return nil, s.errorf("unsupported version %d of Verdef record", v)
		}
		vd := VersionDef{
			Flags: s.order.Uint16(hdr[2:]),
			Index: s.order.Uint16(hdr[4:]),
			Hash:  s.order.Uint32(hdr[8:]),
		}
		cnt := int(s.order.Uint16(hdr[6:]))
		auxOff := off + int64(s.order.Uint32(hdr[12:]))
		for j := 0; j < cnt; j++ {
			if _, err := s.r.ReadAt(aux[:], auxOff); err != nil {
				return nil, s.errorf("version definition aux %d at %#x: %v", j, auxOff, err)
			}
			name, err := strs.get(uint64(s.order.Uint32(aux[0:])))
			if err != nil {
				return nil, s.errorf("version definition %d: %v", i, err)
			}
			if j == 0 {
				vd.Name = name
			} else {
				vd.Parents = append(vd.Parents, name)
			}
			next := s.order.Uint32(aux[4:])
			if next == 0 {
				break
			}
			auxOff += int64(next)
		}
		out = append(out, vd)
		next := s.order.Uint32(hdr[16:])
		if next == 0 {
			break
		}
		off += int64(next)
	}
	return out, nil
}

// readBounded reads a NUL-terminated string stored in [off, off+n).
func (s *scanner) readBounded(off, n int64) (string, error) {
	if off < 0 || n < 0 || off > s.size || n > s.size-off {
		return "", fmt.Errorf("range %#x+%#x lies outside the file", off, n)
	}
	if n > maxString {
		n = maxString
	}
	buf := make([]byte, n)
	if _, err := s.r.ReadAt(buf, off); err != nil {
		return "", err
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nil
}

// maxString bounds any one string; ld.so has no such limit, but a path or a
// soname longer than this is garbage, not a library name.
const maxString = 1 << 16

// stringTable reads strings of the dynamic string table on demand, so the
// cost is the pages that hold the names, not the whole table (which holds
// every exported symbol name and runs to megabytes for C++ libraries).
type stringTable struct {
	s    *scanner
	off  int64
	size uint64 // DT_STRSZ; 0 when absent
	buf  []byte // what bytes read last: a table is read by one goroutine
}

func (t *stringTable) get(idx uint64) (string, error) {
	b, err := t.bytes(idx)
	if err != nil {
		return "", err
	}
	if sp := t.s.r.spare; sp != nil {
		return sp.intern(b), nil
	}
	return string(b), nil
}

// getWith is get with the string made by name from its bytes (nil: a copy
// of them); the bytes are valid only during the call.
func (t *stringTable) getWith(idx uint64, name func([]byte) string) (string, error) {
	b, err := t.bytes(idx)
	if err != nil || name == nil {
		return string(b), err
	}
	return name(b), nil
}

// bytes reads the string at idx into the table's buffer: valid until the
// next call.
func (t *stringTable) bytes(idx uint64) ([]byte, error) {
	if t.size != 0 && idx >= t.size {
		return nil, fmt.Errorf("string index %#x beyond DT_STRSZ %#x", idx, t.size)
	}
	start := t.off + int64(idx)
	if idx > uint64(t.s.size) || start >= t.s.size {
		return nil, fmt.Errorf("string index %#x lies outside the file", idx)
	}
	limit := t.s.size - start
	if t.size != 0 && int64(t.size-idx) < limit {
		limit = int64(t.size - idx)
	}
	if limit > maxString {
		limit = maxString
	}
	const chunk = 256
	sb := t.buf[:0]
	for pos := int64(0); pos < limit; {
		n := min(int64(chunk), limit-pos)
		sb = slices.Grow(sb, int(n))
		got, err := t.s.r.ReadAt(sb[len(sb):len(sb)+int(n)], start+pos)
		if i := bytes.IndexByte(sb[len(sb):len(sb)+got], 0); i >= 0 {
			t.buf = sb
			return sb[:len(sb)+i], nil
		}
		sb = sb[:len(sb)+got]
		pos += int64(got)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.buf = sb
			return nil, err
		}
	}
	t.buf = sb
	return nil, fmt.Errorf("string at index %#x is not terminated", idx)
}
