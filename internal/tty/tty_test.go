package tty

import (
	"bytes"
	"os"
	"testing"
)

func TestIs(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if Is(r) || Is(w) || Is(&bytes.Buffer{}) || Is(nil) {
		t.Error("a pipe or a buffer taken for a terminal")
	}
}
