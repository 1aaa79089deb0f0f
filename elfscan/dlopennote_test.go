package elfscan

import (
	"encoding/binary"
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
