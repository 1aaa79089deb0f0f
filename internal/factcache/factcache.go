// Package factcache keeps facts derived from files in the user's cache directory, each valid while stat says the files it came from are unchanged.
//
// A fact is saved with its inputs: every path it was derived from and what
// stat said of it (device, inode, size, modification and change time, mode,
// or that nothing was there). Checking that a fact still holds is then one
// stat per input, done in parallel, and no read. A file changed under the
// cache changes its stamp; a file added to or removed from a directory
// changes the directory's. Cache files are written whole (atomicfile) and
// carry a checksum: a damaged or foreign one is ignored and rewritten.
// Nothing here ever fails a command: a cache that cannot be read or
// written (unwritable, full, on a file system that misbehaves) only makes
// the next run do the work again.
package factcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cudadeps/cudadeps/internal/atomicfile"
	"github.com/cudadeps/cudadeps/internal/eintr"
	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/internal/workers"
)

// Stamp is what stat says of a path: enough to tell that it changed (a new
// inode, size, modification or change time or mode), or that nothing was
// there (the zero Stamp).
type Stamp struct {
	Dev, Ino     uint64
	Size         int64
	Mtime, Ctime int64 // nanoseconds since the epoch
	Mode         uint32
}

// unreadable marks a path stat refused (permission denied): it stays so
// until its stamp can be taken.
const unreadable = 1 << 31

// Missing reports a path where nothing was.
func (s Stamp) Missing() bool { return s == Stamp{} }

// StampOf is the stamp of what syscall.Stat said.
func StampOf(st *syscall.Stat_t) Stamp {
	return Stamp{Dev: uint64(st.Dev), Ino: st.Ino, Size: st.Size, Mode: st.Mode,
		Mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec, Ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec}
}

// Take stats path, following symbolic links.
func Take(path string) Stamp {
	var st syscall.Stat_t
	_, err := eintr.Retry(func() (int, error) { return 0, syscall.Stat(path, &st) })
	switch {
	case err == nil:
		return StampOf(&st)
	case errors.Is(err, fs.ErrNotExist), err == syscall.ENOTDIR:
		return Stamp{}
	}
	return Stamp{Mode: unreadable}
}

// Inputs are the paths a fact was derived from, sorted, with their stamps.
type Inputs struct {
	Paths  []string
	Stamps []Stamp
}

// Capture stats every path (duplicates once), several at a time.
func Capture(paths []string) Inputs {
	ps := slices.DeleteFunc(slices.Clone(paths), func(p string) bool { return p == "" })
	sort.Strings(ps)
	ps = slices.Compact(ps)
	in := Inputs{Paths: ps, Stamps: make([]Stamp, len(ps))}
	workers.Each(len(ps), statWorkers(len(ps)), func(i int) {
		in.Stamps[i] = Take(ps[i])
	})
	return in
}

// Unchanged reports whether every input has the stamp it had; it stops at
// the first that does not.
func (in Inputs) Unchanged() bool {
	if len(in.Stamps) != len(in.Paths) {
		return false
	}
	var changed atomic.Bool
	workers.Each(len(in.Paths), statWorkers(len(in.Paths)), func(i int) {
		if !changed.Load() && Take(in.Paths[i]) != in.Stamps[i] {
			changed.Store(true)
		}
	})
	return !changed.Load()
}

// SettleMargin is how long before a run its inputs must have been left
// alone for what it derives from them to be kept: longer than any file
// system's clock tick, within which a file written twice keeps its stamp.
const SettleMargin = 2 * time.Second

// Settled reports whether no input changed within margin before since, or
// after it. A file written twice within one tick of the file system's
// clock keeps its stamp; a fact derived from it while it may still change
// so is not worth keeping (git's "racily clean" entries).
func (in Inputs) Settled(since time.Time, margin time.Duration) bool {
	limit := since.Add(-margin).UnixNano()
	for _, s := range in.Stamps {
		if s.Mtime >= limit || s.Ctime >= limit {
			return false
		}
	}
	return true
}

// Newest names the input changed last.
func (in Inputs) Newest() string {
	newest, at := "", int64(0)
	for i, s := range in.Stamps {
		if t := max(s.Mtime, s.Ctime); t > at {
			newest, at = in.Paths[i], t
		}
	}
	return newest
}

// statWorkers is how many goroutines stat n paths: a stat costs a system
// call, and the file system answers several at once; below 64 paths one
// goroutine is faster.
func statWorkers(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), 16, (n+63)/64))
}

// Dir is a directory of cache files; the zero Dir keeps nothing.
type Dir struct{ path string }

// Open names the cache directory: $XDG_CACHE_HOME/cudadeps/facts, i.e.
// ~/.cache/cudadeps/facts. Without a home it is the zero Dir.
func Open() Dir {
	base, err := os.UserCacheDir()
	if err != nil {
		return Dir{}
	}
	return At(filepath.Join(base, "cudadeps", "facts"))
}

// At is a cache kept in dir.
func At(dir string) Dir { return Dir{path: dir} }

// Path is where the cache is kept ("" for none).
func (d Dir) Path() string { return d.path }

// magic opens every cache file; the version changes when the encoding of
// facts does.
const magic = "cudadeps facts 2\n"

// maxFile bounds one cache file: a fact is a list of paths and stamps and a
// short answer, and a cache file is read whole.
const maxFile = 32 << 20

// Load decodes the cache file name into v; false when it is absent,
// damaged, of another version, or fails to decode.
func (d Dir) Load(name string, v any) bool {
	if d.path == "" {
		return false
	}
	data, err := regfile.Read(filepath.Join(d.path, name), maxFile)
	if err != nil || len(data) < len(magic)+sha256.Size || string(data[:len(magic)]) != magic {
		return false
	}
	sum, body := data[len(magic):len(magic)+sha256.Size], data[len(magic)+sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return false
	}
	return gob.NewDecoder(bytes.NewReader(body)).Decode(v) == nil
}

// Save writes v as the cache file name, whole or not at all.
func (d Dir) Save(name string, v any) error {
	if d.path == "" {
		return errors.New("no cache directory")
	}
	var body bytes.Buffer
	if err := gob.NewEncoder(&body).Encode(v); err != nil {
		return err
	}
	if body.Len() > maxFile-len(magic)-sha256.Size {
		return fmt.Errorf("cache file %s: %d bytes, more than a cache file may hold", name, body.Len())
	}
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return err
	}
	sum := sha256.Sum256(body.Bytes())
	out := make([]byte, 0, len(magic)+len(sum)+body.Len())
	out = append(append(append(out, magic...), sum[:]...), body.Bytes()...)
	return atomicfile.WriteFileUnsynced(filepath.Join(d.path, name), out, 0o644)
}

// Trim removes the oldest cache files whose names start with prefix until
// keep are left, so that the cache stays bounded whatever is asked of it.
func (d Dir) Trim(prefix string, keep int) {
	if d.path == "" {
		return
	}
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return
	}
	type file struct {
		name string
		mod  time.Time
	}
	var files []file
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if info, err := e.Info(); err == nil {
			files = append(files, file{e.Name(), info.ModTime()})
		}
	}
	if len(files) <= keep {
		return
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.After(files[j].mod) })
	for _, f := range files[keep:] {
		os.Remove(filepath.Join(d.path, f.name))
	}
}

// Key names the cache file of a fact by what it is about: the parts are
// hashed, so any text can be one.
func Key(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return fmt.Sprintf("%s-%x", kind, h.Sum(nil)[:16])
}
