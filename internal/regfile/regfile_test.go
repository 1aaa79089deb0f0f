package regfile

import (
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// TestRead checks every kind of file Read meets: what it reads, and the
// one-line refusal, naming the file, of what it must not read; none blocks.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(4 << 30)
	lddtest.Need(t, err == nil, "no sparse files here: %v", err)
	f.Close()
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	data, err := Read(small, 10)
	if err != nil || string(data) != "0123456789" {
		t.Fatalf("Read(small, 10) = %q, %v", data, err)
	}
	if text, err := ReadNamedString(small, small, 10); err != nil || text != "0123456789" {
		t.Fatalf("ReadNamedString(small, 10) = %q, %v", text, err)
	}
	for _, tc := range []struct {
		path  string
		limit int64
		is    error
		want  string
	}{
		{small, 9, ErrTooLarge, "10 bytes, more than the 9"},
		{sparse, 1 << 20, ErrTooLarge, "4294967296 bytes"},
		{fifo, 1 << 20, ErrNotRegular, "not a regular file (a FIFO)"},
		{dir, 1 << 20, ErrNotRegular, "not a regular file (a directory)"},
		{"/dev/zero", 1 << 20, ErrNotRegular, "not a regular file (a character device)"},
		{sock, 1 << 20, nil, sock}, // a socket cannot be opened at all
		{filepath.Join(dir, "absent"), 1 << 20, fs.ErrNotExist, "absent"},
	} {
		// ReadNamedString refuses what Read refuses, alike.
		for _, read := range []func() error{
			func() error { _, err := Read(tc.path, tc.limit); return err },
			func() error { _, err := ReadNamedString(tc.path, tc.path, tc.limit); return err },
		} {
			done := make(chan error, 1)
			go func() { done <- read() }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("Read(%s) blocks", tc.path)
			}
			if err == nil {
				t.Errorf("Read(%s, %d) accepted", tc.path, tc.limit)
				continue
			}
			msg := err.Error()
			if tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(msg, tc.path) || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("Read(%s, %d) = %q, want one line naming it, %q, wrapping %v", tc.path, tc.limit, msg, tc.want, tc.is)
			}
		}
	}
}

// TestAbsent: a missing file and a path through a regular file are both
// absent; a permission error or a directory is not.
func TestAbsent(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, missing := Read(filepath.Join(dir, "none"), 10)
	_, through := Read(filepath.Join(file, "x"), 10)
	_, isDir := Read(dir, 10)
	if !Absent(missing) || !Absent(through) || Absent(isDir) || Absent(nil) {
		t.Errorf("Absent: missing %v, through a file %v, a directory %v", Absent(missing), Absent(through), Absent(isDir))
	}
}

// OpenNamed streams what ReadNamed reads, refuses what it refuses, and
// stops a file that grows past its bound while it is read.
func TestOpenNamed(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "RECORD")
	if err := os.WriteFile(file, []byte(strings.Repeat("x", 5000)), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := OpenNamed(file, "RECORD", 6000)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil || len(b) != 5000 {
		t.Fatalf("read %d bytes, %v", len(b), err)
	}
	if _, err := OpenNamed(file, "RECORD", 4000); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "RECORD") {
		t.Fatalf("over the bound: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenNamed(fifo, "fifo", 100); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("a FIFO: %v", err)
	}
	// Grown after it was opened: the bound still holds.
	r, err = OpenNamed(file, "RECORD", 5000)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.WriteFile(file, []byte(strings.Repeat("y", 9000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("grown past the bound while read: %v", err)
	}
}
