package elfscan

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// TestReferencesMatchDebugELF compares the references of host libraries
// with debug/elf's reading of their .dynsym section: the undefined global
// and weak symbols of default or protected visibility, with their
// versions, that a relocation section names (ld.so looks up no other).
func TestReferencesMatchDebugELF(t *testing.T) {
	for _, p := range hostLibraries(t, 200) {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		syms, err := f.DynamicSymbols()
		relocated := relocatedBySections(f)
		f.Close()
		if err != nil {
			continue
		}
		var want []string
		for i, s := range syms {
			if !relocated[uint64(i+1)] { // DynamicSymbols leaves out index 0
				continue
			}
			bind, vis := elf.ST_BIND(s.Info), elf.ST_VISIBILITY(s.Other)
			if s.Section != elf.SHN_UNDEF || s.Name == "" || (bind != elf.STB_GLOBAL && bind != elf.STB_WEAK) || vis == elf.STV_HIDDEN || vis == elf.STV_INTERNAL {
				continue
			}
			want = append(want, fmt.Sprintf("%s@%s weak=%v", s.Name, s.Version, bind == elf.STB_WEAK))
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		refs, err := NewFile(bytes.NewReader(data), int64(len(data)), p).References()
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		var got []string
		for _, r := range refs {
			got = append(got, fmt.Sprintf("%s@%s weak=%v", r.Name, r.Version, r.Weak))
		}
		// The same references one at a time, each name made by the
		// caller from bytes that are its own only during the call.
		kept := map[string]string{}
		var each []string
		err = NewFile(bytes.NewReader(data), int64(len(data)), p).EachReference(func(b []byte) string {
			if k, ok := kept[string(b)]; ok {
				return k
			}
			k := string(b)
			kept[k] = k
			return k
		}, func(r *Reference) { each = append(each, fmt.Sprintf("%s@%s weak=%v", r.Name, r.Version, r.Weak)) })
		if err != nil || !slices.Equal(each, got) {
			t.Errorf("%s: EachReference (%v) differs from References\n got %v\nwant %v", p, err, each, got)
		}
		sort.Strings(got)
		sort.Strings(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: references differ from debug/elf's\n got %v\nwant %v", p, got, want)
		}
	}
}

// relocatedBySections reads the relocation sections against .dynsym through
// the section headers, a path independent of the dynamic section's tags.
func relocatedBySections(f *elf.File) map[uint64]bool {
	out := map[uint64]bool{}
	dynsym := -1
	for i, sec := range f.Sections {
		if sec.Type == elf.SHT_DYNSYM {
			dynsym = i
		}
	}
	for _, sec := range f.Sections {
		if (sec.Type != elf.SHT_RELA && sec.Type != elf.SHT_REL) || int(sec.Link) != dynsym || f.Class != elf.ELFCLASS64 {
			continue
		}
		data, err := sec.Data()
		if err != nil {
			continue
		}
		ent := 16
		if sec.Type == elf.SHT_RELA {
			ent = 24
		}
		for off := 0; off+ent <= len(data); off += ent {
			info := f.ByteOrder.Uint64(data[off+8:])
			if sym, typ := info>>32, info&0xffffffff; sym != 0 && typ != 0 {
				out[sym] = true
			}
		}
	}
	return out
}

// TestSymbolTablesOfDamagedFiles reads and looks up symbols of an object
// damaged byte by byte: an error or an answer, never a panic.
func TestSymbolTablesOfDamagedFiles(t *testing.T) {
	good, err := elfwrite.BuildLinked(elfwrite.Linked{Soname: "libd.so.1", Needed: []string{"libc.so.6"}, VersionDefs: []string{"D_1"}, GNUHash: true,
		VersionNeeds: []elfwrite.VersionNeed{{File: "libc.so.6", Versions: []string{"GLIBC_2.2.5"}}},
		Defs:         []elfwrite.Def{{Name: "d_one", Version: "D_1"}, {Name: "d_two"}},
		Refs:         []elfwrite.Ref{{Name: "malloc", Version: "GLIBC_2.2.5"}, {Name: "hook", Weak: true}}})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := NewFile(bytes.NewReader(good), int64(len(good)), "good").References()
	if err != nil || fmt.Sprint(refs) == "" || len(refs) != 2 || refs[0].Name != "malloc" || refs[0].Version != "GLIBC_2.2.5" || !refs[1].Weak {
		t.Fatalf("the undamaged object reads %v, %v", refs, err)
	}
	// Every byte after the ELF header, flipped three ways: the walks are
	// bounded (a hang or a huge allocation fails the test by its limits).
	for i := 64; i < len(good); i++ {
		for _, v := range []byte{0xff, 0x00, 0x80} {
			b := append([]byte(nil), good...)
			b[i] ^= v
			_, _ = NewFile(bytes.NewReader(b), int64(len(b)), "damaged").References()
			tab, err := NewFile(bytes.NewReader(b), int64(len(b)), "damaged").SymbolTable()
			if err != nil {
				continue
			}
			_ = tab.Lookup("d_one", HashOf("d_one"), func(Definition) bool { return true })
			tab.Close()
		}
	}
}
