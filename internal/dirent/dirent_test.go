package dirent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestEachMatchesReadDir lists a directory of more entries than one read
// holds, of every kind, and compares names and types with os.ReadDir.
func TestEachMatchesReadDir(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%03d-with-a-long-name.py", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := map[string]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		typ := byte(syscall.DT_REG)
		switch {
		case e.IsDir():
			typ = syscall.DT_DIR
		case e.Type()&os.ModeSymlink != 0:
			typ = syscall.DT_LNK
		case e.Type()&os.ModeNamedPipe != 0:
			typ = syscall.DT_FIFO
		}
		want[e.Name()] = typ
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	got := map[string]byte{}
	if err := Each(fd, make([]byte, 4096), func(name []byte, typ byte) error {
		if _, dup := got[string(name)]; dup {
			return fmt.Errorf("%s listed twice", name)
		}
		got[string(name)] = typ
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, typ := range want {
		// A file system that records no types says DT_UNKNOWN.
		if g, ok := got[name]; !ok || g != typ && g != syscall.DT_UNKNOWN {
			t.Errorf("%s: type %d, listed %v; want %d", name, g, ok, typ)
		}
	}
	if len(got) != len(want) || len(got) != 303 {
		t.Errorf("%d entries, want %d (303)", len(got), len(want))
	}
	if _, ok := got["."]; ok {
		t.Error(". listed")
	}
	if _, ok := got[".."]; ok {
		t.Error(".. listed")
	}

	// fn's error stops the listing and is returned.
	stop := errors.New("stop")
	calls := 0
	if _, err := syscall.Seek(fd, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := Each(fd, make([]byte, 4096), func([]byte, byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("stopped after %d calls with %v", calls, err)
	}
	// A descriptor that is no directory is an error.
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Each(int(f.Fd()), make([]byte, 4096), func([]byte, byte) error { return nil }); err == nil {
		t.Error("a file listed as a directory")
	}
}
