package scan

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trace records a walk as the calls it makes.
func trace(calls *[]string) fs.WalkDirFunc {
	return func(p string, d fs.DirEntry, err error) error {
		s := p
		if d != nil {
			s += fmt.Sprintf(" %v %s", d.Type(), d.Name())
		}
		if err != nil {
			s += " error: " + err.Error()
		}
		*calls = append(*calls, s)
		return nil
	}
}

// TestWalkOrderedMatchesWalkDir walks trees with both walkers and compares
// every call: a tree of many directories (some empty, some deep), files,
// symlinks to files and directories; a file as the root; a missing root.
func TestWalkOrderedMatchesWalkDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "tree")
	for i := 0; i < 40; i++ {
		d := filepath.Join(dir, fmt.Sprintf("p%02d", i%7), fmt.Sprintf("q%02d", i), strings.Repeat("r/", i%5))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < i%4; j++ {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.py", j)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, l := range [][2]string{{"p01", "tree/linkdir"}, {"p02/q02/f0.py", "tree/linkfile"}, {"nowhere", "tree/p03/dangling"}} {
		if err := os.Symlink(filepath.Join(base, "tree", l[0]), filepath.Join(base, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(base)
	for _, root := range []string{dir, "tree", "tree/", "./tree/p01", filepath.Join(dir, "p02", "q02", "f0.py"), filepath.Join(dir, "missing"), "tree/linkdir"} {
		for _, parallel := range []int{1, 3, 16} {
			var want, got []string
			wantErr := filepath.WalkDir(root, trace(&want))
			gotErr := walkOrdered(context.Background(), root, parallel, trace(&got))
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s, %d listers: walk differs from filepath.WalkDir\ngot (%v):\n%s\nwant (%v):\n%s", root, parallel, gotErr, strings.Join(got, "\n"), wantErr, strings.Join(want, "\n"))
			}
			if len(want) < 2 && root == dir {
				t.Fatalf("the tree has %d entries", len(want))
			}
		}
	}
}

// TestWalkOrderedStops checks that an error from fn ends the walk with that
// error, and that a cancelled context ends it too.
func TestWalkOrderedStops(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 30; i++ {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("d%02d", i), "e"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stop := fmt.Errorf("enough")
	n := 0
	err := walkOrdered(context.Background(), dir, 4, func(string, fs.DirEntry, error) error {
		if n++; n == 10 {
			return stop
		}
		return nil
	})
	if err != stop || n != 10 {
		t.Errorf("walk ended with %v after %d calls, want %v after 10", err, n, stop)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n = 0
	err = walkOrdered(ctx, dir, 4, func(string, fs.DirEntry, error) error { n++; return nil })
	if err != context.Canceled || n > 1 {
		t.Errorf("cancelled walk: %v after %d calls", err, n)
	}
}
