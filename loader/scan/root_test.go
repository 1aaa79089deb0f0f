package scan

import (
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// TestInterpreterUnderRoot: a venv's bin/python3.12 is an absolute link to
// the system's interpreter. Under --root it names the root's interpreter,
// as in a chroot; a link that leads out of the root names nothing, never
// this host's program.
func TestInterpreterUnderRoot(t *testing.T) {
	python := elfwrite.Linked{Defs: []elfwrite.Def{{Name: "PyObject_Call", Type: elf.STT_FUNC}}}
	for _, inside := range []bool{true, false} {
		root := t.TempDir()
		prefix := filepath.Join(root, "opt/venv")
		site := filepath.Join(prefix, "lib/python3.12/site-packages")
		target := "/usr/bin/python3.12"
		if err := elfwrite.WriteLinked(filepath.Join(root, target), python); err != nil {
			t.Fatal(err)
		}
		if !inside {
			outside := filepath.Join(t.TempDir(), "python3.12")
			if err := elfwrite.WriteLinked(outside, python); err != nil {
				t.Fatal(err)
			}
			target = outside
			if err := os.Remove(filepath.Join(root, "usr/bin/python3.12")); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(prefix, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(prefix, "bin/python3.12")); err != nil {
			t.Fatal(err)
		}
		ext := filepath.Join(site, "pkg/_ext.cpython-312-x86_64-linux-gnu.so")
		if err := elfwrite.WriteLinked(ext, elfwrite.Linked{Soname: "_ext.so", Defs: []elfwrite.Def{{Name: "PyInit__ext", Type: elf.STT_FUNC}}, Refs: []elfwrite.Ref{{Name: "PyObject_Call"}}}); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		l, err := ldso.New(ctx, ldso.Options{Root: root, PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(ctx, l, []string{ext}, Options{Symbols: true})
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if inside {
			want = filepath.Join(prefix, "bin/python3.12")
		}
		if got := rep.Roots[0].BoundIn; got != want {
			t.Errorf("link to %s: bound in %q, want %q", target, got, want)
		}
	}
}
