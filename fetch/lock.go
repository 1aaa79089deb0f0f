package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// lockFile takes an exclusive flock(2) on path and returns its release.
// flock locks belong to the open file, so two opens conflict even within one
// process, and the kernel drops the lock when a killed process's files close:
// a crash never leaves the store locked. The wait polls so that ctx can end it.
func lockFile(ctx context.Context, path string, log *slog.Logger, what string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	fd := int(f.Fd())
	delay := 10 * time.Millisecond
	waited := false
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(fd, syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
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
}
