package ldso

import (
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// The bounds a hostile root must stay within: every input below is refused
// or read within hostileTime and with at most hostileBytes allocated. The
// time is a guard against a hang (a FIFO, a quadratic scan, a storm of
// links), not a speed target: honest inputs take milliseconds.
const (
	hostileTime  = 5 * time.Second
	hostileBytes = 256 << 20
)

// bounded runs f, failing the test when it takes longer than hostileTime
// or allocates more than hostileBytes.
func bounded(t *testing.T, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(hostileTime):
		t.Fatalf("still running after %s", hostileTime)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > hostileBytes {
		t.Fatalf("allocated %d MB, more than %d MB", n>>20, hostileBytes>>20)
	}
}

// hostileRoot is a minimal root with etc/.
func hostileRoot(t *testing.T) string {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// newInRoot opens a loader on root and returns its error, within bounds.
func newInRoot(t *testing.T, root string) (l *Loader, err error) {
	t.Helper()
	bounded(t, func() {
		l, err = New(context.Background(), Options{Root: root, PreloadSet: true, NoProbe: true, LookupEnv: func(string) (string, bool) { return "", false }})
	})
	return l, err
}

// wantRefusal checks that err is one line naming the file and the problem.
func wantRefusal(t *testing.T, err error, file, problem string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s accepted, want it refused (%s)", file, problem)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, file) || !strings.Contains(msg, problem) {
		t.Fatalf("refusal %q, want one line naming %s and %q", msg, file, problem)
	}
}

func TestHostileRootFiles(t *testing.T) {
	for _, name := range []string{"ld.so.cache", "ld.so.preload"} {
		t.Run(name+" FIFO", func(t *testing.T) {
			root := hostileRoot(t)
			err := syscall.Mkfifo(filepath.Join(root, "etc", name), 0o644)
			lddtest.Need(t, err == nil, "mkfifo: %v", err)
			_, err = newInRoot(t, root)
			wantRefusal(t, err, name, "not a regular file (a FIFO)")
		})
		t.Run(name+" device", func(t *testing.T) {
			root := hostileRoot(t)
			// /dev/zero's numbers: an endless file of zeros.
			err := syscall.Mknod(filepath.Join(root, "etc", name), syscall.S_IFCHR|0o644, 1<<8|5)
			lddtest.Need(t, err == nil, "mknod needs root: %v", err)
			_, err = newInRoot(t, root)
			wantRefusal(t, err, name, "not a regular file (a character device)")
		})
		t.Run(name+" sparse 4 GB", func(t *testing.T) {
			root := hostileRoot(t)
			f, err := os.Create(filepath.Join(root, "etc", name))
			if err != nil {
				t.Fatal(err)
			}
			err = f.Truncate(4 << 30)
			lddtest.Need(t, err == nil, "no sparse files here: %v", err)
			f.Close()
			_, err = newInRoot(t, root)
			wantRefusal(t, err, name, "more than the")
		})
	}
	for _, link := range []string{"/dev/zero", "../../../../../../dev/zero"} {
		t.Run("ld.so.cache linked to "+link, func(t *testing.T) {
			// The link resolves inside the root, as in a chroot: to the
			// root's dev/zero, absent at first (no cache, as for ld.so),
			// then a device node (refused, naming the link).
			root := hostileRoot(t)
			if err := os.Symlink(link, filepath.Join(root, "etc", "ld.so.cache")); err != nil {
				t.Fatal(err)
			}
			l, err := newInRoot(t, root)
			if err != nil {
				t.Fatalf("a link to the root's absent /dev/zero: %v", err)
			}
			if c, _ := l.Cache(); c != nil {
				t.Fatal("a cache was read through a link to an absent file")
			}
			if err := os.Mkdir(filepath.Join(root, "dev"), 0o755); err != nil {
				t.Fatal(err)
			}
			err = syscall.Mknod(filepath.Join(root, "dev", "zero"), syscall.S_IFCHR|0o644, 1<<8|5)
			lddtest.Need(t, err == nil, "mknod needs CAP_MKNOD: %v", err)
			_, err = newInRoot(t, root)
			wantRefusal(t, err, "etc/ld.so.cache (a link to /dev/zero)", "not a regular file (a character device)")
		})
	}
	t.Run("directory as ld.so.cache", func(t *testing.T) {
		root := hostileRoot(t)
		if err := os.Mkdir(filepath.Join(root, "etc", "ld.so.cache"), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := newInRoot(t, root)
		wantRefusal(t, err, "ld.so.cache", "not a regular file (a directory)")
	})
	t.Run("links that each name two others", func(t *testing.T) {
		// etc/ld.so.cache → x0/ld.so.cache, xN → x(N+1)/x(N+1): resolving
		// x0 needs x1 twice, each x1 needs x2 twice, ... The kernel gives
		// up after 40 links in all (ELOOP), so the loader has no cache.
		root := hostileRoot(t)
		const n = 40
		for i := 0; i < n; i++ {
			target := "x" + itoa(i+1) + "/x" + itoa(i+1)
			if err := os.Symlink(target, filepath.Join(root, "etc", "x"+itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(".", filepath.Join(root, "etc", "x"+itoa(n))); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("x0/ld.so.cache", filepath.Join(root, "etc", "ld.so.cache")); err != nil {
			t.Fatal(err)
		}
		l, err := newInRoot(t, root)
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := l.Cache(); c != nil {
			t.Errorf("a cache was read through %d nested links", n)
		}
	})
	t.Run("FIFO as a library", func(t *testing.T) {
		root := hostileRoot(t)
		lib := filepath.Join(root, "lib", "aarch64-linux-gnu")
		if err := os.MkdirAll(lib, 0o755); err != nil {
			t.Fatal(err)
		}
		err := syscall.Mkfifo(filepath.Join(lib, "libfifo.so"), 0o644)
		lddtest.Need(t, err == nil, "mkfifo: %v", err)
		main := filepath.Join(root, "opt", "main.so")
		if err := elfwrite.Write(main, elfwrite.Spec{Machine: elf.EM_AARCH64, Soname: "main.so", Needed: []string{"libfifo.so"}}); err != nil {
			t.Fatal(err)
		}
		l, err := newInRoot(t, root)
		if err != nil {
			t.Fatal(err)
		}
		var r *Result
		bounded(t, func() { r, err = l.Closure(context.Background(), main) })
		if err != nil {
			t.Fatal(err)
		}
		m := wantMissing(t, r, "libfifo.so")
		if !strings.Contains(m.Problem, "not a regular file") {
			t.Errorf("libfifo.so miss says %q, want 'not a regular file'", m.Problem)
		}
	})
}

// TestHostileRootProgram: a program of the root that is a link to a file
// the root lacks (absolute, or by more ".." than the root is deep) is not
// found, as in a chroot, even where this host has a file at that path.
func TestHostileRootProgram(t *testing.T) {
	outside := t.TempDir()
	prog := filepath.Join(outside, "python3.11")
	if err := elfwrite.Write(prog, elfwrite.Spec{Type: elf.ET_DYN, Flags1: elf.DF_1_PIE, Machine: elf.EM_AARCH64}); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{prog, "../../../../../../../.." + prog} {
		root := hostileRoot(t)
		if err := os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(link, filepath.Join(root, "usr", "bin", "python3")); err != nil {
			t.Fatal(err)
		}
		l, err := newInRoot(t, root)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Start(context.Background(), filepath.Join(root, "usr", "bin", "python3"), AsExecuted); err == nil {
			t.Errorf("link %s: started this host's program through the root's link", link)
		}
		if in, err := l.Info(filepath.Join(root, "usr", "bin", "python3")); err == nil {
			t.Errorf("link %s: read this host's program (%v) through the root's link", link, in.Machine)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// hostileCache builds a new-format cache of n entries whose key and value
// offsets come from off(i), followed by a string area of strLen bytes of
// 'a' (ended by a NUL when terminated).
func hostileCache(n int, strLen int, terminated bool, off func(i, strStart int) uint32) []byte {
	strStart := newHeaderSize + n*newEntrySize
	data := make([]byte, strStart+strLen+1)
	copy(data, cacheMagicNew)
	binary.LittleEndian.PutUint32(data[20:], uint32(n))
	data[28] = 2 // little-endian
	for i := 0; i < n; i++ {
		e := data[newHeaderSize+i*newEntrySize:]
		binary.LittleEndian.PutUint32(e[0:], flagX8664Lib64|flagELFLibc6)
		binary.LittleEndian.PutUint32(e[4:], off(i, strStart))
		binary.LittleEndian.PutUint32(e[8:], off(i, strStart))
	}
	for i := strStart; i < strStart+strLen; i++ {
		data[i] = 'a'
	}
	if !terminated {
		data[len(data)-1] = 'a'
	}
	return data
}

func TestHostileCache(t *testing.T) {
	t.Run("entries sharing one long string", func(t *testing.T) {
		// 3 MB: 40,000 entries whose names and paths are one 2 MB string.
		// Copied per entry, they would be 160 GB.
		data := hostileCache(40000, 2<<20, true, func(_, s int) uint32 { return uint32(s) })
		var c *Cache
		var err error
		bounded(t, func() { c, err = ParseCache(data) })
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Entries) != 40000 || len(c.Entries[0].Name) != 2<<20 {
			t.Fatalf("%d entries, want 40000 of the long name", len(c.Entries))
		}
	})
	t.Run("string table without NUL", func(t *testing.T) {
		// 100,000 entries pointing to successive bytes of a 3 MB run with
		// no NUL: scanning from each to the end is 300 GB of reading.
		data := hostileCache(100000, 3<<20, false, func(i, s int) uint32 { return uint32(s + i*31) })
		var c *Cache
		var err error
		bounded(t, func() { c, err = ParseCache(data) })
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Entries) != 0 {
			t.Fatalf("%d entries kept, want none (no string ends)", len(c.Entries))
		}
	})
	t.Run("cache file larger than the limit", func(t *testing.T) {
		root := hostileRoot(t)
		data := hostileCache(1, MaxCacheSize, true, func(_, s int) uint32 { return uint32(s) })
		if err := os.WriteFile(filepath.Join(root, "etc", "ld.so.cache"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := newInRoot(t, root)
		wantRefusal(t, err, "ld.so.cache", "more than the")
	})
}
