package ldso

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/eintr"
	"github.com/cudadeps/cudadeps/internal/memo"
	"github.com/cudadeps/cudadeps/internal/rootfs"
)

// rootFS maps the paths the loader sees (guest paths) to files on this
// machine. On the host the two are the same. Under --root DIR, a guest path
// is resolved inside DIR the way a chroot would (absolute symlinks stay in
// DIR); paths that lie inside the trees being scanned are also found where
// they are, so a wheel tree outside the sysroot still resolves its $ORIGIN.
//
// Directory listings are cached: the loader probes many directories (each
// search directory times every hwcaps subdirectory), almost all of them
// absent, and a scan of a large tree asks the same questions thousands of
// times.
type rootFS struct {
	r     *rootfs.Root
	root  string   // "" on the host; else an absolute, clean host path
	trees []string // host paths of scanned trees reachable as themselves

	mu       sync.Mutex                    // guards trees and writes of overlays
	dirs     memo.Map[string, *dirListing] // host dir → listing, each listed once however many ask at once
	stats    syncMap[string, statResult]   // host path → what stat said
	overlays atomic.Pointer[[]*zipOverlay] // mounted wheels
}

// statResult is what os.Stat said about a host path (symlinks followed).
type statResult struct{ exists, dir bool }

type dirListing struct {
	exists bool
	names  map[string]bool // nil when the directory could not be listed
}

func newRootFS(root string) (*rootFS, error) {
	r, err := rootfs.Open(root)
	if err != nil {
		return nil, err
	}
	return &rootFS{r: r, root: r.Dir()}, nil
}

func (f *rootFS) describe() string {
	if f.root == "" {
		return "this host"
	}
	return f.root
}

// addTree makes a scanned tree reachable under its own host path.
func (f *rootFS) addTree(hostPath string) {
	if f.root == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.trees, hostPath) {
		f.trees = append(f.trees, hostPath)
	}
}

// guestPath converts a host path given on the command line to the path the
// loader would use: inside the root it is stripped of the root prefix.
func (f *rootFS) guestPath(host string) string {
	if f.root == "" {
		return host
	}
	if rel, ok := strings.CutPrefix(host, f.root); ok && (rel == "" || rel[0] == '/') {
		if rel == "" {
			return "/"
		}
		return rel
	}
	return host
}

// resolve finds the host file behind a guest path, following symlinks; ok
// is false when nothing exists there.
func (f *rootFS) resolve(guest string) (string, bool) {
	if o, rel, isDir, ok := f.lookupOverlay(guest); ok {
		if isDir {
			return "", false
		}
		return o.handle(rel), true
	}
	// Under a wheel's mount, directories may exist only in the wheel, so the
	// path is cleaned before the real files under the mount are looked at.
	guest = f.cleanUnderMount(guest)
	if f.root == "" {
		if !f.stat(guest).exists {
			return "", false
		}
		return guest, true
	}
	if !path.IsAbs(guest) {
		// Relative paths (an empty RPATH entry, a relative LD_LIBRARY_PATH)
		// are relative to the working directory, as for the loader.
		if _, err := os.Stat(guest); err != nil {
			return "", false
		}
		return guest, true
	}
	if host, ok := f.inRoot(guest); ok {
		return host, true
	}
	f.mu.Lock()
	trees := f.trees
	f.mu.Unlock()
	for _, t := range trees {
		if guest == t || strings.HasPrefix(guest, t+"/") {
			if _, err := os.Stat(guest); err == nil {
				return guest, true
			}
		}
	}
	return "", false
}

// brokenLink describes a path that is a symbolic link resolving to no
// file: a loop, or a link to nothing; "" for anything else.
func (f *rootFS) brokenLink(guest string) string {
	host := guest
	if f.root != "" && path.IsAbs(guest) {
		host = filepath.Join(f.root, guest)
	}
	// A name its directory does not list is no link either: most names
	// a search tries are in none of its directories, and the listing is
	// at hand.
	if !f.mayExist(host) {
		return ""
	}
	if st, err := os.Lstat(host); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		return ""
	}
	if f.root != "" {
		// Absolute targets resolve inside the root; the host cannot tell.
		return "a symbolic link that resolves to no file in the root (a loop, or a link to nothing)"
	}
	if _, err := os.Stat(host); errors.Is(err, syscall.ELOOP) {
		return "a symbolic link loop (too many levels of symbolic links)"
	}
	return "a symbolic link to nothing"
}

// realPath resolves every symlink of a host path. Under a root, a path
// inside the root is resolved inside it, as in a chroot (rootfs.Root.Local).
func (f *rootFS) realPath(host string) (string, bool) {
	if f.root != "" {
		if guest := f.guestPath(host); guest != host {
			// Where nothing is there, a path that names nothing either:
			// never the textual path, whose links the kernel would follow
			// out of the root.
			return f.r.Local(guest), true
		}
	}
	real, err := filepath.EvalSymlinks(host)
	return real, err == nil
}

// inRoot resolves guest inside the root with chroot semantics.
func (f *rootFS) inRoot(guest string) (string, bool) {
	resolved, err := f.r.Walk(guest, f.mayExist)
	if err != nil {
		return "", false
	}
	host := f.root + resolved
	if _, err := os.Lstat(host); err != nil {
		return "", false
	}
	return host, true
}

// mayExist answers from the cached listing of the parent directory whether
// a host path can exist. It errs on the side of "maybe".
func (f *rootFS) mayExist(host string) bool {
	if hasDotDot(host) {
		// The kernel takes ".." from wherever a symlink before it led;
		// the listings cannot answer for such a path ("." and ".." are in
		// none of them, either).
		return true
	}
	dir, name := path.Split(host)
	if name == "" || name == "." {
		return true
	}
	l := f.listing(path.Clean(dir))
	if !l.exists {
		return false
	}
	if l.names == nil {
		return true
	}
	return l.names[name]
}

// hasDotDot reports whether a path has a ".." component.
func hasDotDot(p string) bool {
	for i := 0; i+1 < len(p); i++ {
		if p[i] == '.' && p[i+1] == '.' && (i == 0 || p[i-1] == '/') && (i+2 == len(p) || p[i+2] == '/') {
			return true
		}
	}
	return false
}

// listing is the listing of a host directory, from the cache.
func (f *rootFS) listing(hostDir string) *dirListing {
	// Workers that start together ask for the same directories (the
	// system's library directory first): one lists, the others wait.
	return f.dirs.Get(hostDir, func() *dirListing { return listDir(hostDir) })
}

// listDir lists a host directory for the cache.
func listDir(hostDir string) *dirListing {
	l := &dirListing{}
	names, err := readDirNames(hostDir)
	switch {
	case err == nil:
		l.exists = true
		l.names = make(map[string]bool, len(names))
		for _, n := range names {
			l.names[n] = true
		}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
	default:
		// Unreadable (EACCES) but maybe present: let open decide.
		if st, serr := os.Stat(hostDir); serr == nil && st.IsDir() {
			l.exists = true
		}
	}
	return l
}

// consulted lists the host paths whose state answers the loader gave
// depend on: every directory it listed (a file added to or removed from it
// changes it), every path it stat'ed.
func (f *rootFS) consulted() []string {
	var out []string
	f.dirs.Keys(func(dir string) bool {
		out = append(out, dir)
		return true
	})
	f.stats.m.Range(func(k, _ any) bool {
		out = append(out, k.(string))
		return true
	})
	for _, o := range f.mounted() {
		out = append(out, o.wheel)
	}
	return out
}

// readDirNames lists a directory's names, unsorted, with plain system
// calls (see readFile: os.Open costs five more per directory).
func readDirNames(dir string) ([]string, error) {
	fd, err := eintr.Retry(func() (int, error) {
		return syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(fd)
	var names []string
	buf := make([]byte, 8<<10)
	for {
		n, err := eintr.Retry(func() (int, error) { return syscall.ReadDirent(fd, buf) })
		if err != nil {
			return names, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names)
	}
}

// isDir reports whether a guest path is a directory.
func (f *rootFS) isDir(guest string) bool {
	if _, _, isDir, ok := f.lookupOverlay(guest); ok {
		return isDir
	}
	host, ok := f.resolve(guest)
	if !ok {
		return false
	}
	return f.stat(host).dir
}

// stat answers os.Stat for a host path from the cached listing of its
// directory and a cache of earlier answers: a scan asks about the same
// directories and candidates for every object it loads. Like the listings,
// the answers assume the tree does not change during a scan.
func (f *rootFS) stat(host string) statResult {
	if r, ok := f.stats.load(host); ok {
		return r
	}
	var r statResult
	if f.mayExist(host) {
		if st, err := os.Stat(host); err == nil {
			r = statResult{exists: true, dir: st.IsDir()}
		}
	}
	f.stats.store(host, r)
	return r
}

// dirExists reports whether the directory of a search path exists (guest).
func (f *rootFS) dirExists(guestDir string) bool {
	d := strings.TrimSuffix(guestDir, "/")
	if d == "" {
		if guestDir == "/" {
			return true
		}
		return true // the working directory
	}
	return f.isDir(d)
}

// readFile reads a small configuration file of the root (ld.so.cache,
// ld.so.preload) through rootfs: a root may be an untrusted container
// image, so only a regular file of at most limit bytes is read (a FIFO
// would block, a device or a sparse file would never end), and its links
// stay inside the root. The error for a missing file wraps fs.ErrNotExist.
func (f *rootFS) readFile(guest string, limit int64) ([]byte, error) {
	data, err := f.r.ReadFile(guest, limit)
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
		// ld.so's open fails as for an absent file, and it goes on
		// without the file.
		return nil, fmt.Errorf("%w (%w)", fs.ErrNotExist, err)
	}
	return data, err
}

func (f *rootFS) cleanUnderMount(guest string) string {
	overlays := f.mounted()
	if len(overlays) == 0 || !path.IsAbs(guest) {
		return guest
	}
	clean := path.Clean(guest)
	for _, o := range overlays {
		if clean == o.mount || strings.HasPrefix(clean, o.mount+"/") {
			return clean
		}
	}
	return guest
}
