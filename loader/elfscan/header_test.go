package elfscan

import (
	"bytes"
	"debug/elf"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// withoutSectionTable is data with e_shoff, e_shnum and e_shstrndx zero:
// a file debug/elf.NewFile reads no section of, which is what readHeaders
// is judged against (readHeaders never reads those fields).
func withoutSectionTable(data []byte) []byte {
	b := bytes.Clone(data)
	if len(b) <= elf.EI_CLASS {
		return b
	}
	fields := [][2]int{{32, 4}, {48, 2}, {50, 2}} // ELF32
	if elf.Class(b[elf.EI_CLASS]) == elf.ELFCLASS64 {
		fields = [][2]int{{40, 8}, {60, 2}, {62, 2}}
	}
	for _, fl := range fields {
		for i := fl[0]; i < fl[0]+fl[1] && i < len(b); i++ {
			b[i] = 0
		}
	}
	return b
}

// sameHeaders fails t unless readHeaders says of data what debug/elf
// says: the same header and program headers, or the same refusal.
func sameHeaders(t *testing.T, name string, data []byte) {
	t.Helper()
	data = withoutSectionTable(data)
	pr := newPagedReader(bytes.NewReader(data), int64(len(data)))
	fh, progs, err := readHeaders(pr, int64(len(data)))
	ref, refErr := elf.NewFile(newPagedReader(bytes.NewReader(data), int64(len(data))))
	switch {
	case (err == nil) != (refErr == nil):
		t.Fatalf("%s: readHeaders says %v, debug/elf %v", name, err, refErr)
	case err != nil:
		if got, want := err.Error(), trimELFError(refErr); got != want {
			t.Fatalf("%s: refused as %q, debug/elf %q", name, got, want)
		}
		return
	}
	if !reflect.DeepEqual(fh, ref.FileHeader) {
		t.Fatalf("%s: header %+v, debug/elf %+v", name, fh, ref.FileHeader)
	}
	if len(progs) != len(ref.Progs) {
		t.Fatalf("%s: %d program headers, debug/elf %d", name, len(progs), len(ref.Progs))
	}
	for i, p := range ref.Progs {
		if progs[i] != p.ProgHeader {
			t.Fatalf("%s: program header %d is %+v, debug/elf %+v", name, i, progs[i], p.ProgHeader)
		}
	}
}

// TestReadHeadersAgreesWithDebugELF: on the host's libraries, and on
// thousands of copies of their first bytes with header fields damaged at
// random (classes, encodings, versions, counts and offsets of program
// headers, files cut short), readHeaders reads or refuses each exactly as
// debug/elf does.
func TestReadHeadersAgreesWithDebugELF(t *testing.T) {
	const dir = "/usr/lib/x86_64-linux-gnu"
	ents, err := os.ReadDir(dir)
	if err != nil {
		lddtest.Need(t, false, "%s: %v", dir, err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var heads [][]byte
	for _, e := range ents {
		if len(heads) == 200 || !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil || len(data) < 64 || string(data[:4]) != elf.ELFMAG {
			continue
		}
		sameHeaders(t, e.Name(), data)
		heads = append(heads, data[:min(len(data), 4096)])
	}
	if len(heads) == 0 {
		lddtest.Need(t, false, "no ELF file in %s", dir)
	}
	// The host holds 64-bit little-endian objects only: 32-bit and
	// big-endian ones are made.
	for _, spec := range []elfwrite.Spec{
		{Class: elf.ELFCLASS32, Machine: elf.EM_386, Needed: []string{"libc.so.6"}},
		{Class: elf.ELFCLASS32, Data: elf.ELFDATA2MSB, Machine: elf.EM_PPC, Needed: []string{"libc.so.6"}},
		{Data: elf.ELFDATA2MSB, Machine: elf.EM_S390, Needed: []string{"libc.so.6"}},
	} {
		data, err := elfwrite.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		sameHeaders(t, fmt.Sprint(spec.Class, spec.Data, spec.Machine), data)
		heads = append(heads, data, data, data) // as likely as the host's
	}
	for i := range 20000 {
		b := bytes.Clone(heads[rng.IntN(len(heads))])
		for range 1 + rng.IntN(3) {
			// The identification and the header's fields, mostly.
			at := rng.IntN(min(len(b), 80))
			if rng.IntN(4) == 0 {
				at = rng.IntN(len(b))
			}
			b[at] = byte(rng.Uint32())
		}
		if rng.IntN(5) == 0 {
			b = b[:rng.IntN(len(b))]
		}
		sameHeaders(t, fmt.Sprint("damaged copy ", i), b)
	}
}

// FuzzReadHeaders: whatever the bytes, readHeaders reads or refuses them
// exactly as debug/elf does.
func FuzzReadHeaders(f *testing.F) {
	for _, s := range [][]byte{
		[]byte(elf.ELFMAG + "\x02\x01\x01"),
		append([]byte(elf.ELFMAG+"\x01\x02\x01"), make([]byte, 60)...),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 || string(data[:4]) != elf.ELFMAG {
			return // refused before: not ELF
		}
		sameHeaders(t, "fuzz", data)
	})
}
