package ldso

import (
	"context"
	"debug/elf"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// forkTree writes the tree below and returns it with a loader of the
// host's configuration.
func forkTree(t *testing.T) (string, *Loader) {
	t.Helper()
	dir := writeForkTree(t)
	_, opts := hostEnv(nil)
	l, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return dir, l
}

// writeForkTree writes a program that needs liba.so and libw.so (a link
// to libw.so.1), a module every process loads first (m0.so, which brings
// in libx.so through its RPATH), and modules loaded after it: one needing
// libx.so by its soname under another name and liby.so, one needing a
// library nowhere to be found, one needing a symbol version libx.so lacks,
// one needing liby.so and libx.so, and two needing libw.so.1 by the
// soname the program's libw.so answers to, with a version it defines and
// one it lacks.
func writeForkTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tree{objs: map[string]elfwrite.Spec{
		"app":           {Type: elf.ET_EXEC, Interp: "/lib64/ld-linux-x86-64.so.2", Needed: []string{"liba.so", "libw.so", "libc.so.6"}, RPath: str("$ORIGIN/lib")},
		"lib/liba.so":   leaf("liba.so"),
		"lib/libw.so.1": {Soname: "libw.so.1", VersionDefs: []string{"W_1"}},
		"pkg/m5.so": {Soname: "m5.so", Needed: []string{"libw.so.1"},
			VersionNeeds: []elfwrite.VersionNeed{{File: "libw.so.1", Versions: []string{"W_1"}}}},
		"pkg/m6.so": {Soname: "m6.so", Needed: []string{"libw.so.1"},
			VersionNeeds: []elfwrite.VersionNeed{{File: "libw.so.1", Versions: []string{"W_2"}}}},
		"pkg/m0.so":         {Soname: "m0.so", Needed: []string{"libx.so.1"}, RunPath: str("$ORIGIN/lib")},
		"pkg/lib/libx.so.1": {Soname: "libx.so.1", Needed: []string{"libc.so.6"}, VersionDefs: []string{"X_1"}},
		"pkg/lib/libx.so":   {Soname: "libx.so.1", Needed: []string{"libc.so.6"}, VersionDefs: []string{"X_1"}},
		"pkg/lib/liby.so":   {Soname: "liby.so", Needed: []string{"libx.so.1"}, RunPath: str("$ORIGIN")},
		"pkg/m1.so":         {Soname: "m1.so", Needed: []string{"libx.so.1", "liby.so"}, RunPath: str("$ORIGIN/lib")},
		"pkg/m2.so":         {Soname: "m2.so", Needed: []string{"libnowhere.so", "libx.so.1"}, RunPath: str("$ORIGIN/lib")},
		"pkg/m3.so": {Soname: "m3.so", Needed: []string{"libx.so.1"}, RunPath: str("$ORIGIN/lib"),
			VersionNeeds: []elfwrite.VersionNeed{{File: "libx.so.1", Versions: []string{"X_2"}}}},
		"pkg/m4.so": {Soname: "m4.so", Needed: []string{"liby.so", "libx.so.1"}, RunPath: str("$ORIGIN/lib")},
	}, links: map[string]string{"lib/libw.so": "libw.so.1"}}.write(t, dir, elf.EM_X86_64)
	return dir
}

// startApp is the process every fork of the tree starts from: the program
// after the module every process loads first.
func startApp(t *testing.T, l *Loader, dir string) *Process {
	t.Helper()
	ctx := context.Background()
	p, err := l.Start(ctx, filepath.Join(dir, "app"), AsExecuted)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Dlopen(ctx, filepath.Join(dir, "pkg/m0.so")); err != nil {
		t.Fatal(err)
	}
	return p
}

// describe writes out everything a result says, links by path and name,
// so two results can be compared whatever objects they are made of.
func describe(r *Result) string {
	name := func(o *Object) string {
		if o == nil {
			return "-"
		}
		return o.Name + "@" + o.Path
	}
	names := func(list []*Object) string {
		var s []string
		for _, o := range list {
			s = append(s, name(o))
		}
		return strings.Join(s, ",")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "main %s\n", name(r.Main))
	for _, o := range r.Objects {
		ns := slices.Clone(r.Names(o))
		slices.Sort(ns)
		fmt.Fprintf(&b, "%s via=%s from=%q names=%v loader=%s source=%s needed_by=[%s] deps=[%s] problem=%q\n",
			name(o), o.Via, o.From, ns, name(o.Loader), name(o.Source), names(r.NeededBy(o)), names(o.Deps), o.Problem)
	}
	for _, m := range r.Missing {
		fmt.Fprintf(&b, "missing %s needed_by=[%s] requests=[%s]\n", m.Name, names(m.NeededBy), names(m.Requests))
	}
	for _, v := range r.VersionErrors {
		fmt.Fprintf(&b, "version %s %s %s %s\n", name(v.Object), v.File, name(v.Provider), v.Version)
	}
	fmt.Fprintf(&b, "searched %v warnings %v\n", r.Searched, r.Warnings)
	return b.String()
}

// A file loaded into a fork of a process gives what loading it into a
// process loaded the same way from scratch gives, and the process forked
// is left as it was: however many forks load what.
func TestForkLoadsAsAFreshProcess(t *testing.T) {
	dir, l := forkTree(t)
	ctx := context.Background()
	start := func() *Process { return startApp(t, l, dir) }
	base := start()
	before := describe(base.Result())
	for _, m := range []string{"m1.so", "m2.so", "m3.so", "lib/libx.so", "m5.so", "m1.so"} {
		file := filepath.Join(dir, "pkg", m)
		fresh := start()
		fo, err := fresh.Dlopen(ctx, file)
		if err != nil {
			t.Fatal(err)
		}
		fork := base.Fork()
		ko, err := fork.Dlopen(ctx, file)
		if err != nil {
			t.Fatal(err)
		}
		if want, got := describe(fresh.Reach(fo)), describe(fork.Reach(ko)); got != want {
			t.Errorf("%s in a fork:\n%s\nfrom scratch:\n%s", m, got, want)
		}
		if want, got := describe(fresh.Result()), describe(fork.Result()); got != want {
			t.Errorf("%s: the fork's process:\n%s\nfrom scratch:\n%s", m, got, want)
		}
		own := map[*Object]bool{fork.rtld: true}
		for _, x := range fork.Objects() {
			own[x] = true
		}
		for _, x := range fork.Objects() {
			for _, y := range append(append([]*Object{x.Loader, x.Source}, fork.NeededBy(x)...), x.Deps...) {
				if y != nil && !own[y] {
					t.Errorf("%s: %s in the fork links to %s of another process", m, x.Name, y.Name)
				}
			}
		}
		if after := describe(base.Result()); after != before {
			t.Fatalf("loading %s into a fork changed the process forked:\n%s\nwas:\n%s", m, after, before)
		}
		// A fork of the fork, loading on: it shares what the first fork
		// shares and what the first fork loaded, and reads the first
		// fork's additions under its own (m6.so after m5.so: the name
		// libw.so.1 the first fork gave the program's libw.so).
		again := fork.Fork()
		for _, next := range []string{"m4.so", "m6.so"} {
			file := filepath.Join(dir, "pkg", next)
			ao, err := again.Dlopen(ctx, file)
			if err != nil {
				t.Fatal(err)
			}
			fo, err := fresh.Dlopen(ctx, file)
			if err != nil {
				t.Fatal(err)
			}
			if want, got := describe(fresh.Reach(fo)), describe(again.Reach(ao)); got != want {
				t.Errorf("%s after %s in a fork of a fork:\n%s\nfrom scratch:\n%s", next, m, got, want)
			}
			if want, got := describe(fresh.Result()), describe(again.Result()); got != want {
				t.Errorf("%s after %s: the fork of a fork:\n%s\nfrom scratch:\n%s", next, m, got, want)
			}
		}
	}
}

// A detached result says what the result said, holds no object of the
// process but stand-ins without links, and stays as it was while the
// process loads on.
func TestDetachedResultKeepsItsAnswer(t *testing.T) {
	dir, l := forkTree(t)
	ctx := context.Background()
	p, err := l.Start(ctx, filepath.Join(dir, "app"), AsExecuted)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"m0.so", "m2.so", "m3.so"} {
		if _, err := p.Dlopen(ctx, filepath.Join(dir, "pkg", m)); err != nil {
			t.Fatal(err)
		}
	}
	o, err := p.Dlopen(ctx, filepath.Join(dir, "pkg/m1.so"))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Reach(o)
	want := describe(r)
	d, link := r.Detached()
	if got := describe(d); got != want {
		t.Fatalf("detached:\n%s\nwas:\n%s", got, want)
	}
	in := map[*Object]bool{}
	for _, x := range d.Objects {
		in[x] = true
	}
	process := map[*Object]bool{}
	for _, x := range p.Objects() {
		process[x] = true
	}
	for _, x := range d.Objects {
		if process[x] {
			t.Errorf("%s: the detached result holds the process's own object", x.Name)
		}
		for _, y := range append(append([]*Object{x.Loader, x.Source}, d.NeededBy(x)...), x.Deps...) {
			if y == nil || in[y] {
				continue
			}
			if process[y] {
				t.Errorf("%s links to the process's own %s", x.Name, y.Name)
			}
			if y.Loader != nil || y.Source != nil || y.neededBy != nil || y.Deps != nil {
				t.Errorf("%s links to %s, a stand-in with links of its own", x.Name, y.Name)
			}
		}
	}
	// m0.so is outside m1.so's reach and needs libx.so.1 too: it stands in.
	m0 := p.Objects()[slices.IndexFunc(p.Objects(), func(x *Object) bool { return x.Name == filepath.Join(dir, "pkg/m0.so") })]
	if s := link(m0); s == nil || in[s] || s.Path != m0.Path {
		t.Errorf("link(m0.so) = %+v, want a stand-in with its path", s)
	}
	// Loading on: another object needs libx.so.1 and liby.so.
	if _, err := p.Dlopen(ctx, filepath.Join(dir, "pkg/lib/liby.so")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Dlopen(ctx, filepath.Join(dir, "pkg/m4.so")); err != nil {
		t.Fatal(err)
	}
	if got := describe(d); got != want {
		t.Errorf("the process loading on changed the detached result:\n%s\nwas:\n%s", got, want)
	}
}

// Forks of one process load side by side (each goroutine its own fork,
// run with -race): each answers as a fresh process would, none sees what
// another added to the objects they share, and the process forked
// refuses to load anything more.
func TestForksLoadSideBySide(t *testing.T) {
	dir, l := forkTree(t)
	ctx := context.Background()
	start := func() *Process { return startApp(t, l, dir) }
	files := []string{"m1.so", "m2.so", "m3.so", "m4.so", "m5.so", "m6.so", "lib/libx.so", "lib/liby.so"}
	want := map[string]string{}
	for _, m := range files {
		p := start()
		o, err := p.Dlopen(ctx, filepath.Join(dir, "pkg", m))
		if err != nil {
			t.Fatal(err)
		}
		want[m] = describe(p.Reach(o)) + describe(p.Result())
	}
	base := start()
	before := describe(base.Result())
	const rounds = 8
	got := make([]string, rounds*len(files))
	done := make(chan struct{})
	for i := range got {
		go func() {
			defer func() { done <- struct{}{} }()
			fork := base.Fork()
			o, err := fork.Dlopen(ctx, filepath.Join(dir, "pkg", files[i%len(files)]))
			if err != nil {
				got[i] = err.Error()
				return
			}
			got[i] = describe(fork.Reach(o)) + describe(fork.Result())
		}()
	}
	for range got {
		<-done
	}
	for i, g := range got {
		if m := files[i%len(files)]; g != want[m] {
			t.Errorf("%s in fork %d:\n%s\nfrom scratch:\n%s", m, i, g, want[m])
		}
	}
	if after := describe(base.Result()); after != before {
		t.Errorf("the forks changed the process forked:\n%s\nwas:\n%s", after, before)
	}
	if _, err := base.Dlopen(ctx, filepath.Join(dir, "pkg/m1.so")); err == nil {
		t.Error("a process that was forked loaded more")
	}
}
