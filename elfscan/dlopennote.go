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

// readDlopenNotes reads the dlopen notes of an ELF object (see
// File.DlopenNotes).
func readDlopenNotes(r io.ReaderAt, name string) ([]DlopenNote, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, &FormatError{Path: name, Msg: err.Error()}
	}
	defer f.Close()
	var blobs [][]byte
	read := func(sr io.ReaderAt, size uint64) error {
		if size > maxNoteBytes {
			return &FormatError{Path: name, Msg: fmt.Sprintf("note of %d bytes", size)}
		}
		b := make([]byte, size)
		if _, err := sr.ReadAt(b, 0); err != nil && err != io.EOF {
			return &FormatError{Path: name, Msg: "reading notes: " + err.Error()}
		}
		blobs = append(blobs, b)
		return nil
	}
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOTE {
			if err := read(s.Open().(io.ReaderAt), s.Size); err != nil {
				return nil, err
			}
		}
	}
	if len(f.Sections) == 0 {
		for _, p := range f.Progs {
			if p.Type == elf.PT_NOTE {
				if err := read(p.Open().(io.ReaderAt), p.Filesz); err != nil {
					return nil, err
				}
			}
		}
	}
	var out []DlopenNote
	for _, b := range blobs {
		notes, err := parseDlopenNotes(b, f.ByteOrder)
		if err != nil {
			return nil, &FormatError{Path: name, Msg: err.Error()}
		}
		out = append(out, notes...)
	}
	return out, nil
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
