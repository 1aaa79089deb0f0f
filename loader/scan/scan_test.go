package scan

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// mixedTree writes objects that load, one that misses a library, a
// relocatable object, a corrupt ELF file, a text file, a symlink and a hard
// link, objects the candidate rule passes over (returned, relative to
// dir), in several directories.
func mixedTree(t *testing.T, dir string) map[string]bool {
	t.Helper()
	objs := map[string]elfwrite.Spec{
		"pkg/lib/liba.so":      {Soname: "liba.so", Needed: []string{"libb.so", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")},
		"pkg/lib/libb.so":      {Soname: "libb.so", Needed: []string{"libc.so.6"}},
		"pkg/ext/mod.so":       {Needed: []string{"liba.so", "libc.so.6"}, RPath: elfwrite.Str("$ORIGIN/../lib")},
		"pkg/ext/mod2.so":      {Needed: []string{"liba.so", "libc.so.6"}, RPath: elfwrite.Str("$ORIGIN/../lib")},
		"pkg/ext/broken.so":    {Needed: []string{"libnothere.so.1", "libc.so.6"}},
		"other/tool":           {Type: elf.ET_EXEC, Interp: "/lib64/ld-linux-x86-64.so.2", Needed: []string{"libc.so.6"}},
		"pkg/ext/object.o":     {Type: elf.ET_REL},
		"pkg/lib/z/deep/x.so":  {Soname: "x.so", Needed: []string{"liba.so"}, RunPath: elfwrite.Str("$ORIGIN/../..")},
		"pkg/lib/z/deep/y.so":  {Soname: "y.so", Needed: []string{"x.so"}, RunPath: elfwrite.Str("$ORIGIN")},
		"pkg/lib/z/deep/w.so":  {Soname: "w.so", Needed: []string{"libc.so.6"}, VersionDefs: []string{"W_1"}, VersionNeeds: []elfwrite.VersionNeed{{File: "libc.so.6", Versions: []string{"GLIBC_2.2.5"}}}},
		"pkg/lib/z/deep/v1.so": {Soname: "v1.so", Needed: []string{"w.so"}, RunPath: elfwrite.Str("$ORIGIN"), VersionNeeds: []elfwrite.VersionNeed{{File: "w.so", Versions: []string{"W_9"}}}},
	}
	// Names that sort around a directory's name ("lib" < "lib-0.so" <
	// "lib.x" while "lib/..." comes first in a walk), and a directory of
	// more files than one batch of the walk.
	objs["pkg/lib-0.so"] = elfwrite.Spec{Soname: "lib-0.so", Needed: []string{"libc.so.6"}}
	objs["pkg/lib.x/c.so"] = elfwrite.Spec{Soname: "c.so", Needed: []string{"libc.so.6"}}
	for i := range 150 {
		objs[fmt.Sprintf("many/m%03d.so", i)] = elfwrite.Spec{Soname: fmt.Sprintf("m%d.so", i), Needed: []string{"libc.so.6"}}
	}
	// Objects the candidate rule passes over (see candidate.go): named
	// without ".so" and not executable, named as a header, under
	// __pycache__. A scan with AllFiles reads them.
	hidden := map[string]elfwrite.Spec{
		"pkg/lib/libhidden":         {Soname: "libhidden", Needed: []string{"libc.so.6"}},
		"pkg/include/notaheader.h":  {Soname: "notaheader.h", Needed: []string{"libc.so.6"}},
		"pkg/__pycache__/cached.so": {Soname: "cached.so", Needed: []string{"libc.so.6"}},
	}
	for p, s := range objs {
		if err := elfwrite.Write(filepath.Join(dir, p), s); err != nil {
			t.Fatal(err)
		}
	}
	for p, s := range hidden {
		if err := elfwrite.Write(filepath.Join(dir, p), s); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	good, err := elfwrite.Build(elfwrite.Spec{Soname: "libc2.so"})
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), good...)
	corrupt[elf.EI_CLASS] = 9 // an unknown class
	for p, data := range map[string][]byte{
		"pkg/lib/corrupt.so": corrupt,
		"pkg/__init__.py":    []byte("# a Python file, long enough to be opened by the scan\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("liba.so", filepath.Join(dir, "pkg/lib/liba.so.1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "pkg/lib/libb.so"), filepath.Join(dir, "pkg/lib/libb-copy.so")); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for p := range hidden {
		out[p] = true
	}
	return out
}

func hostOptions() ldso.Options {
	return ldso.Options{PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }}
}

// TestRunReportsEveryFile checks a directory scan against its definition:
// every regular ELF file once (hard links once), in walk order, as a root
// whose closure is what the loader model computes for it alone; objects
// that cannot be loaded listed as skipped, unreadable ELF files as errors
// that name the file as given, other files ignored. The tree is scanned by
// an absolute and by a relative path, and read whole (AllFiles) or only
// the files the candidate rule names.
func TestRunReportsEveryFile(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "tree")
	hidden := mixedTree(t, dir)
	ctx := context.Background()
	// Roots are named as the loader names them: absolute.
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	for _, tc := range []struct {
		target string
		all    bool
	}{{dir, false}, {"tree", false}, {dir, true}} {
		target := tc.target
		t.Run(fmt.Sprintf("%s,all=%v", target, tc.all), func(t *testing.T) {
			t.Chdir(base)
			l, err := ldso.New(ctx, hostOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			rep, err := Run(ctx, l, []string{target}, Options{Parallel: 3, AllFiles: tc.all})
			if err != nil {
				t.Fatal(err)
			}

			// What the definition says, file by file, in walk order.
			var wantRoots, wantSkipped, wantErrors []string
			seen := map[[2]uint64]bool{}
			hiddenFound := 0
			_ = filepath.WalkDir(target, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() && !tc.all && d.Name() == "__pycache__" {
					return filepath.SkipDir
				}
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				info, _ := d.Info()
				if !tc.all && !namedByRule(d.Name(), info.Mode()) {
					return nil
				}
				if id, ok := fileKey(info); ok {
					if seen[id] {
						return nil
					}
					seen[id] = true
				}
				in, err := elfscan.ReadInfo(p)
				switch {
				case errors.Is(err, elfscan.ErrNotELF):
				case err != nil:
					wantErrors = append(wantErrors, p+": "+err.Error())
				case notLoadable(in) != "":
					wantSkipped = append(wantSkipped, p+": "+notLoadable(in))
				default:
					wantRoots = append(wantRoots, p)
					rel, _ := filepath.Rel(target, p)
					if hidden[filepath.ToSlash(rel)] {
						hiddenFound++
					}
				}
				return nil
			})
			if want := map[bool]int{false: 0, true: len(hidden)}[tc.all]; hiddenFound != want {
				t.Fatalf("the definition finds %d of the objects the rule passes over, want %d", hiddenFound, want)
			}
			var gotRoots, gotSkipped, gotErrors []string
			for _, r := range rep.Roots {
				gotRoots = append(gotRoots, r.Path)
			}
			var wantRootPaths []string
			for _, p := range wantRoots {
				wantRootPaths = append(wantRootPaths, abs(p))
			}
			for _, s := range rep.Skipped {
				gotSkipped = append(gotSkipped, s.Path+": "+s.Reason)
			}
			for _, e := range rep.Errors {
				gotErrors = append(gotErrors, e.Path+": "+e.Error)
			}
			same(t, "roots", gotRoots, wantRootPaths)
			same(t, "skipped", gotSkipped, wantSkipped)
			same(t, "errors", gotErrors, wantErrors)
			if len(wantRoots) < 8 || len(wantSkipped) == 0 && tc.all || len(wantErrors) == 0 {
				t.Fatalf("the fixture lacks cases: %d roots, %d skipped, %d errors", len(wantRoots), len(wantSkipped), len(wantErrors))
			}

			// Each root is the closure of its file alone, with a fresh model.
			fresh, err := ldso.New(ctx, hostOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer fresh.Close()
			var missing []string
			for i, p := range wantRoots {
				res, err := fresh.Closure(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				want := NewRoot(res)
				if got, w := asJSON(t, rep.Roots[i]), asJSON(t, want); got != w {
					t.Errorf("%s: root differs from its own closure\nscan: %s\nalone: %s", p, got, w)
				}
				for _, m := range want.Missing {
					missing = append(missing, m.Soname)
				}
			}
			var gotMissing []string
			for _, m := range rep.Missing {
				gotMissing = append(gotMissing, m.Soname)
			}
			sort.Strings(missing)
			same(t, "missing", gotMissing, dedup(missing))
			if len(rep.VersionErrors) == 0 {
				t.Errorf("no version errors; v1.so needs W_9 that w.so lacks")
			}
		})
	}
}

// namedByRule is the candidate rule as candidate.go states it: a name
// with ".so", or an execute bit on a file whose extension is no source's,
// text's, data's or archive's.
func namedByRule(name string, mode os.FileMode) bool {
	switch candidate(name) {
	case readFile:
		return true
	case readIfExecutable:
		return mode&0o111 != 0
	}
	return false
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if asJSON(t, got) != asJSON(t, want) {
		t.Errorf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func dedup(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// TestRunThroughSymlinkedRoot scans a directory named by a symlink: the
// walk goes through the link, and the objects keep the link's path (the
// loader would open them through it, so their $ORIGIN is the link's).
func TestRunThroughSymlinkedRoot(t *testing.T) {
	real := filepath.Join(t.TempDir(), "real")
	mixedTree(t, real)
	link := filepath.Join(t.TempDir(), "site")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := ldso.New(ctx, hostOptions())
	if err != nil {
		t.Fatal(err)
	}
	viaLink, err := Run(ctx, l, []string{link}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := Run(ctx, l, []string{real}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(viaLink.Roots) == 0 || len(viaLink.Roots) != len(direct.Roots) {
		t.Fatalf("%d roots through the link, %d directly", len(viaLink.Roots), len(direct.Roots))
	}
	for _, r := range viaLink.Roots {
		if !strings.HasPrefix(r.Path, link+"/") {
			t.Errorf("root %s is not named through the link", r.Path)
		}
	}
}

// TestRunThroughAbsoluteLinkInRoot scans, under a root, a directory and a
// file named through an absolute link inside the root: the link names a
// directory of the root (as in a chroot), not one of this machine, and the
// objects keep the link's path.
func TestRunThroughAbsoluteLinkInRoot(t *testing.T) {
	root := t.TempDir()
	mixedTree(t, filepath.Join(root, "srv/real"))
	if err := os.MkdirAll(filepath.Join(root, "opt", "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/srv/real", filepath.Join(root, "opt", "site")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opts := hostOptions()
	opts.Root = root
	l, err := ldso.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := Run(ctx, l, []string{filepath.Join(root, "srv/real")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	viaLink, err := Run(ctx, l, []string{filepath.Join(root, "opt/site"), filepath.Join(root, "opt/site/pkg/lib/liba.so")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(direct.Roots) == 0 || len(viaLink.Roots) != len(direct.Roots)+1 {
		t.Fatalf("%d roots through the link (a directory and a file), %d directly", len(viaLink.Roots), len(direct.Roots))
	}
	for i, r := range viaLink.Roots {
		if !strings.HasPrefix(r.Path, "/opt/site/") {
			t.Errorf("root %s is not named through the link", r.Path)
		}
		if i < len(direct.Roots) && strings.TrimPrefix(r.Path, "/opt/site") != strings.TrimPrefix(direct.Roots[i].Path, "/srv/real") {
			t.Errorf("root %d: %s through the link, %s directly", i, r.Path, direct.Roots[i].Path)
		}
	}
}

// With ResultsOfFailuresOnly, a root that does not load keeps its loader
// answer, one that loads keeps it only when it was the first done, and the
// report says the same in every other respect.
func TestRunResultsOfFailuresOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tree")
	mixedTree(t, dir)
	ctx := context.Background()
	run := func(target string, only bool) *Report {
		l, err := ldso.New(ctx, hostOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		rep, err := Run(ctx, l, []string{target}, Options{Parallel: 3, ResultsOfFailuresOnly: only})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	full, lean := run(dir, false), run(dir, true)
	if asJSON(t, full) != asJSON(t, lean) {
		t.Fatalf("the reports differ:\n%s\n%s", asJSON(t, full), asJSON(t, lean))
	}
	kept, failed, ok := 0, 0, 0
	for _, r := range lean.Roots {
		switch {
		case !r.OK && r.Result == nil:
			t.Errorf("%s does not load and lost its answer", r.Path)
		case !r.OK:
			failed++
		case r.Result != nil:
			kept++
		default:
			ok++
		}
	}
	if failed == 0 || ok < 2 || kept > 1 {
		t.Fatalf("%d failing roots, %d loading roots without their answer, %d with it", failed, ok, kept)
	}

	// A lone root that loads keeps its answer (its tree is printed), a
	// file that is no object beside it notwithstanding.
	lone := t.TempDir()
	if err := elfwrite.Write(filepath.Join(lone, "a.so"), elfwrite.Spec{Soname: "a.so", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lone, "b.so"), append([]byte("\x7fELF"), make([]byte, 60)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := run(lone, true); len(rep.Roots) != 1 || rep.Roots[0].Result == nil || len(rep.Errors) != 1 {
		t.Fatalf("%d roots (answer kept: %v), %d errors", len(rep.Roots), len(rep.Roots) == 1 && rep.Roots[0].Result != nil, len(rep.Errors))
	}
}

// A scan that leaves out closures says the same of every root but its
// closure's entries, and keeps none.
func TestRunLeaveOutClosures(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tree")
	mixedTree(t, dir)
	ctx := context.Background()
	run := func(leaveOut bool) *Report {
		l, err := ldso.New(ctx, hostOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		rep, err := Run(ctx, l, []string{dir}, Options{Parallel: 3, Symbols: true, LeaveOutClosures: leaveOut})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	full, lean := run(false), run(true)
	entries := 0
	for _, r := range full.Roots {
		entries += len(r.Closure)
		r.Closure = nil
	}
	for _, r := range lean.Roots {
		if r.Closure != nil {
			t.Errorf("%s: closure kept", r.Path)
		}
	}
	if entries == 0 || len(full.Roots) < 3 {
		t.Fatalf("%d roots, %d closure entries in all", len(full.Roots), entries)
	}
	if asJSON(t, full) != asJSON(t, lean) {
		t.Fatalf("the reports differ beyond their closures:\n%s\n%s", asJSON(t, full), asJSON(t, lean))
	}
}
