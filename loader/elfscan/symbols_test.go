package elfscan

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/elfhash"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/fuzzseed"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// cudartSpec is a library shaped like libcudart.so.12: versioned definitions
// of its own, and versioned references to glibc.
func cudartSpec() elfwrite.Spec {
	return elfwrite.Spec{
		Soname:      "libcudart.so.12",
		Needed:      []string{"libc.so.6", "libdl.so.2"},
		VersionDefs: []string{"libcudart.so.12"},
		VersionNeeds: []elfwrite.VersionNeed{
			{File: "libc.so.6", Versions: []string{"GLIBC_2.2.5", "GLIBC_2.34"}},
			{File: "libdl.so.2", Versions: []string{"GLIBC_2.2.5"}},
		},
		Symbols: []elfwrite.Symbol{
			{Name: "__cudaRegisterFatBinary", Defined: true, Func: true, Version: "libcudart.so.12"},
			{Name: "cudaMalloc", Defined: true, Func: true, Version: "libcudart.so.12"},
			{Name: "cudaGetDeviceCount", Defined: true, Func: true, Version: "libcudart.so.12"},
			{Name: "__cudart_internal", Defined: true, Func: true},
			{Name: "malloc", Func: true, Version: "GLIBC_2.2.5"},
			{Name: "dlsym", Func: true, Version: "GLIBC_2.34"},
			{Name: "__gmon_start__"},
		},
	}
}

func writeSpec(t *testing.T, spec elfwrite.Spec) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lib.so")
	if err := elfwrite.Write(path, spec); err != nil {
		t.Fatal(err)
	}
	return path
}

// want lists what a spec says its symbols are, in String form.
func want(spec elfwrite.Spec) []string {
	fileOf := map[string]string{}
	for _, vn := range spec.VersionNeeds {
		for _, v := range vn.Versions {
			fileOf[v] = vn.File
		}
	}
	var out []string
	for _, s := range spec.Symbols {
		sym := Symbol{Name: s.Name, Defined: s.Defined, Version: s.Version}
		if !s.Defined && s.Version != "" {
			sym.File = fileOf[s.Version]
		}
		out = append(out, sym.String()+" "+sym.File)
	}
	return out
}

func got(syms []Symbol) []string {
	var out []string
	for _, s := range syms {
		out = append(out, s.String()+" "+s.File)
	}
	return out
}

func TestReadSymbolsMatchesSpec(t *testing.T) {
	machines := []struct {
		name  string
		class elf.Class
		data  elf.Data
		mach  elf.Machine
	}{
		{"x86_64", elf.ELFCLASS64, elf.ELFDATA2LSB, elf.EM_X86_64},
		{"aarch64", elf.ELFCLASS64, elf.ELFDATA2LSB, elf.EM_AARCH64},
		{"ppc64-big-endian", elf.ELFCLASS64, elf.ELFDATA2MSB, elf.EM_PPC64},
		{"armhf-32", elf.ELFCLASS32, elf.ELFDATA2LSB, elf.EM_ARM},
		{"mips-32-big-endian", elf.ELFCLASS32, elf.ELFDATA2MSB, elf.EM_MIPS},
	}
	for _, m := range machines {
		for _, noSections := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/nosections=%v", m.name, noSections), func(t *testing.T) {
				spec := cudartSpec()
				spec.Class, spec.Data, spec.Machine = m.class, m.data, m.mach
				spec.NoSectionHeaders = noSections
				syms, err := symbolsOfFile(writeSpec(t, spec), nil)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := got(syms), want(spec); !slices.Equal(g, w) {
					t.Fatalf("symbols\n got %q\nwant %q", g, w)
				}
				for i, s := range syms {
					ws := spec.Symbols[i]
					wantType := elf.STT_OBJECT
					if ws.Func {
						wantType = elf.STT_FUNC
					}
					if s.Type != wantType || s.Bind != elf.STB_GLOBAL {
						t.Errorf("%s: type %v bind %v, want %v STB_GLOBAL", s.Name, s.Type, s.Bind, wantType)
					}
				}
			})
		}
	}
}

func TestSymbolString(t *testing.T) {
	for _, c := range []struct {
		s    Symbol
		want string
	}{
		{Symbol{Name: "cuInit", Defined: true}, "cuInit"},
		{Symbol{Name: "__cudaRegisterFatBinary", Defined: true, Version: "libcudart.so.12"}, "__cudaRegisterFatBinary@@libcudart.so.12"},
		{Symbol{Name: "memcpy", Defined: true, Version: "GLIBC_2.2.5", Hidden: true}, "memcpy@GLIBC_2.2.5"},
		{Symbol{Name: "malloc", Version: "GLIBC_2.2.5", File: "libc.so.6"}, "malloc@GLIBC_2.2.5"},
	} {
		if g := c.s.String(); g != c.want {
			t.Errorf("%+v: %q, want %q", c.s, g, c.want)
		}
	}
}

func TestReadSymbolsFilter(t *testing.T) {
	spec := cudartSpec()
	path := writeSpec(t, spec)
	var seen []string
	syms, err := symbolsOfFile(path, func(name string, defined bool) bool {
		seen = append(seen, fmt.Sprintf("%s:%v", name, defined))
		return defined && strings.HasPrefix(name, "cuda")
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range syms {
		names = append(names, s.String())
	}
	if w := []string{"cudaMalloc@@libcudart.so.12", "cudaGetDeviceCount@@libcudart.so.12"}; !slices.Equal(names, w) {
		t.Errorf("kept %q, want %q", names, w)
	}
	// The filter sees every symbol but the null one, with the right definedness.
	var wantSeen []string
	for _, s := range spec.Symbols {
		wantSeen = append(wantSeen, fmt.Sprintf("%s:%v", s.Name, s.Defined))
	}
	if !slices.Equal(seen, wantSeen) {
		t.Errorf("filter saw %q, want %q", seen, wantSeen)
	}
}

func TestReadSymbolsWithoutVersions(t *testing.T) {
	spec := elfwrite.Spec{
		Soname: "libcuda.so.1",
		Symbols: []elfwrite.Symbol{
			{Name: "cuInit", Defined: true, Func: true},
			{Name: "cuDriverGetVersion", Defined: true, Func: true},
			{Name: "dlopen", Func: true},
		},
	}
	syms, err := symbolsOfFile(writeSpec(t, spec), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := got(syms), want(spec); !slices.Equal(g, w) {
		t.Fatalf("got %q, want %q", g, w)
	}
}

// withGNUHash rewrites an object built by elfwrite (without section headers)
// so that it carries a DT_GNU_HASH table instead of DT_HASH, the way modern
// toolchains link. The symbols of spec must be ordered as gnuOrder leaves them.
func withGNUHash(t testing.TB, spec elfwrite.Spec, nbuckets uint32) []byte {
	t.Helper()
	spec.NoSectionHeaders = true
	b, err := elfwrite.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	order := f.ByteOrder
	is64 := f.Class == elf.ELFCLASS64
	word := 4
	if is64 {
		word = 8
	}
	// Symbols 1..symoffset-1 are the undefined ones, not hashed.
	symoffset := uint32(1)
	for _, s := range spec.Symbols {
		if s.Defined {
			break
		}
		symoffset++
	}
	nsyms := uint32(len(spec.Symbols) + 1)
	var tab bytes.Buffer
	w32 := func(v uint32) { _ = binary.Write(&tab, order, v) }
	w32(nbuckets)
	w32(symoffset)
	w32(1) // one bloom word
	w32(6) // bloom shift
	tab.Write(bytes.Repeat([]byte{0xff}, word))
	buckets := make([]uint32, nbuckets)
	chains := make([]uint32, nsyms-symoffset)
	for i := symoffset; i < nsyms; i++ {
		h := elfhash.GNU(spec.Symbols[i-1].Name)
		bk := h % nbuckets
		if buckets[bk] == 0 {
			buckets[bk] = i
		}
		end := i+1 == nsyms || elfhash.GNU(spec.Symbols[i].Name)%nbuckets != bk
		chains[i-symoffset] = h &^ 1
		if end {
			chains[i-symoffset] |= 1
		}
	}
	for _, v := range buckets {
		w32(v)
	}
	for _, v := range chains {
		w32(v)
	}
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	tabOff := uint64(len(b))
	b = append(b, tab.Bytes()...)

	// Grow PT_LOAD over the table and point DT_HASH's entry at it as DT_GNU_HASH.
	var phoff, phentsize int
	if is64 {
		phoff, phentsize = int(order.Uint64(b[32:])), int(order.Uint16(b[54:]))
	} else {
		phoff, phentsize = int(order.Uint32(b[28:])), int(order.Uint16(b[42:]))
	}
	for i, p := range f.Progs {
		ph := b[phoff+i*phentsize:]
		switch p.Type {
		case elf.PT_LOAD:
			if is64 {
				order.PutUint64(ph[32:], uint64(len(b)))
				order.PutUint64(ph[40:], uint64(len(b)))
			} else {
				order.PutUint32(ph[16:], uint32(len(b)))
				order.PutUint32(ph[20:], uint32(len(b)))
			}
		case elf.PT_DYNAMIC:
			ent := 16
			if !is64 {
				ent = 8
			}
			for off := int(p.Off); off+ent <= int(p.Off+p.Filesz); off += ent {
				if is64 && elf.DynTag(order.Uint64(b[off:])) == elf.DT_HASH {
					order.PutUint64(b[off:], uint64(elf.DT_GNU_HASH))
					order.PutUint64(b[off+8:], tabOff)
				}
				if !is64 && elf.DynTag(order.Uint32(b[off:])) == elf.DT_HASH {
					order.PutUint32(b[off:], uint32(elf.DT_GNU_HASH))
					order.PutUint32(b[off+4:], uint32(tabOff))
				}
			}
		}
	}
	return b
}

// dynTags decodes the dynamic segment of an elfwrite object (whose virtual
// addresses are file offsets) through the program headers.
func dynTags(t *testing.T, b []byte) map[elf.DynTag]uint64 {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tags := map[elf.DynTag]uint64{}
	for _, p := range f.Progs {
		if p.Type != elf.PT_DYNAMIC {
			continue
		}
		for off := p.Off; off < p.Off+p.Filesz; {
			var tag elf.DynTag
			var val uint64
			if f.Class == elf.ELFCLASS64 {
				tag, val = elf.DynTag(f.ByteOrder.Uint64(b[off:])), f.ByteOrder.Uint64(b[off+8:])
				off += 16
			} else {
				tag, val = elf.DynTag(f.ByteOrder.Uint32(b[off:])), uint64(f.ByteOrder.Uint32(b[off+4:]))
				off += 8
			}
			if tag == elf.DT_NULL {
				break
			}
			tags[tag] = val
		}
	}
	return tags
}

// gnuOrder puts undefined symbols first and groups defined ones by bucket,
// as a linker emitting DT_GNU_HASH does.
func gnuOrder(syms []elfwrite.Symbol, nbuckets uint32) []elfwrite.Symbol {
	out := slices.Clone(syms)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Defined != out[j].Defined {
			return !out[i].Defined
		}
		if !out[i].Defined {
			return false
		}
		return elfhash.GNU(out[i].Name)%nbuckets < elfhash.GNU(out[j].Name)%nbuckets
	})
	return out
}

func TestReadSymbolsGNUHash(t *testing.T) {
	for _, class := range []elf.Class{elf.ELFCLASS64, elf.ELFCLASS32} {
		for _, nbuckets := range []uint32{1, 3, 17} {
			t.Run(fmt.Sprintf("%v/%d-buckets", class, nbuckets), func(t *testing.T) {
				spec := cudartSpec()
				spec.Class = class
				if class == elf.ELFCLASS32 {
					spec.Machine = elf.EM_386
				}
				for i := 0; i < 40; i++ {
					spec.Symbols = append(spec.Symbols, elfwrite.Symbol{Name: fmt.Sprintf("cuFunc%d", i), Defined: true, Func: true, Version: "libcudart.so.12"})
				}
				spec.Symbols = gnuOrder(spec.Symbols, nbuckets)
				b := withGNUHash(t, spec, nbuckets)
				// The loader itself must accept the rewritten object: debug/elf
				// sees DT_GNU_HASH and no DT_HASH.
				tags := dynTags(t, b)
				if _, ok := tags[elf.DT_HASH]; ok {
					t.Fatal("DT_HASH still present")
				}
				if _, ok := tags[elf.DT_GNU_HASH]; !ok {
					t.Fatal("DT_GNU_HASH missing")
				}
				syms, err := NewFile(bytes.NewReader(b), int64(len(b)), "gnu.so").Symbols(nil)
				if err != nil {
					t.Fatal(err)
				}
				if g, w := got(syms), want(spec); !slices.Equal(g, w) {
					t.Fatalf("got %q\nwant %q", g, w)
				}
			})
		}
	}
}

func TestReadSymbolsGNUHashOnlyUndefined(t *testing.T) {
	// Every bucket empty: the count is symoffset.
	spec := elfwrite.Spec{Soname: "libx.so", Symbols: []elfwrite.Symbol{{Name: "malloc", Func: true}, {Name: "free", Func: true}}}
	b := withGNUHash(t, spec, 4)
	syms, err := NewFile(bytes.NewReader(b), int64(len(b)), "x").Symbols(nil)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := got(syms), want(spec); !slices.Equal(g, w) {
		t.Fatalf("got %q, want %q", g, w)
	}
}

// TestReadSymbolsHostLibraries compares with debug/elf on the real libraries
// of this machine, through the section header and, with the section headers
// hidden, through DT_GNU_HASH as the loader sees them.
func TestReadSymbolsHostLibraries(t *testing.T) {
	var libs []string
	for _, pattern := range []string{
		"/lib/*-linux-gnu/libc.so.6", "/usr/lib/*-linux-gnu/libstdc++.so.6", "/lib/*-linux-gnu/libm.so.6",
		"/usr/lib64/libc.so.6", "/usr/lib64/libstdc++.so.6",
	} {
		m, _ := filepath.Glob(pattern)
		libs = append(libs, m...)
	}
	lddtest.Need(t, len(libs) > 0, "no host libraries to compare with")
	for _, lib := range libs {
		t.Run(filepath.Base(lib), func(t *testing.T) {
			f, err := elf.Open(lib)
			lddtest.Need(t, err == nil, "debug/elf, the judge, cannot open %s: %v", lib, err)
			defer f.Close()
			ref, err := f.DynamicSymbols()
			lddtest.Need(t, err == nil, "debug/elf, the judge, cannot read %s: %v", lib, err)
			var want []string
			for _, s := range ref {
				want = append(want, fmt.Sprintf("%s|%s|%v|%v", s.Name, s.Version, s.Section != elf.SHN_UNDEF, elf.ST_TYPE(s.Info)))
			}
			fh, err := os.Open(lib)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			st, _ := fh.Stat()
			for _, skip := range []bool{false, true} {
				ef := NewFile(fh, st.Size(), lib)
				syms, err := ef.symbols(nil, skip)
				stats := ef.Stats()
				if err != nil {
					t.Fatalf("skipSections=%v: %v", skip, err)
				}
				var g []string
				for _, s := range syms {
					g = append(g, fmt.Sprintf("%s|%s|%v|%v", s.Name, s.Version, s.Defined, s.Type))
				}
				if !slices.Equal(g, want) {
					t.Fatalf("skipSections=%v: %d symbols, debug/elf has %d; first difference at %d", skip, len(g), len(want), firstDiff(g, want))
				}
				// The cost is the tables the symbols live in, plus a few pages.
				var tables uint64
				for _, name := range []string{".dynsym", ".dynstr", ".gnu.version"} {
					if sec := f.Section(name); sec != nil {
						tables += sec.Size
					}
				}
				if uint64(stats.BytesRead) > tables+128<<10 {
					t.Errorf("skipSections=%v: read %d bytes; the symbol tables hold %d", skip, stats.BytesRead, tables)
				}
			}
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestReadSymbolsCost: a library with a 512 MiB tail (code, fat binaries)
// costs its symbol and string tables, not the file.
func TestReadSymbolsCost(t *testing.T) {
	spec := cudartSpec()
	b, err := elfwrite.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "libhuge.so")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	const size = 512 << 20
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cr := &countingReader{r: fh}
	ef := NewFile(cr, size, path)
	syms, err := ef.Symbols(nil)
	stats := ef.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(syms) != len(spec.Symbols) {
		t.Fatalf("%d symbols, want %d", len(syms), len(spec.Symbols))
	}
	if cr.n > 64<<10 || stats.BytesRead != cr.n {
		t.Errorf("read %d bytes (stats say %d) of a %d-byte file", cr.n, stats.BytesRead, int64(size))
	}
}

type countingReader struct {
	r interface {
		ReadAt([]byte, int64) (int, error)
	}
	n int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

func TestReadSymbolsNotELFAndStatic(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "libc.so")
	if err := os.WriteFile(script, []byte("/* GNU ld script */\nGROUP ( libc.so.6 )\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := symbolsOfFile(script, nil); !errors.Is(err, ErrNotELF) {
		t.Errorf("linker script: %v, want ErrNotELF", err)
	}
	if _, err := symbolsOfFile(dir, nil); err == nil {
		t.Error("a directory read as an ELF object")
	}
	// An object without PT_DYNAMIC (a static executable) has no dynamic symbols.
	spec := cudartSpec()
	b, err := elfwrite.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	phoff := int(binary.LittleEndian.Uint64(b[32:]))
	for i, p := range f.Progs {
		if p.Type == elf.PT_DYNAMIC {
			binary.LittleEndian.PutUint32(b[phoff+i*56:], uint32(elf.PT_NOTE))
		}
	}
	syms, err := NewFile(bytes.NewReader(b), int64(len(b)), "static").Symbols(nil)
	if err != nil || syms != nil {
		t.Errorf("static object: %v, %v; want no symbols and no error", syms, err)
	}
}

func TestReadSymbolsBadVersionIndex(t *testing.T) {
	b, err := elfwrite.Build(cudartSpec())
	if err != nil {
		t.Fatal(err)
	}
	versym, ok := dynTags(t, b)[elf.DT_VERSYM]
	if !ok {
		t.Fatal("no DT_VERSYM")
	}
	// Symbol 1 now claims version index 77, which nothing defines.
	binary.LittleEndian.PutUint16(b[versym+2:], 77)
	_, err = NewFile(bytes.NewReader(b), int64(len(b)), "bad.so").Symbols(nil)
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "version index 77") {
		t.Errorf("got %v, want a FormatError naming version index 77", err)
	}
}

// TestReadSymbolsDamaged truncates and corrupts a real object at every
// offset: the reader must return, with symbols or an error, and never panic
// or run away.
func TestReadSymbolsDamaged(t *testing.T) {
	for _, noSections := range []bool{false, true} {
		spec := cudartSpec()
		spec.NoSectionHeaders = noSections
		b, err := elfwrite.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(b); n++ {
			_, _ = NewFile(bytes.NewReader(b[:n]), int64(n), "truncated").Symbols(nil)
		}
		for i := 0; i < len(b); i++ {
			for _, v := range []byte{0x00, 0xff, 0x7f, 0x80} {
				c := slices.Clone(b)
				c[i] = v
				_, _ = NewFile(bytes.NewReader(c), int64(len(c)), "corrupt").Symbols(nil)
			}
		}
	}
	gnu := withGNUHash(t, cudartSpec(), 1)
	for i := 0; i < len(gnu); i++ {
		c := slices.Clone(gnu)
		c[i] ^= 0xff
		_, _ = NewFile(bytes.NewReader(c), int64(len(c)), "corrupt-gnu").Symbols(nil)
	}
}

// symbolSeeds are FuzzReadSymbols' seed corpus
// (testdata/fuzz/FuzzReadSymbols): a small object with versioned
// definitions and references, with and without section headers, and with
// a DT_GNU_HASH table. A few hundred bytes each, so that the fuzzer
// mutates rather than minimises.
func symbolSeeds(t testing.TB) map[string][]byte {
	spec := elfwrite.Spec{
		Soname:       "libs.so.1",
		VersionDefs:  []string{"S_1"},
		VersionNeeds: []elfwrite.VersionNeed{{File: "libc.so.6", Versions: []string{"GLIBC_2.34"}}},
		Symbols: []elfwrite.Symbol{
			{Name: "cudaMalloc", Defined: true, Func: true, Version: "S_1"},
			{Name: "local", Defined: true},
			{Name: "malloc", Func: true, Version: "GLIBC_2.34"},
		},
		NoSectionHeaders: true,
	}
	seeds := map[string][]byte{"gnu-hash": withGNUHash(t, spec, 2)}
	for name, noSections := range map[string]bool{"sections": false, "no-sections": true} {
		spec.NoSectionHeaders = noSections
		b, err := elfwrite.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		seeds[name] = b
	}
	return seeds
}

// TestFuzzReadSymbolsSeeds keeps the committed seed corpus what
// symbolSeeds makes (CUDADEPS_UPDATE_SEEDS=1 rewrites it).
func TestFuzzReadSymbolsSeeds(t *testing.T) {
	fuzzseed.Check(t, "FuzzReadSymbols", symbolSeeds(t))
}

func FuzzReadSymbols(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		syms, err := NewFile(bytes.NewReader(b), int64(len(b)), "fuzz").Symbols(nil)
		if err != nil && syms != nil {
			t.Fatal("symbols returned with an error")
		}
		defs, _, err := lookupStats(NewFile(bytes.NewReader(b), int64(len(b)), "fuzz"), []string{"cudaMalloc", "malloc", "cuInit"}...)
		if err != nil && defs != nil {
			t.Fatal("definitions returned with an error")
		}
		for _, d := range defs {
			if !d.Defined {
				t.Fatalf("lookup returned an undefined symbol %s", d)
			}
		}
	})
}

func symStrings(syms []Symbol) []string {
	var out []string
	for _, s := range syms {
		out = append(out, s.String())
	}
	return out
}

func TestLookupSymbols(t *testing.T) {
	names := []string{"cudaMalloc", "__cudaRegisterFatBinary", "malloc", "cuInit", "cudaMalloc"}
	wantDefs := []string{"cudaMalloc@@libcudart.so.12", "__cudaRegisterFatBinary@@libcudart.so.12"}

	t.Run("DT_HASH", func(t *testing.T) {
		syms, err := lookupFile(writeSpec(t, cudartSpec()), names...)
		if err != nil {
			t.Fatal(err)
		}
		if g := symStrings(syms); !slices.Equal(g, wantDefs) {
			t.Errorf("got %q, want %q (malloc is only referenced, cuInit absent)", g, wantDefs)
		}
	})
	for _, nb := range []uint32{1, 2, 7, 64} {
		t.Run(fmt.Sprintf("DT_GNU_HASH/%d", nb), func(t *testing.T) {
			spec := cudartSpec()
			for i := 0; i < 50; i++ {
				spec.Symbols = append(spec.Symbols, elfwrite.Symbol{Name: fmt.Sprintf("cudaFunc%d", i), Defined: true, Func: true, Version: "libcudart.so.12"})
			}
			spec.Symbols = gnuOrder(spec.Symbols, nb)
			b := withGNUHash(t, spec, nb)
			syms, _, err := lookupStats(NewFile(bytes.NewReader(b), int64(len(b)), "gnu"), append(names, "cudaFunc49", "cudaFunc7")...)
			if err != nil {
				t.Fatal(err)
			}
			w := append(slices.Clone(wantDefs), "cudaFunc49@@libcudart.so.12", "cudaFunc7@@libcudart.so.12")
			if g := symStrings(syms); !slices.Equal(g, w) {
				t.Errorf("got %q, want %q", g, w)
			}
		})
	}
}

// TestLookupSymbolsHostLibraries looks names up in this machine's libc
// through its DT_GNU_HASH and compares with the definitions debug/elf lists.
func TestLookupSymbolsHostLibraries(t *testing.T) {
	libs, _ := filepath.Glob("/lib/*-linux-gnu/libc.so.6")
	m, _ := filepath.Glob("/usr/lib64/libc.so.6")
	libs = append(libs, m...)
	lddtest.Need(t, len(libs) > 0, "no host libc")
	names := []string{"memcpy", "malloc", "dlsym", "pthread_create", "realpath", "no_such_symbol_anywhere", "__libc_start_main"}
	for _, lib := range libs {
		f, err := elf.Open(lib)
		lddtest.Need(t, err == nil, "debug/elf, the judge, cannot open %s: %v", lib, err)
		ref, err := f.DynamicSymbols()
		f.Close()
		lddtest.Need(t, err == nil, "debug/elf, the judge, cannot read %s: %v", lib, err)
		var want []string
		for _, n := range names {
			for _, s := range ref {
				if s.Name == n && s.Section != elf.SHN_UNDEF {
					want = append(want, s.Name+"@"+s.Version)
				}
			}
		}
		syms, err := lookupFile(lib, names...)
		if err != nil {
			t.Fatal(err)
		}
		var g []string
		for _, s := range syms {
			g = append(g, s.Name+"@"+s.Version)
		}
		if !slices.Equal(g, want) {
			t.Errorf("%s: got %q, want %q", lib, g, want)
		}
		if len(want) < 4 {
			t.Errorf("%s: only %d definitions found; the comparison proves little", lib, len(want))
		}
	}
}

// TestLookupSymbolsCost: looking two names up in a table of 20000 symbols
// reads a small fraction of what reading the table does.
func TestLookupSymbolsCost(t *testing.T) {
	spec := elfwrite.Spec{Soname: "libbig.so", VersionDefs: []string{"BIG_1"}}
	for i := 0; i < 20000; i++ {
		spec.Symbols = append(spec.Symbols, elfwrite.Symbol{Name: fmt.Sprintf("_ZN5torch8internal6symbol%dEv", i), Defined: true, Func: true, Version: "BIG_1"})
	}
	const nb = 4096
	spec.Symbols = gnuOrder(spec.Symbols, nb)
	b := withGNUHash(t, spec, nb)
	bigFile := NewFile(bytes.NewReader(b), int64(len(b)), "big")
	all, err := bigFile.Symbols(nil)
	full := bigFile.Stats()
	if err != nil || len(all) != 20000 {
		t.Fatalf("read: %d symbols, %v", len(all), err)
	}
	syms, cost, err := lookupStats(NewFile(bytes.NewReader(b), int64(len(b)), "big"), []string{"_ZN5torch8internal6symbol12345Ev", "absent"}...)
	if err != nil {
		t.Fatal(err)
	}
	if g := symStrings(syms); !slices.Equal(g, []string{"_ZN5torch8internal6symbol12345Ev@@BIG_1"}) {
		t.Errorf("got %q", g)
	}
	if cost.BytesRead*20 > full.BytesRead {
		t.Errorf("lookup read %d bytes, a full read %d", cost.BytesRead, full.BytesRead)
	}
}

func TestLookupSymbolsDamaged(t *testing.T) {
	gnu := withGNUHash(t, cudartSpec(), 3)
	plain, err := elfwrite.Build(cudartSpec())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{gnu, plain} {
		for i := 0; i < len(b); i++ {
			for _, v := range []byte{0x00, 0xff, 0x80} {
				c := slices.Clone(b)
				c[i] = v
				_, _, _ = lookupStats(NewFile(bytes.NewReader(c), int64(len(c)), "corrupt"), []string{"cudaMalloc", "malloc", "x"}...)
			}
		}
	}
}
