package torchtree_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// facts are the recorded dynamic-linking facts of one object, in the form
// the corpus records them.
type facts struct {
	Soname, RPath, RunPath string
	HasRPath, HasRunPath   bool
	Needed                 []string
	Flags1                 uint32
	VerNeed                []string // "file:version", in order
	VerDef                 []string
	Type                   string
}

func recordFacts(t *testing.T, r *torchtree.Record) facts {
	t.Helper()
	spec, err := r.Spec()
	if err != nil {
		t.Fatal(err)
	}
	f := facts{Soname: r.Soname, Needed: r.Needed, Flags1: uint32(spec.Flags1), VerDef: r.VerDef, Type: r.Type}
	if r.RPath != nil {
		f.RPath, f.HasRPath = *r.RPath, true
	}
	if r.RunPath != nil {
		f.RunPath, f.HasRunPath = *r.RunPath, true
	}
	for _, vn := range r.VerNeed {
		for _, v := range vn.Versions {
			f.VerNeed = append(f.VerNeed, vn.File+":"+v)
		}
	}
	return f
}

func readFacts(in *elfscan.Info) facts {
	f := facts{Soname: in.Soname, Needed: in.Needed, RPath: in.RPath, HasRPath: in.HasRPath, RunPath: in.RunPath, HasRunPath: in.HasRunPath, Flags1: uint32(in.Flags1), Type: strings.TrimPrefix(in.Type.String(), "ET_")}
	for _, vn := range in.VersionNeeds {
		for _, v := range vn.Versions {
			f.VerNeed = append(f.VerNeed, vn.File+":"+v.Name)
		}
	}
	for _, d := range in.VersionDefs {
		f.VerDef = append(f.VerDef, d.Name)
	}
	return f
}

func normalize(f facts) facts {
	if len(f.Needed) == 0 {
		f.Needed = nil
	}
	if len(f.VerNeed) == 0 {
		f.VerNeed = nil
	}
	if len(f.VerDef) == 0 {
		f.VerDef = nil
	}
	return f
}

// TestSkeletonKeepsRecordedFacts writes every recorded object and reads it
// back: the skeleton has the recorded SONAME, NEEDED, RPATH, RUNPATH,
// FLAGS_1, version needs and definitions (base first), and, padded, the
// recorded size.
func TestSkeletonKeepsRecordedFacts(t *testing.T) {
	recs, err := torchtree.LoadFile(torchtree.Corpus(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("no records in the corpus")
	}
	dir := t.TempDir()
	files, err := torchtree.Build(context.Background(), dir, recs, torchtree.Options{Pad: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(recs) {
		t.Fatalf("wrote %d files for %d records", len(files), len(recs))
	}
	for i := range recs {
		r := &recs[i]
		f, err := elfscan.Open(files[i])
		if err != nil {
			t.Fatal(err)
		}
		in, err := f.Info()
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", r.Path, err)
			continue
		}
		if got, want := normalize(readFacts(in)), normalize(recordFacts(t, r)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read back\n%+v\nrecorded\n%+v", r.Path, got, want)
		}
		if r.Executable() != (in.Interp != "") {
			t.Errorf("%s: executable %v but PT_INTERP %q", r.Path, r.Executable(), in.Interp)
		}
		st, err := os.Stat(files[i])
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != r.Size {
			t.Errorf("%s: padded to %d bytes, recorded %d", r.Path, st.Size(), r.Size)
		}
	}
}

func TestBuildFilterAndBadInput(t *testing.T) {
	recs, err := torchtree.LoadFile(torchtree.Corpus(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := torchtree.Build(context.Background(), dir, recs, torchtree.Options{Keep: torchtree.Without("nvidia/cusparselt/")})
	if err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for _, r := range recs {
		if strings.HasPrefix(r.Path, "nvidia/cusparselt/") {
			dropped++
		}
	}
	if dropped == 0 || len(files) != len(recs)-dropped {
		t.Fatalf("%d files of %d records, %d under nvidia/cusparselt", len(files), len(recs), dropped)
	}
	if _, err := os.Stat(filepath.Join(dir, "nvidia", "cusparselt")); !os.IsNotExist(err) {
		t.Errorf("nvidia/cusparselt was written: %v", err)
	}

	for _, line := range []string{
		`{"path": "../escape.so", "class": "ELF64", "machine": "AArch64", "type": "DYN"}`,
		`{"path": "/abs.so", "class": "ELF64", "machine": "AArch64", "type": "DYN"}`,
		`{"path": "a.so", "size": 10, "class": "ELF64", "machine": "AArch64", "type": "DYN", "verneed": []}`,
		`not json`,
	} {
		if _, err := torchtree.Load(strings.NewReader(line)); err == nil {
			t.Errorf("Load(%s) gave no error", line)
		}
	}
	for _, line := range []string{
		`{"path": "a.so", "class": "ELF16", "machine": "AArch64", "type": "DYN"}`,
		`{"path": "a.so", "class": "ELF64", "machine": "PDP-11", "type": "DYN"}`,
		`{"path": "a.so", "class": "ELF64", "machine": "AArch64", "type": "CORE"}`,
		`{"path": "a.so", "class": "ELF64", "machine": "AArch64", "type": "DYN", "flags_1": "NOW FAST"}`,
	} {
		recs, err := torchtree.Load(strings.NewReader(line))
		if err != nil {
			t.Fatalf("Load(%s): %v", line, err)
		}
		if _, err := torchtree.Build(context.Background(), t.TempDir(), recs, torchtree.Options{}); err == nil {
			t.Errorf("Build(%s) gave no error", line)
		}
	}
}

// TestSkeletonMatchesLoader builds the skeleton without the cuSPARSELt
// wheel, padded to the real sizes, and compares the closure the loader model
// computes for a sample of its objects with what the host's ld.so prints.
// System libraries resolve on the host; libraries the host lacks (the
// driver's libcuda.so.1 on a machine without one, cuSPARSELt) are missing
// for both.
func TestSkeletonMatchesLoader(t *testing.T) {
	ldsoPath, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	dir, files := torchtree.Tree(t, torchtree.Options{Keep: torchtree.Without("nvidia/cusparselt"), Pad: true})
	var sample []string
	for i, f := range files {
		rel, _ := filepath.Rel(dir, f)
		if strings.HasPrefix(rel, "torch/") || i%4 == 0 || testing.Short() && i%16 == 0 {
			sample = append(sample, f)
		}
	}
	ctx := context.Background()
	env := []string{"LC_ALL=C"}
	l, err := ldso.New(ctx, ldso.Options{PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	checked, misses := 0, map[string]bool{}
	work := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				want, err := lddtest.List(ctx, ldsoPath, f, env)
				got, gerr := l.Closure(ctx, f)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("%s: %v", f, err)
				case gerr != nil:
					t.Errorf("%s: %v", f, gerr)
				default:
					compare(t, f, got, want)
					for _, m := range got.Missing {
						misses[m.Name] = true
					}
					checked++
				}
				mu.Unlock()
			}
		}()
	}
	for _, f := range sample {
		work <- f
	}
	close(work)
	wg.Wait()
	if checked < len(sample) {
		t.Fatalf("compared %d of %d objects", checked, len(sample))
	}
	if !misses["libcusparseLt.so.0"] {
		t.Errorf("libcusparseLt.so.0 resolves although its wheel was left out (misses: %v)", misses)
	}
	t.Logf("compared %d of %d skeleton objects with %s; missing for both: %d names", checked, len(files), ldsoPath, len(misses))
}

// compare checks the model's closure against the real loader's trace.
func compare(t *testing.T, file string, got *ldso.Result, want *lddtest.Output) {
	t.Helper()
	if want.Fatal != "" {
		t.Errorf("%s: the real loader stops: %s", file, want.Fatal)
		return
	}
	var g []string
	for _, o := range got.Objects {
		switch {
		case o == got.Main:
		case !o.Found():
			g = append(g, lddtest.Line{Name: o.Name, NotFound: true}.String())
		default:
			g = append(g, lddtest.Line{Name: o.Name, Path: o.Path}.String())
		}
	}
	var w []string
	for _, l := range want.Lines {
		w = append(w, l.String())
	}
	// The loader itself is listed where glibc moves it; compare it apart.
	if strings.Join(withoutRTLD(g), "\n") != strings.Join(withoutRTLD(w), "\n") {
		t.Errorf("%s: closure differs from the real loader\nmodel:\n\t%s\nld.so:\n\t%s", file, strings.Join(g, "\n\t"), strings.Join(w, "\n\t"))
	}
	var gv []string
	for _, v := range got.VersionErrors {
		gv = append(gv, fmt.Sprintf("%s | %s | %s | weak=%v", v.Object.Path, v.Provider.Path, v.Version, v.Weak))
	}
	var wv []string
	for _, v := range want.SortedVersionErrors() {
		wv = append(wv, fmt.Sprintf("%s | %s | %s | weak=%v", v.RequiredBy, v.Provider, v.Version, v.Weak))
	}
	sort.Strings(gv)
	sort.Strings(wv)
	if strings.Join(gv, "\n") != strings.Join(wv, "\n") {
		t.Errorf("%s: version errors differ\nmodel: %v\nld.so: %v", file, gv, wv)
	}
}

func withoutRTLD(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, " => ") && strings.Contains(l, "/ld-linux") {
			continue
		}
		out = append(out, l)
	}
	return out
}

// TestOtherFilesMakeTheCounts builds the skeleton with more files and
// directories than its records make: the counts asked for, the ELF files
// exactly the records, the rest not ELF. With Names, the named files are
// at their paths and the added ones end as they do.
func TestOtherFilesMakeTheCounts(t *testing.T) {
	recs, err := torchtree.LoadFile(torchtree.Corpus(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range [][]string{nil, {"torch/include/ATen/ATen.h", "torch/__pycache__/x.cpython-312.pyc", "nvidia/cu13/include/cuda/std/cmath", "torch/lib/libc10.so", "../../../bin/torchrun"}} {
		dirs := map[string]bool{".": true}
		for _, r := range recs {
			for d := path.Dir(r.Path); !dirs[d]; d = path.Dir(d) {
				dirs[d] = true
			}
		}
		for _, n := range names {
			for d := path.Dir(n); !dirs[d] && !strings.HasPrefix(d, ".."); d = path.Dir(d) {
				dirs[d] = true
			}
		}
		wantFiles, wantDirs := len(recs)+1234, len(dirs)+56
		dir := filepath.Join(t.TempDir(), "site-packages")
		files, err := torchtree.Build(context.Background(), dir, recs, torchtree.Options{Files: wantFiles, Dirs: wantDirs, Names: names})
		if err != nil {
			t.Fatal(err)
		}
		elfs := map[string]bool{}
		for _, f := range files {
			elfs[f] = true
		}
		nfiles, ndirs := 0, 0
		endings := map[string]int{}
		err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				ndirs++
				return nil
			}
			nfiles++
			if !elfs[p] {
				for _, e := range []string{".h", ".pyc", "_cmath", ".py"} {
					if strings.HasSuffix(p, e) {
						endings[e]++
						break
					}
				}
				f, err := elfscan.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.Info()
				f.Close()
				if !errors.Is(err, elfscan.ErrNotELF) {
					t.Fatalf("%s: %v, want a non-ELF file", p, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != len(recs) || nfiles != wantFiles || ndirs != wantDirs {
			t.Errorf("names %q: %d files (%d ELF) in %d directories, want %d (%d ELF) in %d", names, nfiles, len(files), ndirs, wantFiles, len(recs), wantDirs)
		}
		if names == nil {
			if endings[".py"] != wantFiles-len(recs) {
				t.Errorf("%d Python sources added, want %d", endings[".py"], wantFiles-len(recs))
			}
			continue
		}
		for _, n := range names[:3] {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				t.Errorf("named file: %v", err)
			}
		}
		// 1234 files: 3 named, the rest ending in turn as the 3 names
		// that are not shared objects do.
		if endings[".h"] != 411+1 || endings[".pyc"] != 410+1 || endings["_cmath"] != 410 {
			t.Errorf("added files end as %v", endings)
		}
	}
}
