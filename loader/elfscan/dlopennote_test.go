package elfscan

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func note(owner string, typ uint32, desc string) []byte {
	pad := func(b []byte) []byte {
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	name := pad(append([]byte(owner), 0))
	d := pad(append([]byte(desc), 0))
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(owner)+1))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)+1))
	b = binary.LittleEndian.AppendUint32(b, typ)
	return append(append(b, name...), d...)
}

func TestParseDlopenNotes(t *testing.T) {
	b := append(note("GNU", 3, "build-id"), note(DlopenNoteOwner, DlopenNoteType, `[{"soname":["libz.so.1"]}]`)...)
	got, err := parseDlopenNotes(b, binary.LittleEndian)
	if err != nil || len(got) != 1 || got[0].Sonames[0] != "libz.so.1" || got[0].Priority != PriorityRecommended {
		t.Fatalf("got %+v, %v", got, err)
	}
	// Another owner's note of the same type is not ours.
	if got, _ := parseDlopenNotes(note("XYZ", DlopenNoteType, `[{}]`), binary.LittleEndian); len(got) != 0 {
		t.Errorf("foreign note read: %+v", got)
	}
	for name, bad := range map[string][]byte{
		"truncated": note(DlopenNoteOwner, DlopenNoteType, `[{"soname":["a.so"]}]`)[:20],
		"not JSON":  note(DlopenNoteOwner, DlopenNoteType, `soname=a.so`),
		"huge size": append(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 4), 1<<31), make([]byte, 8)...),
	} {
		if _, err := parseDlopenNotes(bad, binary.LittleEndian); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestNoteSectionsAsDebugELF holds the section header walk of DlopenNotes
// against debug/elf on the host's libraries: the same SHT_NOTE sections,
// in order, and the notes of each parsed alike; and a file whose section
// headers are gone reads its PT_NOTE segments instead.
func TestNoteSectionsAsDebugELF(t *testing.T) {
	libs := hostLibraries(t, 400)
	withNotes := 0
	for _, p := range libs {
		ef, err := elf.Open(p)
		if err != nil {
			continue
		}
		var want [][2]uint64
		for _, s := range ef.Sections {
			if s.Type == elf.SHT_NOTE {
				want = append(want, [2]uint64{s.Offset, s.Size})
			}
		}
		hasSections := len(ef.Sections) > 0
		ef.Close()
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := withScanner(f, true, func(s *scanner) (noteRegions, error) {
			r, sections, err := s.noteSections()
			return noteRegions{r, sections}, err
		})
		if err == nil {
			_, err = f.DlopenNotes()
		}
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fmt.Sprint(got.r) != fmt.Sprint(want) || got.s != hasSections {
			t.Errorf("%s: note sections %v (headers %v), debug/elf %v (headers %v)", p, got.r, got.s, want, hasSections)
		}
		if len(want) > 0 {
			withNotes++
		}
	}
	if withNotes < 10 {
		t.Fatalf("only %d of %d host libraries have note sections", withNotes, len(libs))
	}

	// The section headers cut off, a dlopen note written over a PT_NOTE
	// segment large enough: the segments are read.
	n := note(DlopenNoteOwner, DlopenNoteType, `[{"soname":["libx.so.1"]}]`)
	var data []byte
	for _, lib := range libs {
		b, err := os.ReadFile(lib)
		if err != nil {
			t.Fatal(err)
		}
		ef, err := elf.NewFile(bytes.NewReader(b))
		if err != nil || ef.Class != elf.ELFCLASS64 || ef.Data != elf.ELFDATA2LSB {
			continue
		}
		for _, p := range ef.Progs {
			if p.Type == elf.PT_NOTE && p.Filesz >= uint64(len(n)) {
				copy(b[p.Off:], n)
				binary.LittleEndian.PutUint64(b[progFilesz(b, ef, p):], uint64(len(n)))
				data = b
				break
			}
		}
		if data != nil {
			break
		}
	}
	if data == nil {
		t.Fatalf("no 64-bit little-endian library among %d with a PT_NOTE of %d bytes", len(libs), len(n))
	}
	binary.LittleEndian.PutUint64(data[40:], 0) // e_shoff
	binary.LittleEndian.PutUint16(data[60:], 0) // e_shnum
	binary.LittleEndian.PutUint16(data[62:], 0) // e_shstrndx
	cut := filepath.Join(t.TempDir(), "cut.so")
	if err := os.WriteFile(cut, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(cut)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if notes, err := f.DlopenNotes(); err != nil || len(notes) != 1 || notes[0].Sonames[0] != "libx.so.1" {
		t.Errorf("note in a segment: %+v, %v", notes, err)
	}
}

type noteRegions struct {
	r [][2]uint64
	s bool
}

// progFilesz is the offset of p_filesz of p in data, a little-endian
// 64-bit object.
func progFilesz(data []byte, ef *elf.File, p *elf.Prog) int {
	phoff := int(binary.LittleEndian.Uint64(data[32:]))
	for i, q := range ef.Progs {
		if q == p {
			return phoff + i*56 + 32
		}
	}
	panic("no such program header")
}
