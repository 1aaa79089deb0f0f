package resolver

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestPresenceAsStat holds presence, which lists directories, to what
// os.Stat says of each file: regular files, missing ones, a directory,
// links to a file, to a directory and to nothing, a file under a missing
// directory and under a file, ".." and a trailing slash in the path, a
// name twice, and directories of many files listed by several workers.
func TestPresenceAsStat(t *testing.T) {
	dir := t.TempDir()
	write := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var files []string
	for d := range 40 {
		for f := range 30 {
			p := filepath.Join(dir, fmt.Sprintf("pkg%02d", d), fmt.Sprintf("m%02d.py", f))
			if (d+f)%3 != 0 {
				write(p)
			}
			files = append(files, p)
		}
	}
	lib := filepath.Join(dir, "lib")
	write(filepath.Join(lib, "libreal.so.1"))
	for name, target := range map[string]string{"libreal.so": "libreal.so.1", "libdangling.so": "libgone.so.1", "sub": "../pkg01"} {
		if err := os.Symlink(target, filepath.Join(lib, name)); err != nil {
			t.Fatal(err)
		}
	}
	files = append(files,
		filepath.Join(lib, "libreal.so.1"), filepath.Join(lib, "libreal.so"), filepath.Join(lib, "libdangling.so"),
		filepath.Join(lib, "sub"), filepath.Join(lib, "sub", "m01.py"), filepath.Join(lib, "sub", "m02.py"),
		filepath.Join(lib, "libreal.so.1"), filepath.Join(lib, "missing.so"),
		filepath.Join(dir, "nothere", "x.py"), filepath.Join(dir, "nothere", "y.py"),
		filepath.Join(lib, "libreal.so.1", "x"), filepath.Join(lib, "libreal.so.1", "y"),
		filepath.Join(dir, "pkg01", "..", "lib", "libreal.so.1"), filepath.Join(dir, "pkg01", "..", "lib", "libgone.so.1"),
		lib+"/", filepath.Join(dir, "pkg01")+"/.", dir,
	)
	got := presence(files)
	present := 0
	for i, f := range files {
		_, err := os.Stat(f)
		if want := err == nil; got[i] != want {
			t.Errorf("%s: present %v, os.Stat says %v", f, got[i], want)
		}
		if got[i] {
			present++
		}
	}
	if present == 0 || present == len(files) {
		t.Fatalf("%d of %d present: the fixture lacks cases", present, len(files))
	}
}
