package elfscan

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenFileKinds opens what a scan may meet where an object was
// expected: a missing file (fs.ErrNotExist, as os.Open says), a directory
// and a FIFO (not a regular file, at once: no open blocks on a FIFO), and
// an object read through the descriptor until Close.
func TestOpenFileKinds(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.so")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.so") {
		t.Errorf("missing file: %v", err)
	}
	fifo := filepath.Join(dir, "fifo.so")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Open(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Path != fifo || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open blocked on a FIFO")
	}
	var fe *FormatError
	if _, err := Open(dir); !errors.As(err, &fe) {
		t.Errorf("directory: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	in, err := f.Info()
	if err != nil || in.Machine == 0 {
		t.Errorf("Info of %s: %v, %v", exe, in, err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
