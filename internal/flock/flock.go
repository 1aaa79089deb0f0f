// Package flock takes flock(2) locks on open files without waiting, the one way cudadeps marks a file as in use by a live process.
//
// A flock lock belongs to the open file: two opens of one file conflict even
// within a process, and the kernel drops the lock when a killed process's
// files close, so a lock never outlives its holder. A lock taken on a file
// that another holder deleted meanwhile locks nothing anyone else can open:
// a taker checks with Names that the path still names the file it locked.
package flock

import (
	"errors"
	"os"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/eintr"
)

// TryExclusive takes f's exclusive lock without waiting; false when another
// open file holds a lock on it.
func TryExclusive(f *os.File) (bool, error) { return try(f, syscall.LOCK_EX) }

// TryShared takes f's shared lock without waiting; false when another open
// file holds the exclusive lock.
func TryShared(f *os.File) (bool, error) { return try(f, syscall.LOCK_SH) }

func try(f *os.File, how int) (bool, error) {
	_, err := eintr.Retry(func() (int, error) { return 0, syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB) })
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil
	}
	return false, err
}

// Unlock releases f's lock (closing f releases it too).
func Unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// Names reports whether path still names the open file f.
func Names(path string, f *os.File) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	fst, err := f.Stat()
	return err == nil && os.SameFile(st, fst)
}
