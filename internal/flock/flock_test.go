package flock

import (
	"os"
	"path/filepath"
	"testing"
)

func open(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestLocksConflictBetweenOpens: two opens of one file conflict as two
// processes would; shared locks share; closing or unlocking frees the file.
func TestLocksConflictBetweenOpens(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	a, b := open(t, p), open(t, p)
	if ok, err := TryExclusive(a); !ok || err != nil {
		t.Fatalf("first exclusive: %v %v", ok, err)
	}
	if ok, err := TryExclusive(b); ok || err != nil {
		t.Fatalf("second exclusive beside a held one: %v %v", ok, err)
	}
	if ok, err := TryShared(b); ok || err != nil {
		t.Fatalf("shared beside a held exclusive: %v %v", ok, err)
	}
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	if ok, err := TryShared(b); !ok || err != nil {
		t.Fatalf("shared on a free file: %v %v", ok, err)
	}
	if ok, err := TryShared(a); !ok || err != nil {
		t.Fatalf("two shared: %v %v", ok, err)
	}
	if ok, _ := TryExclusive(open(t, p)); ok {
		t.Fatal("exclusive beside two shared")
	}
	a.Close()
	b.Close()
	if ok, err := TryExclusive(open(t, p)); !ok || err != nil {
		t.Fatalf("exclusive once the holders closed: %v %v", ok, err)
	}
}

// TestNames: a path names the file opened through it until the file is
// removed or replaced.
func TestNames(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.lock")
	f := open(t, p)
	if !Names(p, f) {
		t.Fatal("the path does not name the file just opened")
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if Names(p, f) {
		t.Fatal("a removed file is still named")
	}
	open(t, p)
	if Names(p, f) {
		t.Fatal("a replaced file is still named")
	}
}
