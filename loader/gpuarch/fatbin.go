package gpuarch

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"

	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// The CUDA fat binary, as nvcc embeds it in a host ELF object's
// .nv_fatbin section: containers one after another (8-byte aligned, zero
// padding between them), each a 16-byte header
//
//	u32 magic 0xBA55ED50, u16 version 1, u16 header size, u64 size of the entries
//
// (NVIDIA's fatbinary.h, struct fatBinaryHeader) followed by entries, each
// a header and its payload. The entry header (the layout public readers
// agree on: NVIDIA's fatbinary_section.h does not document it) is
//
//	0  u16 kind (fatBinaryCodeKind: 1 PTX, 2 ELF, 8 NVVM IR)
//	2  u16 header version
//	4  u32 header size (64, or more with the strings below)
//	8  u64 payload size, padded
//	16 u32 compressed payload size (0 when not compressed)
//	20 u32 offset of the PTX-assembler options' (offset, size) pair, from the header
//	24 u16 minor, 26 u16 major: the PTX ISA version (the ELF ABI version for a cubin)
//	28 u32 architecture (90 for sm_90)
//	32 u32 offset and 36 u32 size of the entry's identifier, from the header
//	40 u64 flags: 0x1 64-bit, 0x2 debug, 0x10 Linux, 0xf00 optimisation
//	   level, 0x1000 and 0x2000 LZ-compressed, 0x8000 zstd-compressed,
//	   0x100000 arch-specific code (sm_90a), 0x200000 family-specific
//	   code (sm_100f); 0x1000000 is set on every sm_100 and later entry
//	   nvcc 13 writes, a variant or not, and absent on sm_90 ones (seen,
//	   not used). Read off one nvcc 13.0 build per -gencode on the GPU
//	   machine (e2e/gpu/results/2026-11-25/fatbin-variants.log: sm_100
//	   0x1000011, sm_100a 0x1100011, sm_100f 0x1200011, compute_100f
//	   0x208011, sm_90 0x11). cuobjdump names a family-specific cubin
//	   without its suffix (an sm_100f cubin is "sm_100.cubin") but keeps
//	   the suffix of arch-specific cubins and of PTX, so its listing
//	   cannot tell a family cubin from a plain one; the flags can
//	48 u64 reserved
//	56 u64 uncompressed payload size
//
// The reader seeks from container header to entry header to the next
// entry and never reads a payload: a 1 GB library costs a few hundred
// kilobytes of reads however its entries are compressed.
const (
	fatbinMagic      = 0xBA55ED50
	containerHeader  = 16
	entryHeader      = 64
	flagCompressMask = 0x1000 | 0x2000 | 0x8000
	flagArchSpecific = 0x100000
	flagFamily       = 0x200000
)

// Bounds on what a file may make the reader do.
const (
	maxSectionHeaders = 1 << 16  // a section header table of more is refused
	maxShstrtab       = 1 << 20  // the section name table
	maxEntryHeader    = 64 << 10 // an entry header with its strings
	maxPadding        = 64       // zero bytes skipped between containers
	readAhead         = 128      // bytes read at an entry header: most need no second read
)

// SectionName is the section nvcc puts fat binaries in.
const SectionName = ".nv_fatbin"

// FormatError is a file whose fat binary cannot be read.
type FormatError struct {
	Path   string
	Offset int64
	Msg    string
}

func (e *FormatError) Error() string {
	if e.Offset > 0 {
		return fmt.Sprintf("%s: fat binary at offset %#x: %s", e.Path, e.Offset, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// ReadFile reads what the fat binaries of an ELF file carry.
func ReadFile(path string) (*Carried, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &FormatError{Path: path, Msg: "not a regular file"}
	}
	return Read(f, st.Size(), path)
}

// Read reads what the fat binaries of the ELF object in r carry: every
// .nv_fatbin section, found through the section headers. An object without
// one carries nothing (Carried.Empty).
func Read(r io.ReaderAt, size int64, name string) (*Carried, error) {
	rd := &reader{r: r, size: size, name: name}
	secs, err := rd.fatbinSections()
	if err != nil {
		return nil, err
	}
	c := &Carried{}
	for _, s := range secs {
		if err := rd.walk(c, s.off, s.off+s.size); err != nil {
			return nil, err
		}
	}
	return c, nil
}

type reader struct {
	r    io.ReaderAt
	size int64
	name string
}

type span struct{ off, size int64 }

func (rd *reader) errorf(off int64, format string, a ...any) error {
	return &FormatError{Path: rd.name, Offset: off, Msg: fmt.Sprintf(format, a...)}
}

// readAt reads exactly len(b) bytes at off, within the file.
func (rd *reader) readAt(b []byte, off int64) error {
	if off < 0 || off > rd.size || int64(len(b)) > rd.size-off {
		return rd.errorf(off, "%d bytes past the end of the file", int64(len(b)))
	}
	n, err := rd.r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &FormatError{Path: rd.name, Offset: off, Msg: "read: " + err.Error()}
}

// fatbinSections finds the .nv_fatbin sections through the section
// header table and its name table.
func (rd *reader) fatbinSections() ([]span, error) {
	l, err := rd.elfHeader()
	if err != nil || l.shoff == 0 {
		return nil, err // no section headers: nothing says where a fat binary is
	}
	table, err := rd.sectionHeaders(&l)
	if err != nil || table == nil {
		return nil, err
	}
	names, err := rd.sectionNames(l, table)
	if err != nil {
		return nil, err
	}
	var out []span
	for i := 1; i < l.shnum; i++ {
		s := l.section(table[i*l.shentsize:])
		if s.typ == elf.SHT_NOBITS || s.size == 0 || !hasName(names, s.name, SectionName) {
			continue
		}
		if s.off > uint64(rd.size) || s.size > uint64(rd.size)-s.off {
			return nil, rd.errorf(int64(s.off), "%s section of %d bytes runs past the end of the file", SectionName, s.size)
		}
		out = append(out, span{int64(s.off), int64(s.size)})
	}
	return out, nil
}

// elfLayout is what an ELF header says of its section header table.
type elfLayout struct {
	bo                         binary.ByteOrder
	is64                       bool
	shoff                      int64 // 0: no section headers
	shentsize, shnum, shstrndx int
}

// sectionHeader holds the fields of one section header the reader uses.
type sectionHeader struct {
	name      uint32
	typ       elf.SectionType
	off, size uint64
	link      uint32
}

// section decodes the section header at the start of b.
func (l elfLayout) section(b []byte) sectionHeader {
	bo := l.bo
	if l.is64 {
		return sectionHeader{bo.Uint32(b), elf.SectionType(bo.Uint32(b[4:])), bo.Uint64(b[24:]), bo.Uint64(b[32:]), bo.Uint32(b[40:])}
	}
	return sectionHeader{bo.Uint32(b), elf.SectionType(bo.Uint32(b[4:])), uint64(bo.Uint32(b[16:])), uint64(bo.Uint32(b[20:])), bo.Uint32(b[24:])}
}

// elfHeader reads the ELF identification and header: byte order, class
// and where the section header table lies.
func (rd *reader) elfHeader() (elfLayout, error) {
	var l elfLayout
	var ident [elf.EI_NIDENT]byte
	if rd.size < int64(len(ident)) {
		return l, fmt.Errorf("%s: %w", rd.name, elfscan.ErrNotELF)
	}
	if err := rd.readAt(ident[:], 0); err != nil {
		return l, err
	}
	if string(ident[:4]) != elf.ELFMAG {
		return l, fmt.Errorf("%s: %w", rd.name, elfscan.ErrNotELF)
	}
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		l.bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		l.bo = binary.BigEndian
	default:
		return l, rd.errorf(0, "unknown ELF byte order %d", ident[elf.EI_DATA])
	}
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		l.is64 = true
	case elf.ELFCLASS32:
	default:
		return l, rd.errorf(0, "unknown ELF class %d", ident[elf.EI_CLASS])
	}
	bo := l.bo
	if l.is64 {
		var h [64]byte
		if err := rd.readAt(h[:], 0); err != nil {
			return l, err
		}
		off := bo.Uint64(h[40:])
		if off > uint64(rd.size) {
			return l, rd.errorf(0, "section headers at %#x, past the end of the file", off)
		}
		l.shoff = int64(off)
		l.shentsize, l.shnum, l.shstrndx = int(bo.Uint16(h[58:])), int(bo.Uint16(h[60:])), int(bo.Uint16(h[62:]))
		return l, nil
	}
	var h [52]byte
	if err := rd.readAt(h[:], 0); err != nil {
		return l, err
	}
	l.shoff = int64(bo.Uint32(h[32:]))
	l.shentsize, l.shnum, l.shstrndx = int(bo.Uint16(h[46:])), int(bo.Uint16(h[48:])), int(bo.Uint16(h[50:]))
	return l, nil
}

// sectionHeaders reads the section header table l describes, completing
// l's count and name table index from section 0 under extended numbering.
// It returns nil for a table of no sections.
func (rd *reader) sectionHeaders(l *elfLayout) ([]byte, error) {
	want := 40
	if l.is64 {
		want = 64
	}
	if l.shentsize < want {
		return nil, rd.errorf(0, "section header entries of %d bytes", l.shentsize)
	}
	if l.shnum == 0 || l.shstrndx == int(elf.SHN_XINDEX) {
		// Extended numbering: section 0 holds the count and the index.
		first := make([]byte, l.shentsize)
		if err := rd.readAt(first, l.shoff); err != nil {
			return nil, err
		}
		s := l.section(first)
		if l.shnum == 0 {
			if s.size > maxSectionHeaders {
				return nil, rd.errorf(l.shoff, "%d section headers", s.size)
			}
			l.shnum = int(s.size)
		}
		if l.shstrndx == int(elf.SHN_XINDEX) {
			l.shstrndx = int(s.link)
		}
	}
	if l.shnum == 0 {
		return nil, nil
	}
	if l.shnum > maxSectionHeaders || l.shentsize > 4096 {
		return nil, rd.errorf(l.shoff, "%d section headers of %d bytes", l.shnum, l.shentsize)
	}
	if int64(l.shnum*l.shentsize) > rd.size-l.shoff {
		return nil, rd.errorf(l.shoff, "%d section headers run past the end of the file", l.shnum)
	}
	table := make([]byte, l.shnum*l.shentsize)
	if err := rd.readAt(table, l.shoff); err != nil {
		return nil, err
	}
	return table, nil
}

// sectionNames reads the section name table that l's index names in table.
func (rd *reader) sectionNames(l elfLayout, table []byte) ([]byte, error) {
	if l.shstrndx <= 0 || l.shstrndx >= l.shnum {
		return nil, rd.errorf(l.shoff, "section name table index %d of %d sections", l.shstrndx, l.shnum)
	}
	s := l.section(table[l.shstrndx*l.shentsize:])
	if s.size > maxShstrtab {
		return nil, rd.errorf(int64(s.off), "section name table of %d bytes", s.size)
	}
	if s.off > uint64(rd.size) || s.size > uint64(rd.size)-s.off {
		return nil, rd.errorf(0, "section name table past the end of the file")
	}
	names := make([]byte, s.size)
	if err := rd.readAt(names, int64(s.off)); err != nil {
		return nil, err
	}
	return names, nil
}

// hasName reports whether the NUL-terminated string at off in a name table
// is name.
func hasName(table []byte, off uint32, name string) bool {
	end := uint64(off) + uint64(len(name))
	return end < uint64(len(table)) && string(table[off:end]) == name && table[end] == 0
}

// walk reads the containers of one section, [off, end).
func (rd *reader) walk(c *Carried, off, end int64) error {
	var magic [4]byte
	pos := off
	for end-pos >= containerHeader {
		if err := rd.readAt(magic[:], pos); err != nil {
			return err
		}
		if binary.LittleEndian.Uint32(magic[:]) != fatbinMagic {
			// Zero padding aligns the next container; anything else is no
			// fat binary this reader understands.
			skip, err := rd.padding(pos, end)
			if err != nil {
				return err
			}
			if skip == 0 {
				return nil // zeros to the end of the section
			}
			pos += skip
			continue
		}
		next, err := rd.container(c, pos, end)
		if err != nil {
			return err
		}
		pos = next
	}
	return nil
}

// container reads the container at pos (its magic checked), which must
// end by end, and returns where it ends.
func (rd *reader) container(c *Carried, pos, end int64) (int64, error) {
	var head [containerHeader]byte
	if err := rd.readAt(head[:], pos); err != nil {
		return 0, err
	}
	if v := binary.LittleEndian.Uint16(head[4:]); v != 1 {
		return 0, rd.errorf(pos, "container version %d (only 1 is known)", v)
	}
	hsize := int64(binary.LittleEndian.Uint16(head[6:]))
	fsize := binary.LittleEndian.Uint64(head[8:])
	if hsize < containerHeader || hsize > end-pos {
		return 0, rd.errorf(pos, "container header of %d bytes", hsize)
	}
	if fsize > uint64(end-pos-hsize) {
		return 0, rd.errorf(pos, "container of %d bytes runs past the end of the %s section", fsize, SectionName)
	}
	cend := pos + hsize + int64(fsize)
	entries, err := rd.entries(pos+hsize, cend)
	if err != nil {
		return 0, err
	}
	c.AddContainer(entries)
	return cend, nil
}

// padding returns how many zero bytes at pos precede the next container
// (a multiple of 8), 0 when only zeros remain before end.
func (rd *reader) padding(pos, end int64) (int64, error) {
	n := min(int64(maxPadding+containerHeader), end-pos)
	b := make([]byte, n)
	if err := rd.readAt(b, pos); err != nil {
		return 0, err
	}
	for i := int64(0); i < n; i++ {
		if b[i] == 0 {
			continue
		}
		if i == 0 || i%8 != 0 || i > maxPadding {
			return 0, rd.errorf(pos, "no fat binary container here (bytes % x)", b[:min(8, n)])
		}
		return i, nil
	}
	if n == end-pos {
		return 0, nil
	}
	return 0, rd.errorf(pos, "more than %d zero bytes between fat binary containers", maxPadding)
}

// entries reads the entry headers of one container, [pos, cend).
func (rd *reader) entries(pos, cend int64) ([]Entry, error) {
	var out []Entry
	buf := make([]byte, readAhead)
	for pos < cend {
		if cend-pos < entryHeader {
			return nil, rd.errorf(pos, "%d bytes left in the container, less than an entry header", cend-pos)
		}
		b := buf[:min(int64(len(buf)), cend-pos)]
		if err := rd.readAt(b, pos); err != nil {
			return nil, err
		}
		le := binary.LittleEndian
		hsize := int64(le.Uint32(b[4:]))
		payload := le.Uint64(b[8:])
		if hsize < entryHeader || hsize > maxEntryHeader {
			return nil, rd.errorf(pos, "entry header of %d bytes", hsize)
		}
		if hsize > cend-pos || payload > uint64(cend-pos-hsize) {
			return nil, rd.errorf(pos, "entry of %d bytes runs past the end of its container", payload)
		}
		if hsize > int64(len(b)) {
			// Long strings in the header: read it whole (bounded above).
			b = make([]byte, hsize)
			if err := rd.readAt(b, pos); err != nil {
				return nil, err
			}
		}
		out = append(out, decodeEntry(b[:hsize], payload))
		pos += hsize + int64(payload)
	}
	return out, nil
}

// decodeEntry reads one entry header (h holds all of it).
func decodeEntry(h []byte, payload uint64) Entry {
	le := binary.LittleEndian
	flags := le.Uint64(h[40:])
	e := Entry{
		Kind:   Kind(le.Uint16(h[0:])),
		Target: Target{SM: int(le.Uint32(h[28:]))},
		ISA:    Version{Major: int(le.Uint16(h[26:])), Minor: int(le.Uint16(h[24:]))},
		Bytes:  int64(payload),
	}
	if flags&flagCompressMask != 0 {
		e.Compressed = true
		if cs := le.Uint32(h[16:]); cs > 0 && uint64(cs) <= payload {
			e.Bytes = int64(cs)
		}
		if us := le.Uint64(h[56:]); us < 1<<40 {
			e.Size = int64(us)
		}
	} else {
		e.Size = e.Bytes
	}
	// The variant: the flags say it (nvcc sets them since CUDA 12 made
	// variants; older code has none). A header string that names a variant
	// of this architecture (the identifier, the PTX-assembler options) is
	// read too, for writers that set no flag.
	e.VariantKnown = true
	switch {
	case flags&flagArchSpecific != 0:
		e.Target.Variant = ArchSpecific
		return e
	case flags&flagFamily != 0:
		e.Target.Variant = FamilySpecific
		return e
	}
	for _, s := range headerStrings(h) {
		if v, ok := variantIn(s, e.Target.SM); ok {
			e.Target.Variant = v
			break
		}
	}
	return e
}

// headerStrings are the identifier and the PTX-assembler options of an
// entry header, where they lie inside it.
func headerStrings(h []byte) [][]byte {
	le := binary.LittleEndian
	in := func(off, n uint64) []byte {
		if off < entryHeader || n == 0 || off > uint64(len(h)) || n > uint64(len(h))-off {
			return nil
		}
		return h[off : off+n]
	}
	var out [][]byte
	if s := in(uint64(le.Uint32(h[32:])), uint64(le.Uint32(h[36:]))); s != nil {
		out = append(out, s)
	}
	if opt := uint64(le.Uint32(h[20:])); opt >= entryHeader && opt+8 <= uint64(len(h)) {
		if s := in(uint64(le.Uint32(h[opt:])), uint64(le.Uint32(h[opt+4:]))); s != nil {
			out = append(out, s)
		}
	}
	return out
}

var variantRE = regexp.MustCompile(`(?:sm|compute)_([0-9]{2,3})([af])\b`)

// variantIn finds "sm_90a" or "compute_100f" for architecture sm in s.
func variantIn(s []byte, sm int) (Variant, bool) {
	for _, m := range variantRE.FindAllSubmatch(s, -1) {
		if n, err := strconv.Atoi(string(m[1])); err != nil || n != sm {
			continue
		}
		if m[2][0] == 'a' {
			return ArchSpecific, true
		}
		return FamilySpecific, true
	}
	return Plain, false
}
