package ldso

import (
	"context"
	"debug/elf"
	"path/filepath"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// TestSearchMemoKeepsOwnRPath loads two objects of one directory, with the
// same RPATH, through one loader: each finds the library through its own
// RPATH, not through the first one's (the search memo is shared by every
// closure of a loader, and must not carry one object's identity into
// another's closure).
func TestSearchMemoKeepsOwnRPath(t *testing.T) {
	dir := t.TempDir()
	tree{objs: map[string]elfwrite.Spec{
		"pkg/a.so":        {Soname: "a.so", Needed: []string{"libx.so"}, RPath: str("$ORIGIN/lib")},
		"pkg/b.so":        {Soname: "b.so", Needed: []string{"libx.so"}, RPath: str("$ORIGIN/lib")},
		"pkg/lib/libx.so": leaf("libx.so"),
	}}.write(t, dir, elf.EM_X86_64)
	ctx := context.Background()
	_, opts := hostEnv(nil)
	l, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.so", "b.so", "a.so"} {
		main := filepath.Join(dir, "pkg", name)
		r, err := l.Closure(ctx, main)
		if err != nil {
			t.Fatal(err)
		}
		x := wantFound(t, r, "libx.so", ViaRPath, dir+"/pkg/lib/libx.so")
		if x.From != "RPATH of "+main || x.Source != r.Main {
			t.Errorf("%s: libx.so found by %q (source %p), want its own RPATH (%p)", name, x.From, x.Source, r.Main)
		}
	}
}
