// Package atomicfile replaces a file whole: a reader sees the old content or the new, never half of it.
package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteFile writes data to a temporary file beside path, syncs it, gives it
// perm and renames it over path.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFrom(path, bytes.NewReader(data), perm)
}

// WriteFileUnsynced is WriteFile without the sync: for a cache whose
// files carry a checksum, where a crash that loses the write costs the
// next run the work again, and waiting for the disk at every write (on a
// network file system, tens of milliseconds) would cost every run.
func WriteFileUnsynced(path string, data []byte, perm os.FileMode) error {
	return write(path, bytes.NewReader(data), perm, false)
}

// WriteFrom is WriteFile with the content streamed from r (an archive of
// hundreds of megabytes is never held in memory).
func WriteFrom(path string, r io.Reader, perm os.FileMode) error {
	return write(path, r, perm, true)
}

func write(path string, r io.Reader, perm os.FileMode, sync bool) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), tempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	if _, err = io.Copy(tmp, r); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if sync {
		if err = tmp.Sync(); err != nil {
			return err
		}
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Symlink makes path a symbolic link to target: a link made beside it,
// renamed over it. A link to target already there is left alone.
func Symlink(target, path string) error {
	if old, err := os.Readlink(path); err == nil && old == target {
		return nil
	}
	for range 100 {
		tmp := filepath.Join(filepath.Dir(path), tempPrefix(path)+strconv.FormatUint(rand.Uint64(), 36))
		err := os.Symlink(target, tmp)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("link %s: %w", path, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("link %s: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("link %s: no free temporary name beside it", path)
}

// tempPrefix starts the name of every temporary file made beside path.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// RemoveTemps removes the temporary files that writes of path killed
// half-way left beside it. A write of path running meanwhile would lose its
// file: call it only where no other process writes path (under the lock
// that guards its writers).
func RemoveTemps(path string) error {
	dir := filepath.Dir(path)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), tempPrefix(path)) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
