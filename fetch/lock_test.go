package fetch

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLockExclusiveWhileDeleted: holders delete their lock file on
// release while others wait on it; a waiter that wakes holding the deleted
// file must start over, so no two goroutines are ever inside at once, and
// no lock file is left.
func TestLockExclusiveWhileDeleted(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k.lock")
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				release, err := lockFile(context.Background(), p, nil, "test")
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond) // long enough for a waiter to wake
				inside.Add(-1)
				release()
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d times two holders at once", n)
	}
	mustNotExist(t, p)
}

// TestSweepLocks: a lock file a process holds stays; one nobody holds (a
// killed process's) is deleted.
func TestSweepLocks(t *testing.T) {
	dir := t.TempDir()
	held, stale := filepath.Join(dir, "held.lock"), filepath.Join(dir, "stale.lock")
	release, err := lockFile(context.Background(), held, nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sweepLocks(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(held); err != nil {
		t.Errorf("the held lock was swept: %v", err)
	}
	mustNotExist(t, stale)
}

// TestTidy: a staging directory whose key is locked (an install under way)
// stays; one whose key nobody holds (a killed install or removal) goes, and
// so do lock files nobody holds.
func TestTidy(t *testing.T) {
	s := openStore(t, t.TempDir())
	if err := s.prepare(); err != nil {
		t.Fatal(err)
	}
	busy, dead := testKey(), testKey()
	dead.Platform = "linux-x86_64"
	// A key whose id begins with dead's: its staging is not dead's.
	longer := dead
	longer.Variant = "cuda13.1"
	stage := func(k Key) string {
		d, err := os.MkdirTemp(filepath.Join(s.Dir(), ".staging"), k.id()+".")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(d, "t", "top"), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	busyStage, deadStage, longerStage := stage(busy), stage(dead), stage(longer)
	release, err := lockFile(context.Background(), s.lockPath(busy), nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	releaseLonger, err := lockFile(context.Background(), s.lockPath(longer), nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(s.Dir(), ".locks", "other@1@linux-x86_64@any.lock")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Tidy(); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, deadStage)
	mustNotExist(t, stale)
	mustNotExist(t, s.lockPath(dead))
	for _, p := range []string{busyStage, longerStage, s.lockPath(busy)} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s, in use, was removed: %v", p, err)
		}
	}
	release()
	releaseLonger()
	if err := s.Tidy(); err != nil {
		t.Fatal(err)
	}
	if got := walk(t, s.Dir()); len(got) != 0 {
		t.Errorf("the store holds %q", got)
	}
	if got, _ := os.ReadDir(filepath.Join(s.Dir(), ".staging")); len(got) != 0 {
		t.Errorf("staging holds %v", got)
	}
}

// TestInstallSweepsCacheLocks: a lock file a killed download left in the
// cache goes with the next install through that cache.
func TestInstallSweepsCacheLocks(t *testing.T) {
	a := tarBytes(t, []member{file("top/a", "a")})
	srv := newServer(t, a)
	s := openStore(t, t.TempDir())
	c := testClient(t, nil)
	stale := c.cachePath(sha([]byte("other"))) + ".lock"
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request(srv.url("a.tar"), a)}}); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, stale)
	mustNotExist(t, c.cachePath(sha(a))+".lock")
}
