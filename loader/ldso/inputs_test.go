package ldso

import (
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// TestInputsCoverEveryAnswer: after a closure, the loader's inputs name the
// directories it searched in vain (an earlier RPATH entry), the files it
// read and its cache; a library added to the directory searched in vain
// (which the loader would now take) or a library rewritten in place changes
// their stamps, while a change elsewhere does not.
func TestInputsCoverEveryAnswer(t *testing.T) {
	dir := t.TempDir()
	tree{objs: map[string]elfwrite.Spec{
		"pkg/a.so":           {Soname: "a.so", Needed: []string{"libx.so"}, RPath: str("$ORIGIN/first:$ORIGIN/second")},
		"pkg/second/libx.so": leaf("libx.so"),
		"unrelated/libz.so":  leaf("libz.so"),
	}, files: map[string]string{"pkg/first/README": "not a library"}}.write(t, dir, elf.EM_X86_64)
	old := time.Now().Add(-time.Hour)
	_ = filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, old, old) })
	ctx := context.Background()
	_, opts := hostEnv(nil)
	l, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Closure(ctx, filepath.Join(dir, "pkg/a.so"))
	if err != nil {
		t.Fatal(err)
	}
	wantFound(t, r, "libx.so", ViaRPath, dir+"/pkg/second/libx.so")
	inputs := l.Inputs()
	for _, want := range []string{dir + "/pkg/first", dir + "/pkg/second", dir + "/pkg/second/libx.so", dir + "/pkg/a.so"} {
		if !slices.Contains(inputs, want) {
			t.Errorf("inputs lack %s", want)
		}
	}
	if c, _ := l.Cache(); c != nil && !slices.Contains(inputs, "/etc/ld.so.cache") {
		t.Errorf("inputs lack /etc/ld.so.cache")
	}
	for name, change := range map[string]func() error{
		"library added to a directory searched first": func() error {
			return elfwrite.Write(filepath.Join(dir, "pkg/first/libx.so"), elfwrite.Spec{Soname: "libx.so", Machine: elf.EM_X86_64})
		},
		"library rewritten in place": func() error {
			return os.WriteFile(filepath.Join(dir, "pkg/second/libx.so"), []byte("\x7fELF, damaged"), 0o755)
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := factcache.Capture(inputs)
			if err := os.WriteFile(filepath.Join(dir, "unrelated/other"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if !in.Unchanged() {
				t.Fatal("a change outside what the loader looked at counts")
			}
			if err := change(); err != nil {
				t.Fatal(err)
			}
			if in.Unchanged() {
				t.Error("the inputs did not change")
			}
		})
	}
}
