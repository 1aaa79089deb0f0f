package ldso

import (
	"context"
	"debug/elf"
	"path/filepath"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// TestOriginKeepsDotDot checks two rules that wheels rely on (h5py, jaxlib):
// $ORIGIN of an object opened through "dir/../libs" is "dir/../libs", not
// its cleaned form, so what it finds through $ORIGIN is named that way; and
// a search directory that ends in ".." ("$ORIGIN/../../") is searched.
func TestOriginKeepsDotDot(t *testing.T) {
	ldsoPath, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	dir := t.TempDir()
	tree{objs: map[string]elfwrite.Spec{
		"pkg/main.so":     {Soname: "main.so", Needed: []string{"libA.so"}, RunPath: str("$ORIGIN/../libs")},
		"libs/libA.so":    {Soname: "libA.so", Needed: []string{"libB.so"}, RunPath: str("$ORIGIN")},
		"libs/libB.so":    leaf("libB.so"),
		"deep/x/y/mod.so": {Needed: []string{"libC.so", "libc.so.6"}, RunPath: str("$ORIGIN/missing:$ORIGIN/../../")},
		"deep/libC.so":    leaf("libC.so"),
	}}.write(t, dir, elf.EM_X86_64)
	ctx := context.Background()
	env, opts := hostEnv(nil)
	l, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ main, name, path string }{
		{"pkg/main.so", "libB.so", dir + "/pkg/../libs/libB.so"},
		{"deep/x/y/mod.so", "libC.so", dir + "/deep/x/y/../../libC.so"},
	} {
		main := filepath.Join(dir, c.main)
		got, err := l.Closure(ctx, main)
		if err != nil {
			t.Fatal(err)
		}
		wantFound(t, got, c.name, ViaRunPath, c.path)
		want, err := lddtest.List(ctx, ldsoPath, main, env)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, main, got, want)
	}
}

// TestDotDotAfterSymlink checks that ".." after a symlinked directory goes
// to the parent of the link's target, as in the kernel, not to the parent
// of the link: pkg/lib is a link to real/lib, so $ORIGIN/../deps of a
// library in pkg/lib is real/deps.
func TestDotDotAfterSymlink(t *testing.T) {
	ldsoPath, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	dir := t.TempDir()
	tree{
		objs: map[string]elfwrite.Spec{
			"pkg/main.so":       {Soname: "main.so", Needed: []string{"libA.so"}, RunPath: str("$ORIGIN/lib")},
			"real/lib/libA.so":  {Soname: "libA.so", Needed: []string{"libB.so"}, RunPath: str("$ORIGIN/../deps")},
			"real/deps/libB.so": leaf("libB.so"),
		},
		links: map[string]string{"pkg/lib": "../real/lib"},
	}.write(t, dir, elf.EM_X86_64)
	ctx := context.Background()
	env, opts := hostEnv(nil)
	l, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "pkg/main.so")
	got, err := l.Closure(ctx, main)
	if err != nil {
		t.Fatal(err)
	}
	wantFound(t, got, "libB.so", ViaRunPath, dir+"/pkg/lib/../deps/libB.so")
	want, err := lddtest.List(ctx, ldsoPath, main, env)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, main, got, want)
}
