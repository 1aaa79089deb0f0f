package gpuarch

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	fb "github.com/cudadeps/cudadeps/internal/testkit/fatbintest"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

func writeLib(t *testing.T, name string, cs ...fb.Container) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := fb.Library(p, name, cs...); err != nil {
		t.Fatal(err)
	}
	return p
}

func archs(codes []Code, ptx bool) []string {
	var out []string
	for _, c := range codes {
		n := c.Target.SASS()
		if ptx {
			n = c.Target.PTX() + "@" + c.ISA.String()
		}
		out = append(out, n+"×"+strconv.Itoa(c.Entries))
	}
	return out
}

// TestReadFixtures: the three nvcc builds of the GPU proof, as fat
// binaries written here, read back entry by entry.
func TestReadFixtures(t *testing.T) {
	cases := []struct {
		name     string
		cs       []fb.Container
		sass     []string
		ptx      []string
		verdict9 Verdict
	}{
		{"sm80", []fb.Container{fb.SASS(80)}, []string{"sm_80×1"}, nil, None},
		{"sm80ptx", []fb.Container{{Entries: []fb.Entry{{Kind: fb.ELF, Arch: 80}, {Kind: fb.PTX, Arch: 80, Major: 9, Minor: 0, LZ: true}}}},
			[]string{"sm_80×1"}, []string{"compute_80@9.0×1"}, JIT},
		{"sm90", []fb.Container{fb.SASS(90)}, []string{"sm_90×1"}, nil, Native},
		{"torch-like", []fb.Container{fb.SASS(75, 80, 86, 90, 100, 120), {Entries: fb.SASS(75, 80, 86, 90, 100, 120).Entries, PadAfter: 8}, fb.SASS(75, 80, 86, 90, 100, 120)},
			[]string{"sm_75×3", "sm_80×3", "sm_86×3", "sm_90×3", "sm_100×3", "sm_120×3"}, nil, Native},
		{"none", nil, nil, nil, NoCode},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeLib(t, "lib"+c.name+".so", c.cs...)
			got, err := ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(archs(got.SASS, false), c.sass) || !slices.Equal(archs(got.PTX, true), c.ptx) || got.Containers != len(c.cs) {
				t.Errorf("containers %d, SASS %v, PTX %v", got.Containers, archs(got.SASS, false), archs(got.PTX, true))
			}
			if j := Judge(CC{9, 0}, Version{13, 0}, got, nil); j.Verdict != c.verdict9 {
				t.Errorf("on 9.0: %s: %s", j.Verdict, j.Reason)
			}
		})
	}
}

// TestReadHeaders: sizes, compression, the strings of the header, other
// kinds, and ELF classes and byte orders of the host object.
func TestReadHeaders(t *testing.T) {
	payload := bytes.Repeat([]byte{1}, 1001)
	p := writeLib(t, "libh.so",
		fb.Container{Entries: []fb.Entry{
			{Kind: fb.ELF, Arch: 90, Identifier: "kernels.sm_90a.cubin", Payload: payload},
			{Kind: fb.ELF, Arch: 100, Options: "-arch sm_100f -O3", Zstd: true, Payload: payload, UncompressedSize: 5000},
			{Kind: fb.PTX, Arch: 90, Identifier: "kernels.ptx", Options: "--gpu-name compute_90a", LZ: true, Payload: payload, UncompressedSize: 7000},
			{Kind: fb.ELF, Arch: 120, Identifier: "sm_90a names another architecture"},
			{Kind: fb.IR, Arch: 90},
			{Kind: 0x40, Arch: 90},
			{Kind: fb.ELF, Arch: 103, ArchSpecific: true},
			{Kind: fb.ELF, Arch: 110, Family: true},
		}, PadAfter: 16},
		fb.PTXFor(80))
	c, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []Code{
		{Target: Target{90, ArchSpecific}, Entries: 1, Bytes: 1008, Size: 1008, VariantKnown: true},
		{Target: Target{100, FamilySpecific}, Entries: 1, Bytes: 1001, Size: 5000, VariantKnown: true},
		{Target: Target{103, ArchSpecific}, Entries: 1, Bytes: 40, Size: 40, VariantKnown: true},
		{Target: Target{110, FamilySpecific}, Entries: 1, Bytes: 40, Size: 40, VariantKnown: true},
		{Target: Target{120, Plain}, Entries: 1, Bytes: 40, Size: 40, VariantKnown: true},
	}
	if !slices.Equal(c.SASS, want) {
		t.Errorf("SASS %+v", c.SASS)
	}
	wantPTX := []Code{
		{Target: Target{80, Plain}, ISA: Version{9, 0}, Entries: 1, Bytes: 40, Size: 40, VariantKnown: true},
		{Target: Target{90, ArchSpecific}, ISA: Version{9, 0}, Entries: 1, Bytes: 1001, Size: 7000, VariantKnown: true},
	}
	if !slices.Equal(c.PTX, wantPTX) {
		t.Errorf("PTX %+v", c.PTX)
	}
	if c.Other[KindIR] != 1 || c.Other[0x40] != 1 || c.Containers != 2 {
		t.Errorf("other %v, containers %d", c.Other, c.Containers)
	}

	// The host object's class and byte order do not matter: the fat
	// binary is little-endian wherever it lies.
	data := fb.Build(fb.SASS(87))
	for _, spec := range []elfwrite.Spec{
		{Class: elf.ELFCLASS32, Machine: elf.EM_ARM},
		{Data: elf.ELFDATA2MSB, Machine: elf.EM_PPC64},
		{Machine: elf.EM_AARCH64},
	} {
		spec.Soname = "libx.so"
		spec.Sections = []elfwrite.Section{{Name: ".note.x", Data: []byte("filler")}, {Name: SectionName, Data: data}}
		b, err := elfwrite.Build(spec)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Read(bytes.NewReader(b), int64(len(b)), "libx.so")
		if err != nil || len(c.SASS) != 1 || c.SASS[0].Target.SM != 87 {
			t.Errorf("%v %v: %+v %v", spec.Class, spec.Data, c, err)
		}
	}

	// No section headers: nothing says where a fat binary would be.
	b, _ := elfwrite.Build(elfwrite.Spec{Soname: "libx.so", NoSectionHeaders: true, Sections: []elfwrite.Section{{Name: SectionName, Data: data}}})
	if c, err := Read(bytes.NewReader(b), int64(len(b)), "x"); err != nil || !c.Empty() {
		t.Errorf("%+v %v", c, err)
	}
	if _, err := Read(bytes.NewReader([]byte("#!/bin/sh\necho not elf\n")), 23, "x"); !errors.Is(err, elfscan.ErrNotELF) {
		t.Errorf("a script: %v", err)
	}
}

// TestReadBroken: each way a fat binary can lie is a one-line error that
// names the file and the offset, never a panic.
func TestReadBroken(t *testing.T) {
	good := fb.Build(fb.SASS(80, 90))
	le := binary.LittleEndian
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string]struct {
		data []byte
		msg  string
	}{
		"container past the section": {mutate(func(b []byte) []byte { le.PutUint64(b[8:], 1<<40); return b }), "runs past the end of the .nv_fatbin section"},
		"entry past the container":   {mutate(func(b []byte) []byte { le.PutUint64(b[16+8:], 1<<20); return b }), "runs past the end of its container"},
		"small entry header":         {mutate(func(b []byte) []byte { le.PutUint32(b[16+4:], 8); return b }), "entry header of 8 bytes"},
		"huge entry header":          {mutate(func(b []byte) []byte { le.PutUint32(b[16+4:], 1<<30); return b }), "entry header of 1073741824 bytes"},
		"unknown version":            {mutate(func(b []byte) []byte { le.PutUint16(b[4:], 2); return b }), "container version 2"},
		"garbage after a container":  {append(append([]byte(nil), good...), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16), "no fat binary container here"},
		"too much padding":           {append(append(append([]byte(nil), good...), make([]byte, 128)...), good...), "more than 64 zero bytes"},
		"odd padding":                {append(append(append([]byte(nil), good...), 0, 0, 0), good...), "no fat binary container here"},
		"truncated entry":            {good[:16+40], "runs past the end"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := elfwrite.Build(elfwrite.Spec{Soname: "libbad.so", Sections: []elfwrite.Section{{Name: SectionName, Data: c.data}}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = Read(bytes.NewReader(b), int64(len(b)), "libbad.so")
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), "libbad.so: ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v, want %q", err, c.msg)
			}
		})
	}
	// Zeros to the end of the section are padding, not an error.
	b, _ := elfwrite.Build(elfwrite.Spec{Soname: "libz.so", Sections: []elfwrite.Section{{Name: SectionName, Data: append(append([]byte(nil), good...), make([]byte, 40)...)}}})
	if c, err := Read(bytes.NewReader(b), int64(len(b)), "libz.so"); err != nil || c.Containers != 1 {
		t.Errorf("%+v %v", c, err)
	}
}

var readelfSectionRE = regexp.MustCompile(`\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)`)

// readelfFatbin asks binutils' readelf where the .nv_fatbin sections are.
func readelfFatbin(t *testing.T, readelf, file string) []span {
	t.Helper()
	out, err := exec.Command(readelf, "-SW", file).CombinedOutput()
	if err != nil {
		t.Fatalf("readelf -SW %s: %v\n%s", file, err, out)
	}
	var spans []span
	for _, line := range strings.Split(string(out), "\n") {
		m := readelfSectionRE.FindStringSubmatch(line)
		if m == nil || m[1] != SectionName {
			continue
		}
		off, _ := strconv.ParseInt(m[2], 16, 64)
		size, _ := strconv.ParseInt(m[3], 16, 64)
		spans = append(spans, span{off, size})
	}
	return spans
}

// TestSectionsAgreeWithReadelf: the section header walk finds the
// .nv_fatbin sections binutils' readelf finds, in objects of every class
// and byte order, and none in the real CUDA libraries of the corpus (which
// embed their kernels elsewhere and load them through the driver API).
func TestSectionsAgreeWithReadelf(t *testing.T) {
	readelf, err := exec.LookPath("readelf")
	lddtest.Need(t, err == nil, "readelf (binutils) is needed as the oracle")
	dir := t.TempDir()
	var files []string
	data := fb.Build(fb.SASS(80))
	for i, spec := range []elfwrite.Spec{
		{},
		{Class: elf.ELFCLASS32, Machine: elf.EM_386},
		{Data: elf.ELFDATA2MSB, Machine: elf.EM_PPC64},
		{Machine: elf.EM_AARCH64},
	} {
		spec.Soname = "lib.so"
		spec.Sections = []elfwrite.Section{{Name: ".rodata", Data: data}, {Name: SectionName, Data: data}, {Name: SectionName, Data: data, Align: 16}}
		p := filepath.Join(dir, "lib"+strconv.Itoa(i)+".so")
		if err := elfwrite.Write(p, spec); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	shared := lddtest.SharedDir(t)
	for _, deb := range []string{"libcupti11.8_11.8.87~11.8.0-5~deb12u1_amd64.deb", "libcudart11.0_11.8.89~11.8.0-5~deb12u1_amd64.deb"} {
		x := t.TempDir()
		lddtest.DpkgExtract(t, filepath.Join(shared, "corpus", "debian", "amd64", deb), x)
		files = append(files, lddtest.SharedObjects(x)...)
	}
	for _, f := range files {
		want := readelfFatbin(t, readelf, f)
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := fh.Stat()
		rd := &reader{r: fh, size: st.Size(), name: f}
		got, err := rd.fatbinSections()
		fh.Close()
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: got %v %v, readelf says %v", f, got, err, want)
		}
	}
}

// TestRealContainers reads the fat binary containers NVIDIA's CUDA 11.8
// build of CUPTI embeds in its .rodata (it loads them through the driver
// API, so they are in no .nv_fatbin section): every container parses to
// its exact end, and holds one cubin for each architecture CUDA 11.8
// compiles for.
func TestRealContainers(t *testing.T) {
	shared := lddtest.SharedDir(t)
	x := t.TempDir()
	lddtest.DpkgExtract(t, filepath.Join(shared, "corpus", "debian", "amd64", "libcupti11.8_11.8.87~11.8.0-5~deb12u1_amd64.deb"), x)
	var lib string
	for _, f := range lddtest.SharedObjects(x) {
		if strings.Contains(filepath.Base(f), "libcupti.so") {
			lib = f
		}
	}
	if lib == "" {
		t.Fatal("no libcupti.so in the package")
	}
	ef, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	ro := ef.Section(".rodata")
	data, err := ro.Data()
	if err != nil {
		t.Fatal(err)
	}
	magic := binary.LittleEndian.AppendUint32(nil, fatbinMagic)
	rd := &reader{r: bytes.NewReader(data), size: int64(len(data)), name: lib}
	c := &Carried{}
	found := 0
	for i := 0; i+16 <= len(data); i += 8 {
		if !bytes.Equal(data[i:i+4], magic) {
			continue
		}
		found++
		end, err := rd.container(c, int64(i), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if end-int64(i) != 16+int64(binary.LittleEndian.Uint64(data[i+8:])) {
			t.Errorf("container at %#x ends at %#x", i, end)
		}
	}
	// CUDA 11.8's nvcc compiles for sm_35 to sm_90 (CUDA 11.8 release
	// notes, "Supported architectures").
	cuda118 := []int{35, 50, 60, 62, 70, 72, 75, 80, 86, 87, 89, 90}
	if found == 0 || c.Containers != found || len(c.PTX) != 0 {
		t.Fatalf("%d containers found, %d read, PTX %v", found, c.Containers, c.PTX)
	}
	var sms []int
	for _, s := range c.SASS {
		sms = append(sms, s.Target.SM)
		if s.Entries != found || s.Bytes <= 0 {
			t.Errorf("%s: %d entries of %d bytes", s.Target.SASS(), s.Entries, s.Bytes)
		}
	}
	if !slices.Equal(sms, cuda118) {
		t.Errorf("architectures %v, want %v", sms, cuda118)
	}
	if j := Judge(CC{12, 0}, Version{}, c, nil); j.Verdict != None {
		t.Errorf("CUDA 11.8 code on 12.0: %s", j.Reason)
	}
}

// TestDecodeNvcc13Headers decodes fat binary entry headers as nvcc 13.0
// (V13.0.88) wrote them on the GPU machine, byte for byte: the sm_80,
// sm_90, sm_90a and sm_100f fixtures' headers are coverage-variants.log's
// hex (e2e/gpu/results/2026-11-25); the others are the sm_100f ones with
// the architecture and flags fatbin-variants.log gives for one nvcc
// -gencode each and for the entries of four real libraries. The 0x1000000
// bit that every sm_100 and later entry carries, variant or not, must not
// make a plain build a variant.
func TestDecodeNvcc13Headers(t *testing.T) {
	hexOf := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// libsm100f.so, -gencode arch=compute_100f,code=[sm_100f,compute_100f]:
	// its first cubin (a 96-byte header) and its PTX (80 bytes).
	cubin100f := hexOf("02000101600000005806000000000000000000004000000008000100640000000000000000000000110020010000000000000000000000000000000000000000" +
		"48000000100000000002090000040b0800000000000000000000000000000000")
	ptx100f := hexOf("0100010150000000080100000000000005010000400000000000090064000000000000000000000011802000000000000000000000000000a301000000000000" +
		"48000000000000000000000000000000")
	cubin80 := hexOf("0200010140000000a805000000000000000000000000000008000100500000000000000000000000110000000000000000000000000000000000000000000000")
	cubin90 := hexOf("0200010140000000f8050000000000000000000000000000080001005a0000000000000000000000110000000000000000000000000000000000000000000000")
	cubin90a := hexOf("0200010140000000f8050000000000000000000000000000080001005a0000000000000000000000110010000000000000000000000000000000000000000000")
	ptx90a := hexOf("010001015000000000010000000000000001000040000000000009005a0000000000000000000000118010000000000000000000000000009601000000000000" +
		"48000000000000000000000000000000")
	with := func(h []byte, arch uint32, flags uint64) []byte {
		h = slices.Clone(h)
		binary.LittleEndian.PutUint32(h[28:], arch)
		binary.LittleEndian.PutUint64(h[40:], flags)
		return h
	}
	cases := []struct {
		name       string
		h          []byte
		kind       Kind
		target     string
		isa        Version
		compressed bool
	}{
		{"code=sm_100f (0x1200011)", cubin100f, KindELF, "sm_100f", Version{1, 8}, false},
		{"code=compute_100f (0x208011)", ptx100f, KindPTX, "compute_100f", Version{9, 0}, true},
		{"code=sm_80 (0x11)", cubin80, KindELF, "sm_80", Version{1, 8}, false},
		{"code=sm_90 (0x11)", cubin90, KindELF, "sm_90", Version{1, 8}, false},
		{"code=sm_90a (0x100011)", cubin90a, KindELF, "sm_90a", Version{1, 8}, false},
		{"code=compute_90a (0x108011)", ptx90a, KindPTX, "compute_90a", Version{9, 0}, true},
		{"code=sm_100 (0x1000011)", with(cubin100f, 100, 0x1000011), KindELF, "sm_100", Version{1, 8}, false},
		{"code=sm_100a (0x1100011)", with(cubin100f, 100, 0x1100011), KindELF, "sm_100a", Version{1, 8}, false},
		{"code=sm_120 (0x1000011)", with(cubin100f, 120, 0x1000011), KindELF, "sm_120", Version{1, 8}, false},
		{"code=sm_120f (0x1200011)", with(cubin100f, 120, 0x1200011), KindELF, "sm_120f", Version{1, 8}, false},
		{"code=sm_110f (0x1200011)", with(cubin100f, 110, 0x1200011), KindELF, "sm_110f", Version{1, 8}, false},
		{"code=compute_100 (0x8011)", with(ptx100f, 100, 0x8011), KindPTX, "compute_100", Version{9, 0}, true},
		{"code=compute_100a (0x108011)", with(ptx100f, 100, 0x108011), KindPTX, "compute_100a", Version{9, 0}, true},
		// Entries of the real libraries: libtorch_cuda.so's sm_100 and
		// sm_100a, libnccl.so.2's and CuPy's sm_100f, cuBLASLt's sm_120f
		// and sm_90a, compressed.
		{"libtorch_cuda sm_100 (0x1008011)", with(cubin100f, 100, 0x1008011), KindELF, "sm_100", Version{1, 8}, true},
		{"libtorch_cuda sm_100a (0x1108011)", with(cubin100f, 100, 0x1108011), KindELF, "sm_100a", Version{1, 8}, true},
		{"libnccl sm_100f (0x1208011)", with(cubin100f, 100, 0x1208011), KindELF, "sm_100f", Version{1, 8}, true},
		{"libcublasLt sm_120f (0x1208011)", with(cubin100f, 120, 0x1208011), KindELF, "sm_120f", Version{1, 8}, true},
		{"libcublasLt sm_90a (0x108011)", with(cubin90, 90, 0x108011), KindELF, "sm_90a", Version{1, 8}, true},
	}
	for _, c := range cases {
		e := decodeEntry(c.h, 1024)
		name := e.Target.SASS()
		if e.Kind == KindPTX {
			name = e.Target.PTX()
		}
		if e.Kind != c.kind || name != c.target || !e.VariantKnown || e.ISA != c.isa || e.Compressed != c.compressed {
			t.Errorf("%s: kind %d, %s (variant known %v), ISA %s, compressed %v; want kind %d, %s, ISA %s, compressed %v",
				c.name, e.Kind, name, e.VariantKnown, e.ISA, e.Compressed, c.kind, c.target, c.isa, c.compressed)
		}
	}
}
