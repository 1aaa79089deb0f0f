// Package torchtree builds skeleton copies of a real PyTorch environment's ELF files from the recorded dynamic-linking metadata, for tests and benchmarks.
//
// The metadata (one JSON object a line, gzip-compressed) records, for every
// ELF file of a site-packages directory, its path relative to site-packages,
// size, class, machine, type, SONAME, NEEDED, RPATH, RUNPATH, FLAGS_1 and
// symbol version needs and definitions. Build writes one small loadable
// object per record with exactly those dynamic-linking facts (through
// internal/elfwrite), so that both the loader model and the real loader
// resolve the skeleton as they would resolve the real environment. Code and
// symbols are not recorded and not written.
//
// The real environment holds only regular files (wheels carry no symlinks;
// libcupti.so, libcupti.so.12 and libcupti.so.2025.1.1 are three copies), so
// the skeleton has no symlinks either. The records do not include PT_INTERP;
// executables (ET_EXEC, or DF_1_PIE) get the machine's standard interpreter,
// as every dynamically linked executable has one.
package torchtree

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// CorpusFile is the metadata of a PyTorch 2.11 + CUDA 13.0 environment on
// x86_64, relative to the shared data folder.
const CorpusFile = "corpus/torch/torch-2.11.0-cu130-x86_64-venv.jsonl.gz"

// Record is one ELF file of the environment.
type Record struct {
	Path    string       `json:"path"` // relative to site-packages, with slashes
	Size    int64        `json:"size"`
	Class   string       `json:"class"`   // "ELF64", "ELF32"
	Machine string       `json:"machine"` // as readelf prints it: "Advanced Micro Devices X86-64"
	Type    string       `json:"type"`    // "DYN", "EXEC"
	Soname  string       `json:"soname"`
	Needed  []string     `json:"needed"`
	RPath   *string      `json:"rpath"`
	RunPath *string      `json:"runpath"`
	Flags1  *string      `json:"flags_1"` // names without DF_1_, space-separated: "NOW NODELETE"
	VerNeed VersionNeeds `json:"verneed"` // file → versions, in file order
	VerDef  []string     `json:"verdef"`  // the base definition first
}

// VersionNeeds are the version needs of one object, in the order recorded.
type VersionNeeds []VersionNeed

// VersionNeed lists the versions needed from one file.
type VersionNeed struct {
	File     string
	Versions []string
}

// UnmarshalJSON reads a JSON object {file: [versions]} keeping its order.
func (v *VersionNeeds) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*v = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("verneed: want an object, got %v", tok)
	}
	var out VersionNeeds
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		file, ok := tok.(string)
		if !ok {
			return fmt.Errorf("verneed: want a file name, got %v", tok)
		}
		var versions []string
		if err := dec.Decode(&versions); err != nil {
			return fmt.Errorf("verneed %s: %w", file, err)
		}
		out = append(out, VersionNeed{File: file, Versions: versions})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	*v = out
	return nil
}

// Load reads records, one JSON object a line, gzip-compressed or not.
func Load(r io.Reader) ([]Record, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	var out []Record
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if err := rec.check(); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// LoadFile reads the records of a file.
func LoadFile(name string) ([]Record, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return recs, nil
}

// check rejects a record whose path would leave the tree.
func (r *Record) check() error {
	p := r.Path
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("path %q is not a clean relative path", p)
	}
	if r.Size < 0 {
		return fmt.Errorf("%s: negative size %d", p, r.Size)
	}
	return nil
}

// Executable reports an object that is started as a program (ET_EXEC, or a
// position-independent executable).
func (r *Record) Executable() bool {
	if r.Type == "EXEC" {
		return true
	}
	f, err := flags1(r.Flags1)
	return err == nil && f&elf.DF_1_PIE != 0
}

// Spec is the elfwrite description of the record's skeleton object.
func (r *Record) Spec() (elfwrite.Spec, error) {
	s := elfwrite.Spec{Soname: r.Soname, Needed: r.Needed, RPath: r.RPath, RunPath: r.RunPath}
	switch r.Class {
	case "ELF64":
		s.Class = elf.ELFCLASS64
	case "ELF32":
		s.Class = elf.ELFCLASS32
	default:
		return s, fmt.Errorf("%s: unknown class %q", r.Path, r.Class)
	}
	m, err := machine(r.Machine)
	if err != nil {
		return s, fmt.Errorf("%s: %w", r.Path, err)
	}
	s.Machine = m
	switch r.Type {
	case "DYN":
		s.Type = elf.ET_DYN
	case "EXEC":
		s.Type = elf.ET_EXEC
	default:
		return s, fmt.Errorf("%s: unknown type %q", r.Path, r.Type)
	}
	if s.Flags1, err = flags1(r.Flags1); err != nil {
		return s, fmt.Errorf("%s: %w", r.Path, err)
	}
	if r.Executable() {
		s.Interp = interpreter(s.Machine, s.Class)
	}
	for _, vn := range r.VerNeed {
		s.VersionNeeds = append(s.VersionNeeds, elfwrite.VersionNeed{File: vn.File, Versions: vn.Versions})
	}
	if len(r.VerDef) > 0 {
		s.VersionBase = r.VerDef[0]
		s.VersionDefs = r.VerDef[1:]
	}
	return s, nil
}

// machine maps readelf's machine names (and EM_ constant names) to elf.Machine.
func machine(name string) (elf.Machine, error) {
	switch name {
	case "Advanced Micro Devices X86-64", "x86-64", "x86_64":
		return elf.EM_X86_64, nil
	case "AArch64", "aarch64":
		return elf.EM_AARCH64, nil
	case "Intel 80386", "i386":
		return elf.EM_386, nil
	case "ARM", "arm":
		return elf.EM_ARM, nil
	case "PowerPC64", "ppc64":
		return elf.EM_PPC64, nil
	case "RISC-V", "riscv":
		return elf.EM_RISCV, nil
	}
	for m := elf.Machine(0); m < 1024; m++ {
		if m.String() == name {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown machine %q", name)
}

// flags1 parses "NOW NODELETE" (names of DF_1_ flags without the prefix).
func flags1(s *string) (elf.DynFlag1, error) {
	if s == nil {
		return 0, nil
	}
	var out elf.DynFlag1
	for _, name := range strings.Fields(*s) {
		bit, ok := flag1ByName(name)
		if !ok {
			return 0, fmt.Errorf("unknown FLAGS_1 flag %q", name)
		}
		out |= bit
	}
	return out, nil
}

func flag1ByName(name string) (elf.DynFlag1, bool) {
	name = strings.TrimPrefix(name, "DF_1_")
	for i := 0; i < 32; i++ {
		f := elf.DynFlag1(1) << i
		if strings.TrimPrefix(f.String(), "DF_1_") == name {
			return f, true
		}
	}
	return 0, false
}

// interpreter is the standard PT_INTERP of a machine.
func interpreter(m elf.Machine, c elf.Class) string {
	switch {
	case m == elf.EM_X86_64:
		return "/lib64/ld-linux-x86-64.so.2"
	case m == elf.EM_AARCH64:
		return "/lib/ld-linux-aarch64.so.1"
	case m == elf.EM_386:
		return "/lib/ld-linux.so.2"
	case m == elf.EM_PPC64:
		return "/lib64/ld64.so.2"
	case m == elf.EM_RISCV && c == elf.ELFCLASS64:
		return "/lib/ld-linux-riscv64-lp64d.so.1"
	}
	return ""
}

// Options shape a skeleton.
type Options struct {
	// Keep selects the records to write (all when nil): drop every path
	// under nvidia/cusparselt/ to model a wheel that is not installed, say.
	Keep func(*Record) bool
	// Pad extends every file to its recorded size as a sparse file (a hole
	// after the object's bytes), so the tree has the real sizes (6.5 GB for
	// the PyTorch environment) without the disk space.
	Pad bool
	// Files and Dirs, when more than the records make, are reached by
	// adding small non-ELF files (Python sources) in new directories spread
	// over the tree's top-level packages (Dirs counts the tree's own
	// directory). The records list ELF files only, but a scan opens every
	// file to find them: RealFiles and RealDirs make the counts of the real
	// environment, 68k files of which 859 are ELF.
	Files, Dirs int
	// Names are paths of the real environment's files, relative to
	// site-packages with slashes (what its RECORDs list: RecordPaths).
	// With Files, those that are not records are written first, at their
	// paths; the files added after them take their base names in turn.
	// Without Names every added file is a Python source, which a scan
	// that decides by name alone never opens: the real mix of headers,
	// byte code, extension-less headers and data is what a scan meets.
	Names []string
}

// RealFiles and RealDirs count the regular files and directories of the
// PyTorch environment the corpus was recorded from (its site-packages), as
// found there; the skeleton's own ELF files and directories are part of
// them.
const (
	RealFiles = 68849
	RealDirs  = 7811
)

// Without returns a Keep function that drops every record under one of
// the directory prefixes (relative to site-packages, "nvidia/cusparselt").
func Without(prefixes ...string) func(*Record) bool {
	return func(r *Record) bool {
		for _, p := range prefixes {
			p = strings.TrimSuffix(p, "/")
			if r.Path == p || strings.HasPrefix(r.Path, p+"/") {
				return false
			}
		}
		return true
	}
}

// Build writes the skeleton objects of recs under dir (the site-packages
// directory) and returns the paths of the objects it wrote, in record order
// (the other files of Options.Files are not listed).
func Build(ctx context.Context, dir string, recs []Record, opts Options) ([]string, error) {
	var out []string
	made := map[string]bool{}
	for i := range recs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r := &recs[i]
		if opts.Keep != nil && !opts.Keep(r) {
			continue
		}
		if err := r.check(); err != nil {
			return nil, err
		}
		spec, err := r.Spec()
		if err != nil {
			return nil, err
		}
		b, err := elfwrite.Build(spec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Path, err)
		}
		p := filepath.Join(dir, filepath.FromSlash(r.Path))
		if d := filepath.Dir(p); !made[d] {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
			made[d] = true
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			return nil, err
		}
		if opts.Pad && r.Size > int64(len(b)) {
			if err := os.Truncate(p, r.Size); err != nil {
				return nil, fmt.Errorf("pad %s: %w", r.Path, err)
			}
		}
		out = append(out, p)
	}
	if err := writeOthers(ctx, dir, recs, opts); err != nil {
		return nil, err
	}
	return out, nil
}

// writeOthers adds the non-ELF files and directories of opts.Files and
// opts.Dirs.
func writeOthers(ctx context.Context, dir string, recs []Record, opts Options) error {
	var tops []string
	seen := map[string]bool{}
	dirs := map[string]bool{}
	elfs := map[string]bool{}
	nfiles := 0
	for i := range recs {
		r := &recs[i]
		if opts.Keep != nil && !opts.Keep(r) {
			continue
		}
		nfiles++
		elfs[r.Path] = true
		for d := path.Dir(r.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
		top, _, _ := strings.Cut(r.Path, "/")
		if !seen[top] && top != r.Path {
			seen[top] = true
			tops = append(tops, top)
		}
	}
	if len(tops) == 0 {
		tops = []string{"."}
	}
	named, bases, err := writeNamed(dir, opts, elfs, dirs)
	if err != nil {
		return err
	}
	nfiles += named
	if len(bases) == 0 {
		bases = []string{".py"}
	}
	others, ndirs := opts.Files-nfiles, max(opts.Dirs-len(dirs)-1, 1) // -1: dir itself
	for k := 0; k < others; k++ {
		if k%1000 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		d := k % ndirs
		name := fmt.Sprintf("_py%05d", d)
		sub := filepath.Join(dir, tops[d%len(tops)], name)
		if k < ndirs {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
		}
		src := fmt.Sprintf("# File %d of a skeleton environment: not ELF.\nimport os\n\n\ndef f%d(x):\n    return os.path.join(str(x), %q)\n", k, k, name)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("m%05d%s", k, bases[k%len(bases)])), []byte(src), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeNamed writes the files of opts.Names that are no record's (nor
// under a record's path) while the count allows, adding their directories
// to dirs, and returns how many it wrote and the endings the files added
// after them take in turn: "_" and each name's base, a shared object's
// name left out (the real ones are the records).
func writeNamed(dir string, opts Options, elfs, dirs map[string]bool) (int, []string, error) {
	var bases []string
	written := map[string]bool{}
	n := 0
	for _, p := range opts.Names {
		if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || elfs[p] || written[p] {
			continue
		}
		written[p] = true
		if b := path.Base(p); !strings.Contains(b, ".so") {
			bases = append(bases, "_"+b)
		}
		if len(elfs)+n >= opts.Files {
			continue
		}
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			if elfs[d] {
				break // a record's file where the name wants a directory
			}
			dirs[d] = true
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return 0, nil, err
		}
		if err := os.WriteFile(full, []byte(p+"\n"), 0o644); err != nil {
			return 0, nil, err
		}
		n++
	}
	return n, bases, nil
}

// RecordPaths reads a gzip-compressed tar archive of dist-info folders (the
// shared corpus' torch-2.11.0-cu130-x86_64-distinfo.tgz) and returns the
// paths every RECORD in it lists, relative to site-packages, in archive
// order.
func RecordPaths(archive string) ([]string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	var out []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", archive, err)
		}
		if h.Typeflag != tar.TypeReg || path.Base(h.Name) != "RECORD" || !strings.HasSuffix(path.Dir(h.Name), ".dist-info") {
			continue
		}
		entries, err := pymeta.ParseRecord(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", archive, h.Name, err)
		}
		for _, e := range entries {
			out = append(out, e.Path)
		}
	}
}

// Corpus returns the path of the recorded PyTorch environment in the shared
// data folder beside the repository, skipping the test or benchmark (or
// failing it under CUDADEPS_REQUIRE_ORACLES=1) when it is absent.
func Corpus(t testing.TB) string {
	t.Helper()
	p := filepath.Join(lddtest.SharedDir(t), filepath.FromSlash(CorpusFile))
	_, err := os.Stat(p)
	lddtest.Need(t, err == nil, "the recorded PyTorch environment %s is absent from the shared data folder", CorpusFile)
	return p
}

// Tree builds the skeleton of the recorded PyTorch environment under a
// temporary directory and returns that directory (site-packages) and the
// files written. It skips as Corpus does.
func Tree(t testing.TB, opts Options) (string, []string) {
	t.Helper()
	recs, err := LoadFile(Corpus(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "site-packages")
	files, err := Build(context.Background(), dir, recs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return dir, files
}
