package elfscan

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/fuzzseed"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// hostLibraries returns real ELF shared objects of this machine, the largest
// first, as an independent corpus.
func hostLibraries(t testing.TB, max int) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu"} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && strings.Contains(d.Name(), ".so") && len(out) < max {
				out = append(out, p)
			}
			return nil
		})
		if len(out) > 0 {
			break
		}
	}
	lddtest.Need(t, len(out) > 0, "no shared libraries found on this machine")
	return out
}

// stdlibView reads the same facts through debug/elf's section-based API, an
// independent implementation to compare against.
type stdlibView struct {
	Soname, RPath, RunPath string
	Needed                 []string
	VersionNeeds           map[string][]string
	VersionDefs            []string
}

func viewFromStdlib(t *testing.T, path string) (*stdlibView, bool) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if f.Section(".dynamic") == nil {
		return nil, false
	}
	v := &stdlibView{VersionNeeds: map[string][]string{}}
	v.Needed, _ = f.DynString(elf.DT_NEEDED)
	if s, _ := f.DynString(elf.DT_SONAME); len(s) > 0 {
		v.Soname = s[len(s)-1]
	}
	if s, _ := f.DynString(elf.DT_RPATH); len(s) > 0 {
		v.RPath = s[len(s)-1]
	}
	if s, _ := f.DynString(elf.DT_RUNPATH); len(s) > 0 {
		v.RunPath = s[len(s)-1]
	}
	needs, err := f.DynamicVersionNeeds()
	if err == nil {
		for _, n := range needs {
			for _, x := range n.Needs {
				v.VersionNeeds[n.Name] = append(v.VersionNeeds[n.Name], x.Dep)
			}
		}
	}
	defs, err := f.DynamicVersions()
	if err == nil {
		for _, d := range defs {
			v.VersionDefs = append(v.VersionDefs, d.Name)
		}
	}
	return v, true
}

func viewFromInfo(in *Info) *stdlibView {
	v := &stdlibView{Soname: in.Soname, RPath: in.RPath, RunPath: in.RunPath, Needed: in.Needed, VersionNeeds: map[string][]string{}}
	for _, n := range in.VersionNeeds {
		for _, x := range n.Versions {
			v.VersionNeeds[n.File] = append(v.VersionNeeds[n.File], x.Name)
		}
	}
	for _, d := range in.VersionDefs {
		v.VersionDefs = append(v.VersionDefs, d.Name)
	}
	return v
}

func TestMatchesDebugELFOnHostLibraries(t *testing.T) {
	libs := hostLibraries(t, 400)
	compared := 0
	for _, p := range libs {
		want, ok := viewFromStdlib(t, p)
		if !ok {
			continue
		}
		in, err := ReadInfo(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		got := viewFromInfo(in)
		if !reflect.DeepEqual(normal(got), normal(want)) {
			t.Errorf("%s:\n got %+v\nwant %+v", p, got, want)
		}
		compared++
	}
	if compared < 20 {
		t.Fatalf("only %d libraries compared", compared)
	}
}

func normal(v *stdlibView) *stdlibView {
	c := *v
	if len(c.Needed) == 0 {
		c.Needed = nil
	}
	if len(c.VersionDefs) == 0 {
		c.VersionDefs = nil
	}
	return &c
}

// stripSections removes the section header table the way sstrip does.
func stripSections(t *testing.T, data []byte) []byte {
	out := append([]byte(nil), data...)
	if elf.Class(out[elf.EI_CLASS]) == elf.ELFCLASS64 {
		copy(out[40:48], make([]byte, 8))
		copy(out[60:64], make([]byte, 4))
	} else {
		copy(out[32:36], make([]byte, 4))
		copy(out[48:52], make([]byte, 4))
	}
	return out
}

func TestWithoutSectionHeaders(t *testing.T) {
	for _, p := range hostLibraries(t, 60) {
		if st, err := os.Stat(p); err != nil || st.Size() > 16<<20 {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		want, err := NewFile(bytes.NewReader(data), int64(len(data)), p).Info()
		if err != nil {
			continue
		}
		stripped := stripSections(t, data)
		got, err := NewFile(bytes.NewReader(stripped), int64(len(stripped)), p).Info()
		if err != nil {
			t.Fatalf("%s without section headers: %v", p, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: reads differently without section headers", p)
		}
		// A section table pointing outside the file must not matter either.
		broken := append([]byte(nil), data...)
		if elf.Class(broken[elf.EI_CLASS]) == elf.ELFCLASS64 {
			copy(broken[40:48], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0})
		}
		got, err = NewFile(bytes.NewReader(broken), int64(len(broken)), p).Info()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s with a broken section table: %v", p, err)
		}
	}
}

func TestEveryClassAndByteOrder(t *testing.T) {
	for _, tc := range []struct {
		class   elf.Class
		data    elf.Data
		machine elf.Machine
	}{
		{elf.ELFCLASS64, elf.ELFDATA2LSB, elf.EM_X86_64},
		{elf.ELFCLASS64, elf.ELFDATA2LSB, elf.EM_AARCH64},
		{elf.ELFCLASS32, elf.ELFDATA2LSB, elf.EM_386},
		{elf.ELFCLASS32, elf.ELFDATA2LSB, elf.EM_ARM},
		{elf.ELFCLASS64, elf.ELFDATA2MSB, elf.EM_PPC64},
		{elf.ELFCLASS64, elf.ELFDATA2MSB, elf.EM_S390},
		{elf.ELFCLASS32, elf.ELFDATA2MSB, elf.EM_MIPS},
	} {
		for _, noSections := range []bool{false, true} {
			name := fmt.Sprintf("%v-%v-%v-nosections=%v", tc.class, tc.data, tc.machine, noSections)
			spec := elfwrite.Spec{
				Class: tc.class, Data: tc.data, Machine: tc.machine, Interp: "/lib/ld.so.1",
				Soname: "libx.so.3", Needed: []string{"liba.so.1", "libb.so.2"},
				RPath: elfwrite.Str("$ORIGIN/../lib"), RunPath: elfwrite.Str("/opt/x"), Flags1: elf.DF_1_NODEFLIB,
				VersionNeeds:     []elfwrite.VersionNeed{{File: "liba.so.1", Versions: []string{"A_1", "A_2"}, Weak: []bool{false, true}}},
				VersionDefs:      []string{"X_1", "X_2"},
				NoSectionHeaders: noSections,
			}
			data, err := elfwrite.Build(spec)
			if err != nil {
				t.Fatal(err)
			}
			in, err := NewFile(bytes.NewReader(data), int64(len(data)), name).Info()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if in.Class != tc.class || in.Data != tc.data || in.Machine != tc.machine || in.Interp != "/lib/ld.so.1" ||
				in.Soname != "libx.so.3" || strings.Join(in.Needed, ",") != "liba.so.1,libb.so.2" ||
				in.RPath != "$ORIGIN/../lib" || !in.HasRPath || in.RunPath != "/opt/x" || !in.NoDefaultLib() {
				t.Errorf("%s: read %+v", name, in)
			}
			if len(in.VersionNeeds) != 1 || in.VersionNeeds[0].File != "liba.so.1" || len(in.VersionNeeds[0].Versions) != 2 ||
				in.VersionNeeds[0].Versions[0].Weak() || !in.VersionNeeds[0].Versions[1].Weak() ||
				in.VersionNeeds[0].Versions[1].Hash != elfwrite.Hash("A_2") {
				t.Errorf("%s: version needs %+v", name, in.VersionNeeds)
			}
			if len(in.VersionDefs) != 3 || !in.VersionDefs[0].Base() || in.VersionDefs[0].Name != "libx.so.3" || !in.HasVersion("X_2", elfwrite.Hash("X_2")) || in.HasVersion("X_3", elfwrite.Hash("X_3")) {
				t.Errorf("%s: version defs %+v", name, in.VersionDefs)
			}
		}
	}
}

func TestNotELF(t *testing.T) {
	for _, body := range []string{"", "\x7fEL", "/* GNU ld script */\nGROUP ( /lib/x86_64-linux-gnu/libc.so.6 )\n", "#!/usr/bin/env python3\n"} {
		_, err := NewFile(strings.NewReader(body), int64(len(body)), "x").Info()
		if !errors.Is(err, ErrNotELF) {
			t.Errorf("%q: err = %v, want ErrNotELF", body, err)
		}
	}
}

func TestCorruptFilesFailCleanly(t *testing.T) {
	good, err := elfwrite.Build(elfwrite.Spec{Soname: "libq.so", Needed: []string{"liba.so"}, VersionNeeds: []elfwrite.VersionNeed{{File: "liba.so", Versions: []string{"V"}}}, VersionDefs: []string{"Q"}})
	if err != nil {
		t.Fatal(err)
	}
	// Every truncation, and a byte set to 0xff at every offset: never a
	// panic; an error always names the file.
	for n := 4; n < len(good); n++ {
		_, err := NewFile(bytes.NewReader(good[:n]), int64(n), "trunc.so").Info()
		if err != nil && !strings.Contains(err.Error(), "trunc.so") {
			t.Fatalf("truncated at %d: error %q does not name the file", n, err)
		}
	}
	for i := 0; i < len(good); i++ {
		bad := append([]byte(nil), good...)
		bad[i] = 0xff
		_, err := NewFile(bytes.NewReader(bad), int64(len(bad)), "flip.so").Info()
		if err != nil && !strings.Contains(err.Error(), "flip.so") {
			t.Fatalf("flip at %d: error %q does not name the file", i, err)
		}
	}
}

func TestReadsOnlyWhatItNeeds(t *testing.T) {
	libs := hostLibraries(t, 2000)
	var biggest string
	var size int64
	for _, p := range libs {
		if st, err := os.Stat(p); err == nil && st.Size() > size {
			biggest, size = p, st.Size()
		}
	}
	f, err := os.Open(biggest)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ef := NewFile(f, size, biggest)
	_, err = ef.Info()
	st := ef.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes, read %d bytes in %d reads", biggest, size, st.BytesRead, st.Reads)
	if st.BytesRead > 256<<10 {
		t.Errorf("read %d bytes of %s, want under 256 KiB", st.BytesRead, biggest)
	}
}

func TestZipMembers(t *testing.T) {
	libs := hostLibraries(t, 30)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	want := map[string]*Info{}
	for i, p := range libs {
		if st, err := os.Stat(p); err != nil || st.Size() > 4<<20 {
			continue // keep the archive small: deflating is the slow part
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		in, err := NewFile(bytes.NewReader(data), int64(len(data)), p).Info()
		if err != nil {
			continue
		}
		method := zip.Deflate
		if i%3 == 0 {
			method = zip.Store
		}
		name := fmt.Sprintf("pkg/lib/%d-%s", i, filepath.Base(p))
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		want[name] = in
	}
	w, _ := zw.Create("pkg/__init__.py")
	_, _ = w.Write([]byte("import os\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	ra := bytes.NewReader(buf.Bytes())
	zr, err := zip.NewReader(ra, int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		in, err := readMember(ra, f)
		if f.Name == "pkg/__init__.py" {
			if !errors.Is(err, ErrNotELF) {
				t.Errorf("python file: %v, want ErrNotELF", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if !reflect.DeepEqual(in, want[f.Name]) {
			t.Errorf("%s: member reads differently from the file", f.Name)
		}
	}
}

// readSeeds are FuzzRead's seed corpus (testdata/fuzz/FuzzRead): 64-bit
// little-endian with RPATH, 32-bit without section headers, big-endian
// with version definitions.
func readSeeds(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	for name, spec := range map[string]elfwrite.Spec{
		"rpath":      {Soname: "liba.so", Needed: []string{"libb.so"}, RPath: elfwrite.Str("$ORIGIN")},
		"elf32":      {Class: elf.ELFCLASS32, Machine: elf.EM_386, Soname: "x", VersionNeeds: []elfwrite.VersionNeed{{File: "libc.so.6", Versions: []string{"GLIBC_2.0"}}}, NoSectionHeaders: true},
		"big-endian": {Data: elf.ELFDATA2MSB, Machine: elf.EM_PPC64, VersionDefs: []string{"V1", "V2"}, Soname: "libv.so"},
	} {
		b, err := elfwrite.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		seeds[name] = b
	}
	return seeds
}

// TestFuzzReadSeeds keeps the committed seed corpus what readSeeds makes
// (CUDADEPS_UPDATE_SEEDS=1 rewrites it).
func TestFuzzReadSeeds(t *testing.T) {
	fuzzseed.Check(t, "FuzzRead", readSeeds(t))
}

func FuzzRead(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := NewFile(bytes.NewReader(data), int64(len(data)), "fuzz.so").Info()
		if err == nil && info == nil {
			t.Fatal("nil info without error")
		}
		if err != nil && !errors.Is(err, ErrNotELF) && !strings.Contains(err.Error(), "fuzz.so") {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}
