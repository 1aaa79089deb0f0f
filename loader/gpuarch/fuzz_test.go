package gpuarch

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	fb "github.com/cudadeps/cudadeps/internal/testkit/fatbintest"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// seedObjects are objects the fuzzer starts from (testdata/fuzz/FuzzRead
// holds more: mutations that reached new code).
func seedObjects(t testing.TB) [][]byte {
	var out [][]byte
	for _, cs := range [][]fb.Container{
		{fb.SASS(80)},
		{{Entries: []fb.Entry{{Kind: fb.ELF, Arch: 90, Identifier: "k.sm_90a.cubin"}, {Kind: fb.PTX, Arch: 90, LZ: true, Options: "-O3"}}, PadAfter: 8}, fb.PTXFor(80, 120)},
		{{Entries: []fb.Entry{{Kind: fb.IR, Arch: 100}, {Kind: fb.ELF, Arch: 100, Zstd: true}}}},
	} {
		b, err := elfwrite.Build(elfwrite.Spec{Soname: "libf.so", Sections: []elfwrite.Section{{Name: SectionName, Data: fb.Build(cs...)}}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzRead: any input reads to a result or an error, in bounded time and
// memory, never a panic (go test -fuzz FuzzRead ./loader/gpuarch).
func FuzzRead(f *testing.F) {
	for _, b := range seedObjects(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Read(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) && !errors.Is(err, elfscan.ErrNotELF) {
				t.Fatalf("error of an unexpected type: %v", err)
			}
			return
		}
		// What was read adds up: every entry sits in a container.
		n := 0
		for _, s := range c.SASS {
			n += s.Entries
		}
		for _, p := range c.PTX {
			n += p.Entries
		}
		for _, k := range c.Other {
			n += k
		}
		if n > 0 && c.Containers == 0 {
			t.Fatalf("%d entries outside any container", n)
		}
		_ = Judge(CC{9, 0}, Version{12, 8}, c, nil)
	})
}
