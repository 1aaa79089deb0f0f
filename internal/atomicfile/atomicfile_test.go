package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writers are the two ways to replace a file whole, synced and not.
var writers = map[string]func(string, []byte, os.FileMode) error{"WriteFile": WriteFile, "WriteFileUnsynced": WriteFileUnsynced}

func TestWriteFileReplacesWhole(t *testing.T) {
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "catalog.yaml")
			if err := os.WriteFile(p, []byte("old content, longer than the new\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := write(p, []byte("new\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil || string(got) != "new\n" {
				t.Fatalf("content = %q, %v", got, err)
			}
			if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
				t.Errorf("mode = %v, want 0644", st.Mode().Perm())
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Errorf("left behind: %v", ents)
			}
		})
	}
}

func TestWriteFileLeavesNothingOnError(t *testing.T) {
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			// A directory cannot be renamed over by a file: the write fails late.
			p := filepath.Join(dir, "taken")
			if err := os.MkdirAll(filepath.Join(p, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := write(p, []byte("data"), 0o644); err == nil {
				t.Fatal("want an error")
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Errorf("left behind: %v", ents)
			}
		})
	}
}

func TestSymlinkReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "link")
	for _, target := range []string{"/a", "/a", "/b"} {
		if err := Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(p); err != nil || got != target {
			t.Fatalf("link to %q, want %q (%v)", got, target, err)
		}
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Symlink("/c", p); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(p); got != "/c" {
		t.Fatalf("a file was not replaced by the link: %q", got)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
}

// dyingReader stands for a process killed mid-write: the write stops
// without returning, and its temporary file stays.
type dyingReader struct{}

func (dyingReader) Read([]byte) (int, error) { panic("killed") }

// killedWrite writes path as a process killed half-way through would.
func killedWrite(t *testing.T, path string) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatal("the write was not cut short")
		}
	}()
	_ = WriteFrom(path, dyingReader{}, 0o644)
}

// TestRemoveTemps: the temporary files of killed writes of a path go; the
// path itself, and the files and temporaries of other paths, stay.
func TestRemoveTemps(t *testing.T) {
	dir := t.TempDir()
	p, other := filepath.Join(dir, "rec.json"), filepath.Join(dir, "rec.json2")
	if err := WriteFile(p, []byte("whole\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	killedWrite(t, p)
	killedWrite(t, p)
	killedWrite(t, other)
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Fatalf("before: %v, want the file and three temporary files", ents)
	}
	if err := RemoveTemps(p); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir) // sorted: ".rec.json2.tmp-…" before "rec.json"
	if len(ents) != 2 || !strings.HasPrefix(ents[0].Name(), ".rec.json2.tmp-") || ents[1].Name() != "rec.json" {
		t.Fatalf("after: %v, want the temporary file of rec.json2 and rec.json", ents)
	}
	if data, err := os.ReadFile(p); err != nil || string(data) != "whole\n" {
		t.Fatalf("the file: %q %v", data, err)
	}
	if err := RemoveTemps(filepath.Join(dir, "absent", "x")); err != nil {
		t.Fatalf("in a directory that does not exist: %v", err)
	}
}
