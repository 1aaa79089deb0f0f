package lddtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTreeState: a changed byte, a new file and a changed link are
// differences; ldconfig's auxiliary cache rewritten and files under skip
// are not.
func TestTreeState(t *testing.T) {
	root := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/ld.so.cache", "cache")
	write("var/cache/ldconfig/aux-cache", "one")
	write("opt/prefix/store/x", "x")
	if err := os.Symlink("libx.so.1", filepath.Join(root, "etc", "libx.so")); err != nil {
		t.Fatal(err)
	}
	skip := filepath.Join(root, "opt", "prefix")
	before := TreeState(t, root, skip)

	write("var/cache/ldconfig/aux-cache", "two, longer")
	write("opt/prefix/store/y", "y")
	if d := Diff(before, TreeState(t, root, skip)); d != "" {
		t.Fatalf("aux-cache and the skipped prefix counted: %s", d)
	}
	write("etc/ld.so.cache", "cachf")
	if d := Diff(before, TreeState(t, root, skip)); !strings.Contains(d, "/etc/ld.so.cache") {
		t.Fatalf("a changed byte: Diff = %q", d)
	}
	write("etc/ld.so.cache", "cache")
	write("etc/new", "")
	if d := Diff(before, TreeState(t, root, skip)); !strings.Contains(d, "/etc/new -rw-r--r-- 0 e3b0c442") {
		t.Fatalf("a new file: Diff = %q", d)
	}
	os.Remove(filepath.Join(root, "etc", "new"))
	os.Remove(filepath.Join(root, "etc", "libx.so"))
	if err := os.Symlink("libx.so.2", filepath.Join(root, "etc", "libx.so")); err != nil {
		t.Fatal(err)
	}
	if d := Diff(before, TreeState(t, root, skip)); !strings.Contains(d, "-> libx.so.2") {
		t.Fatalf("a changed link: Diff = %q", d)
	}
}
