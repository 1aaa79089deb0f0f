package scan

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// notELF says what a file that is not ELF is, as far as it matters to a
// loader: a GNU ld linker script (libc.so is one) or anything else.
func notELF(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return "not an ELF file"
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	for _, mark := range [][]byte{[]byte("GNU ld script"), []byte("INPUT("), []byte("GROUP("), []byte("OUTPUT_FORMAT(")} {
		if bytes.Contains(head, mark) {
			return "a linker script (read by the link editor at build time, never by the loader)"
		}
	}
	return "not an ELF file, a directory or a wheel"
}

// HasObject reports whether path (a file or a directory tree) holds at
// least one loadable dynamic ELF object. It stops at the first one.
func HasObject(ctx context.Context, path string) (bool, error) {
	found := errors.New("found")
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if ok, err := hasELFMagic(p); err != nil || !ok {
			return nil
		}
		if in, err := elfscan.ReadInfo(p); err == nil && notLoadable(in) == "" {
			return found
		}
		return nil
	})
	if errors.Is(err, found) {
		return true, nil
	}
	return false, err
}
