// Package regfile reads small files from places that are not trusted to hold sane ones: a regular file only, opened without blocking, of at most a given size.
package regfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"unsafe"
)

// ErrNotRegular is wrapped by the error for a directory, FIFO, device or
// socket: a FIFO would block the reader, a device might never end.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file of more bytes than allowed.
var ErrTooLarge = errors.New("too large")

// Read reads the regular file at path, of at most limit bytes. A missing
// file's error wraps fs.ErrNotExist.
func Read(path string, limit int64) ([]byte, error) { return ReadNamed(path, path, limit) }

// ReadNamed is Read with errors that call the file name: a file reached
// through another name (a link resolved inside a root) is reported as the
// caller knows it.
func ReadNamed(path, name string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if err := readNamed(path, name, limit, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadNamedString is ReadNamed into a string, without the copy that
// converting the bytes would make (a RECORD runs to megabytes). The
// bytes are read here and never given out, so the string is as
// immutable as any (strings.Builder makes its strings the same way).
func ReadNamedString(path, name string, limit int64) (string, error) {
	var buf bytes.Buffer
	if err := readNamed(path, name, limit, &buf); err != nil {
		return "", err
	}
	b := buf.Bytes()
	return unsafe.String(unsafe.SliceData(b), len(b)), nil
}

// OpenNamed opens the regular file at path, of at most limit bytes, for
// a caller that reads it as a stream (a RECORD of megabytes, of which a
// few lines are kept); name is what errors call it, as in ReadNamed.
// Reading past limit (a file grown since) fails with ErrTooLarge.
func OpenNamed(path, name string, limit int64) (io.ReadCloser, error) {
	b, err := openNamed(path, name, limit)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func openNamed(path, name string, limit int64) (*bounded, error) {
	// O_NONBLOCK: opening a FIFO without a writer must not wait; it is
	// refused below like any other file that is not regular.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Path = name
		}
		return nil, err
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		err = fmt.Errorf("%s: %w", name, err)
	case !st.Mode().IsRegular():
		err = fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, Kind(st.Mode()))
	case st.Size() > limit:
		err = fmt.Errorf("%s: %w: %d bytes, more than the %d this file may hold", name, ErrTooLarge, st.Size(), limit)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &bounded{f: f, name: name, limit: limit, left: limit, size: st.Size()}, nil
}

// bounded reads a file of at most limit bytes, left of them still.
type bounded struct {
	f           *os.File
	name        string
	limit, left int64
	size        int64 // at opening, for the first read's buffer
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.grew()
	}
	// One byte past the bound shows a file that grew.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.f.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, b.grew()
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("read %s: %w", b.name, err)
	}
	return n, err
}

func (b *bounded) grew() error {
	return fmt.Errorf("%s: %w: grew past the %d bytes this file may hold", b.name, ErrTooLarge, b.limit)
}

func (b *bounded) Close() error { return b.f.Close() }

func readNamed(path, name string, limit int64, w *bytes.Buffer) error {
	r, err := openNamed(path, name, limit)
	if err != nil {
		return err
	}
	defer r.Close()
	// Room for its size (and a little more, to see the end) takes one
	// read where growing from nothing takes a dozen copies of a large one.
	w.Grow(int(min(r.size, limit)) + bytes.MinRead + 1)
	_, err = w.ReadFrom(r)
	return err
}

// Absent reports whether err says that an optional file is not there:
// missing, or a path through something that is not a directory (a HOME
// that is a file has no ~/.config/cudadeps/config.toml either).
func Absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// Kind names the type of a file that is not a regular one.
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "of mode " + m.Type().String()
}
