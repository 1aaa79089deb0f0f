package ldso

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// lines renders a result the way ld.so's trace mode prints it.
func lines(r *Result) []lddtest.Line {
	var out []lddtest.Line
	for _, o := range r.Objects {
		if o == r.Main {
			continue
		}
		if !o.Found() {
			out = append(out, lddtest.Line{Name: o.Name, NotFound: true})
			continue
		}
		out = append(out, lddtest.Line{Name: o.Name, Path: o.Path})
	}
	return out
}

func versionErrors(r *Result) []lddtest.VersionError {
	var out []lddtest.VersionError
	for _, v := range r.VersionErrors {
		out = append(out, lddtest.VersionError{Provider: v.Provider.Path, Version: v.Version, RequiredBy: v.Object.Path, Weak: v.Weak})
	}
	o := &lddtest.Output{VersionErrors: out}
	return o.SortedVersionErrors()
}

// compare reports how the model's closure differs from the oracle's.
func compare(t testing.TB, file string, got *Result, want *lddtest.Output) bool {
	t.Helper()
	g := lines(got)
	w := want.Lines
	// The loader itself is listed where glibc moves it; compare it apart.
	strip := func(ls []lddtest.Line) ([]string, bool) {
		var out []string
		rt := false
		for _, l := range ls {
			if l.Path != "" && l.Path == l.Name && strings.Contains(l.Path, "/ld-linux") {
				rt = true
				continue
			}
			out = append(out, l.String())
		}
		return out, rt
	}
	gs, grt := strip(g)
	ws, wrt := strip(w)
	ok := true
	if strings.Join(gs, "\n") != strings.Join(ws, "\n") || grt != wrt && !want.Static {
		t.Errorf("%s: closure differs from the real loader\nmodel:\n\t%s\nld.so:\n\t%s", file, strings.Join(gs, "\n\t"), strings.Join(ws, "\n\t"))
		ok = false
	}
	for _, w := range want.Warnings {
		matched := false
		for _, g := range got.Warnings {
			if strings.Contains(w, g) {
				matched = true
			}
		}
		if !matched {
			t.Errorf("%s: ld.so warns %q, the model does not", file, w)
			ok = false
		}
	}
	gv := fmt.Sprint(versionErrors(got))
	wv := fmt.Sprint(want.SortedVersionErrors())
	if gv != wv {
		t.Errorf("%s: version errors differ\nmodel: %s\nld.so: %s", file, gv, wv)
		ok = false
	}
	return ok
}

// hostEnv is the environment both the model and the real loader run with.
func hostEnv(llp *string) ([]string, Options) {
	env := []string{"LC_ALL=C"}
	opts := Options{PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }}
	if llp != nil {
		env = append(env, "LD_LIBRARY_PATH="+*llp)
		opts.LDLibraryPath = llp
	}
	return env, opts
}

// TestHostLibrariesMatchLoader checks the closure of every ELF shared object
// under the host's multiarch library directory against ld.so --list.
func TestHostLibrariesMatchLoader(t *testing.T) {
	ldso, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	dir := "/usr/lib/x86_64-linux-gnu"
	if _, err := os.Stat(dir); err != nil {
		lddtest.Need(t, false, "%s absent", dir)
	}
	files := lddtest.SharedObjects(dir)
	if len(files) < 50 {
		lddtest.Need(t, false, "only %d shared objects under %s", len(files), dir)
	}
	if testing.Short() && len(files) > 300 {
		files = files[:300]
	}
	ctx := context.Background()
	env, opts := hostEnv(nil)
	l, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	failures, checked := 0, 0
	lddtest.Parallel(files, 4, func(f string) {
		mu.Lock()
		stop := failures > 10
		mu.Unlock()
		if stop {
			return
		}
		want, err := lddtest.List(ctx, ldso, f, env)
		if err != nil || want.Fatal != "" {
			return // the loader itself refuses it (e.g. a file it cannot map)
		}
		got, err := l.Closure(ctx, f)
		mu.Lock()
		defer mu.Unlock()
		checked++
		if err != nil {
			t.Errorf("%s: %v", f, err)
			failures++
		} else if !compare(t, f, got, want) {
			failures++
		}
	})
	t.Logf("compared %d shared objects with %s", checked, ldso)
	if checked < 50 {
		t.Fatalf("only %d objects compared", checked)
	}
}

// TestArmSysrootMatchesLoader checks every ELF shared object of the arm64
// sysroot, scanned from this host through Root, against the arm64 ld.so run
// under qemu.
func TestArmSysrootMatchesLoader(t *testing.T) {
	sr := lddtest.ArmSysroot(t)
	ctx := context.Background()
	l, err := New(ctx, Options{Root: sr.Root, PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range lddtest.SharedObjects(sr.Root) {
		// Name the file by its path inside the root, so that qemu's loader
		// sees the same $ORIGIN as the model.
		want, err := sr.List(ctx, strings.TrimPrefix(p, sr.Root), nil)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if want.Fatal != "" {
			continue
		}
		got, err := l.Closure(ctx, p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		// qemu prints paths inside the root as the guest sees them, and the
		// scanned file by its host path; so does the model.
		compare(t, p, got, want)
		checked++
	}
	t.Logf("compared %d arm64 shared objects under qemu", checked)
	if checked < 20 {
		t.Fatalf("only %d objects compared", checked)
	}
}

// TestDebianCUDALibrariesMatchLoader unpacks the real CUDA 11.8 packages of
// the shared corpus (plus the large ones fetched by fetch-large.sh when
// CUDADEPS_LARGE_DEBS names their folder) and compares every shared object's
// closure with the host loader's, without and with LD_LIBRARY_PATH.
func TestDebianCUDALibrariesMatchLoader(t *testing.T) {
	ldso, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	shared := lddtest.SharedDir(t)
	debs, _ := filepath.Glob(filepath.Join(shared, "corpus", "debian", "amd64", "*.deb"))
	if large := lddtest.LargeDebs(t, "the closures of libcublas11 and libcusolver11"); large != "" {
		more, _ := filepath.Glob(filepath.Join(large, "amd64", "*.deb"))
		debs = append(debs, more...)
	}
	lddtest.Need(t, len(debs) > 0, "no amd64 packages in %s", shared)
	dir := t.TempDir()
	for _, d := range debs {
		lddtest.DpkgExtract(t, d, dir)
	}
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if in, err := elfscan.ReadInfo(p); err == nil && in.Dynamic {
				files = append(files, p)
			}
		}
		return nil
	})
	if len(files) < 5 {
		t.Fatalf("only %d ELF files in the CUDA packages", len(files))
	}
	libdir := filepath.Join(dir, "usr/lib/x86_64-linux-gnu")
	ctx := context.Background()
	for _, llp := range []*string{nil, elfwrite.Str(libdir + ":" + libdir + "/nvidia/current")} {
		env, opts := hostEnv(llp)
		l, err := New(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, f := range files {
			want, err := lddtest.List(ctx, ldso, f, env)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got, err := l.Closure(ctx, f)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			compare(t, f, got, want)
			missing += len(got.Missing)
		}
		t.Logf("LD_LIBRARY_PATH=%v: %d files, %d misses, all as ld.so says", llp != nil, len(files), missing)
	}
}
