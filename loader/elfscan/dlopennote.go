package elfscan

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
)

// The FDO dlopen metadata note (https://systemd.io/ELF_DLOPEN_METADATA/):
// owner "FDO", type 0x407c0c0a, a NUL-terminated JSON array describing the
// libraries the object opens with dlopen, in a .note.dlopen section.
const (
	DlopenNoteOwner = "FDO"
	DlopenNoteType  = 0x407c0c0a
)

// Priorities of a dlopen note entry.
const (
	PriorityRequired    = "required"
	PriorityRecommended = "recommended"
	PrioritySuggested   = "suggested"
)

// DlopenNote is one element of a dlopen note's JSON array.
type DlopenNote struct {
	Sonames     []string `json:"soname"`
	Feature     string   `json:"feature,omitempty"`
	Description string   `json:"description,omitempty"`
	// Priority is "required", "recommended" (the specification's default,
	// filled in when absent) or "suggested".
	Priority string `json:"priority,omitempty"`
}

// maxNoteBytes bounds what is read of note sections and segments.
const maxNoteBytes = 1 << 20

// maxSections bounds the section headers looked at.
const maxSections = 1 << 16

// dlopenNotes reads the dlopen notes of the object (see File.DlopenNotes)
// through the file's paged reader: its section header table is read in one
// piece and only the SHT_NOTE entries are looked at (no section names, no
// other section), and the notes themselves mostly lie in the page of the
// headers, read already.
func (s *scanner) dlopenNotes() ([]DlopenNote, error) {
	regions, sections, err := s.noteSections()
	if err != nil {
		return nil, err
	}
	if !sections {
		for _, p := range s.progs {
			if p.Type == elf.PT_NOTE {
				regions = append(regions, [2]uint64{p.Off, p.Filesz})
			}
		}
	}
	var out []DlopenNote
	for _, r := range regions {
		if r[1] > maxNoteBytes {
			return nil, s.errorf("note of %d bytes", r[1])
		}
		if r[0] > uint64(s.size) || r[1] > uint64(s.size)-r[0] {
			return nil, s.errorf("reading notes: range %#x+%#x lies outside the file", r[0], r[1])
		}
		b := make([]byte, r[1])
		if _, err := s.r.ReadAt(b, int64(r[0])); err != nil && err != io.EOF {
			return nil, s.errorf("reading notes: %v", err)
		}
		notes, err := parseDlopenNotes(b, s.order)
		if err != nil {
			return nil, s.errorf("%v", err)
		}
		out = append(out, notes...)
	}
	return out, nil
}

// noteSections lists the offset and size of every SHT_NOTE section, in
// section header order; sections is false when the object has no section
// headers.
func (s *scanner) noteSections() (notes [][2]uint64, sections bool, err error) {
	sections, err = s.eachSection(func(h sectionHeader) bool {
		if h.typ == elf.SHT_NOTE {
			notes = append(notes, [2]uint64{h.off, h.size})
		}
		return true
	})
	return notes, sections, err
}

// sectionHeader is what is read of a section header: nothing else is used.
type sectionHeader struct {
	typ                      elf.SectionType
	addr, off, size, entsize uint64
}

// eachSection calls visit with each section header, in order, until it
// returns false; it reads the table in one piece through the paged reader
// (no names, no section contents). found is false when the object has no
// section headers; a table that does not fit in the file is an error.
func (s *scanner) eachSection(visit func(sectionHeader) bool) (found bool, err error) {
	var shoff uint64
	if s.is64 {
		var b [8]byte
		if _, err := s.r.ReadAt(b[:], 40); err != nil {
			return false, s.errorf("read e_shoff: %v", err)
		}
		shoff = s.order.Uint64(b[:])
	} else {
		shoff = uint64(s.uint32At(0, 32))
	}
	entsize, count := uint64(s.uint16At(58, 46)), uint64(s.uint16At(60, 48))
	if shoff == 0 {
		return false, nil
	}
	// The offsets of sh_type, sh_addr, sh_offset, sh_size and sh_entsize,
	// and the width of the last four.
	typeAt, addrAt, offAt, sizeAt, entAt, wide := uint64(4), uint64(16), uint64(24), uint64(32), uint64(56), uint64(8)
	if !s.is64 {
		addrAt, offAt, sizeAt, entAt, wide = 12, 16, 20, 36, 4
	}
	if entsize < sizeAt+wide || shoff >= uint64(s.size) {
		return false, s.errorf("section headers of %d bytes at %#x", entsize, shoff)
	}
	field := func(b []byte) uint64 {
		if wide == 8 {
			return s.order.Uint64(b)
		}
		return uint64(s.order.Uint32(b))
	}
	if count == 0 {
		// More sections than e_shnum holds: the count is section 0's
		// sh_size.
		b := make([]byte, entsize)
		if _, err := s.r.ReadAt(b, int64(shoff)); err != nil {
			return false, s.errorf("read section header 0: %v", err)
		}
		count = field(b[sizeAt:])
	}
	if count == 0 {
		return false, nil
	}
	if count > maxSections || count*entsize > uint64(s.size)-shoff {
		return false, s.errorf("%d section headers of %d bytes at %#x lie outside the file", count, entsize, shoff)
	}
	table := s.r.buffer(count * entsize)
	defer s.r.giveBack(table)
	if _, err := s.r.ReadAt(table, int64(shoff)); err != nil {
		return false, s.errorf("read section headers: %v", err)
	}
	for i := uint64(0); i < count; i++ {
		h := table[i*entsize : (i+1)*entsize]
		sh := sectionHeader{typ: elf.SectionType(s.order.Uint32(h[typeAt:])), addr: field(h[addrAt:]), off: field(h[offAt:]), size: field(h[sizeAt:])}
		if entsize >= entAt+wide {
			sh.entsize = field(h[entAt:])
		}
		if !visit(sh) {
			break
		}
	}
	return true, nil
}

// parseDlopenNotes walks the notes of one section or segment (4-byte
// aligned name and descriptor) and decodes the FDO dlopen ones.
func parseDlopenNotes(b []byte, bo interface{ Uint32([]byte) uint32 }) ([]DlopenNote, error) {
	var out []DlopenNote
	align := func(n uint64) uint64 { return (n + 3) &^ 3 }
	for off := uint64(0); off+12 <= uint64(len(b)); {
		namesz := uint64(bo.Uint32(b[off:]))
		descsz := uint64(bo.Uint32(b[off+4:]))
		typ := bo.Uint32(b[off+8:])
		nameOff := off + 12
		descOff := nameOff + align(namesz)
		end := descOff + align(descsz)
		if namesz > uint64(len(b)) || descsz > uint64(len(b)) || descOff+descsz > uint64(len(b)) {
			return nil, fmt.Errorf("truncated note at offset %d", off)
		}
		owner := string(bytes.TrimRight(b[nameOff:nameOff+namesz], "\x00"))
		if owner == DlopenNoteOwner && typ == DlopenNoteType {
			desc := bytes.TrimRight(b[descOff:descOff+descsz], "\x00")
			var items []DlopenNote
			if err := json.Unmarshal(desc, &items); err != nil {
				return nil, fmt.Errorf("dlopen note: %v", err)
			}
			for i := range items {
				if items[i].Priority == "" {
					items[i].Priority = PriorityRecommended
				}
			}
			out = append(out, items...)
		}
		if end <= off {
			break
		}
		off = end
	}
	return out, nil
}
