package fetch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cudadeps/cudadeps/internal/flock"
)

// Lock files are 0-byte files locked with flock(2) (internal/flock): a
// crash never leaves the store locked.
//
// A lock file is deleted by whoever holds it, while holding it: on release,
// and by SweepLocks for one no process holds. That is safe because every
// taker, once it holds the lock, checks that the path still names the file
// it locked; if the holder before it deleted the file meanwhile (a waiter
// then holds a lock on a file no one else can open), it starts over with
// the file the path names now. So two processes never both hold a lock
// that the path names, and no lock file outlives its use.

// lockFile takes the exclusive lock of path and returns its release, which
// deletes the file. The wait polls so that ctx can end it.
func lockFile(ctx context.Context, path string, log *slog.Logger, what string) (func(), error) {
	delay := 10 * time.Millisecond
	waited := false
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		for {
			ok, err := flock.TryExclusive(f)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("lock %s: %w", path, err)
			}
			if ok {
				break
			}
			if !waited && log != nil {
				log.Info("waiting for another cudadeps process", "for", what, "lock", path)
				waited = true
			}
			if err := sleep(ctx, delay); err != nil {
				f.Close()
				return nil, fmt.Errorf("waiting for lock %s: %w", path, err)
			}
			delay = min(2*delay, 500*time.Millisecond)
		}
		if flock.Names(path, f) {
			return func() { unlockRemove(path, f) }, nil
		}
		f.Close() // deleted by its holder while this one waited
	}
}

// unlockRemove deletes a lock file its holder holds, then releases it.
func unlockRemove(path string, f *os.File) {
	_ = os.Remove(path)
	_ = flock.Unlock(f)
	f.Close()
}

// tryLockFile takes path's lock if no process holds it, creating the file
// when create is set; ok is false when it is held (or absent).
func tryLockFile(path string, create bool) (release func(), ok bool, err error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, false, fmt.Errorf("lock %s: %w", path, err)
		}
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	got, err := flock.TryExclusive(f)
	if err != nil || !got || !flock.Names(path, f) {
		f.Close()
		return nil, false, err
	}
	return func() { unlockRemove(path, f) }, true, nil
}

// sweepLocks deletes the lock files (*.lock) in dir that no process holds:
// those a killed process left. Locks in use are left alone.
func sweepLocks(dir string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "*.lock"))
	if err != nil {
		return err
	}
	for _, p := range paths {
		release, ok, err := tryLockFile(p, false)
		if err != nil {
			return err
		}
		if ok {
			release()
		}
	}
	return nil
}
