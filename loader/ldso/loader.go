// Package ldso answers, as glibc's ld.so would, where each needed soname of an object is found, and why.
//
// The rules are those of glibc 2.28 and later, applied in the order of
// _dl_map_object: a name with a slash is a path; otherwise DT_RPATH of the
// needing object and of every object above it in the load chain (only when
// the needing object has no DT_RUNPATH), LD_LIBRARY_PATH, the needing
// object's own DT_RUNPATH, /etc/ld.so.cache, then the default directories
// (the last two skipped under DF_1_NODEFLIB, the cache only for entries in
// default directories). Each search directory is tried with its
// glibc-hwcaps (and, before glibc 2.37, legacy hwcaps) subdirectories first.
// Candidates of another class or machine are skipped; a file that is not a
// loadable ELF object stops the loader. Objects load breadth-first, and a
// name that matches an object already loaded (by the name it was loaded
// under or its DT_SONAME, or by being the same file) is satisfied by it;
// the main program and ld.so answer to their names only, never by file, so
// naming their files by path loads a second copy.
// Symbol version requirements are checked against the provider's
// definitions.
//
// The same code produces the answer and the explanation: every step of a
// search can be recorded, so `why` can never disagree with `scan`.
package ldso

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/eintr"
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/memo"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// Options configure a Loader.
type Options struct {
	// Root is a sysroot whose ld.so.cache, ld.so.preload and default
	// directories are used (an aarch64 tree on an x86_64 host, say). Empty
	// means this host.
	Root string
	// LDLibraryPath replaces $LD_LIBRARY_PATH when non-nil; an empty string
	// means none.
	LDLibraryPath *string
	// Preload replaces $LD_PRELOAD when PreloadSet is true.
	Preload    []string
	PreloadSet bool
	// NoPreloadFile ignores /etc/ld.so.preload.
	NoPreloadFile bool
	// LookupEnv reads the environment (os.LookupEnv when nil).
	LookupEnv func(string) (string, bool)
	// Arch overrides the calibration of the loader for objects of its
	// machine and class (tests, or a loader that cannot be asked).
	Arch *ArchConfig
	// NoProbe stops the loader from running the host's ld.so --help to
	// learn its configuration; the layout of the root is used instead.
	NoProbe bool
	// OnNew, when set, is called with every loader New makes with these
	// options: a caller that does not make the loader itself can still
	// ask it for its Inputs.
	OnNew func(*Loader)
}

// Loader models the dynamic loader of one system (the host or a root). It is
// safe for concurrent use; it caches what it reads, so one Loader should
// serve a whole scan.
type Loader struct {
	opts    Options
	fs      *rootFS
	cache   *Cache
	cacheEr error
	llp     string
	hasLLP  bool
	preload []string
	// preloadFileNames are the names of the root's /etc/ld.so.preload.
	preloadFileNames []string

	mu     sync.Mutex
	arches map[archKey]*archEntry
	byID   map[fileID]*fileInfo // file → read result, for files read without error

	infos memo.Map[string, *fileInfo] // host path → read result, each read once however many ask at once
	// notesToo makes each read of an object read its dlopen notes too.
	notesToo atomic.Bool
	memo     syncMap[string, *found] // search memo
	lists    syncMap[string, uint32] // search list → its number (listID)
	nextList atomic.Uint32
	hwdirs   syncMap[[2]string, bool] // search directory, hwcaps subdirectory → exists

	pages *elfscan.PagesPool // page buffers reused from file to file

	bases memo.Map[processKind, *processBase]
}

// archEntry is one calibration, made once: workers that meet a machine's
// first objects together wait for the one probe of its loader.
type archEntry struct {
	once sync.Once
	a    *ArchConfig
}

type archKey struct {
	m     elf.Machine
	c     elf.Class
	flags uint32
}

// fileInfo is what the loader learns from opening one file.
type fileInfo struct {
	info  *elfscan.Info
	err   error
	id    fileID
	stamp factcache.Stamp
	// notes are its dlopen notes, read with info when the loader was asked
	// to (ReadDlopenNotes); notesRead says they were.
	notes     []elfscan.DlopenNote
	notesRead bool
}

type fileID struct{ dev, ino uint64 }

// New prepares a loader model.
func New(ctx context.Context, opts Options) (*Loader, error) {
	fsys, err := newRootFS(opts.Root)
	if err != nil {
		return nil, err
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	l := &Loader{
		opts:   opts,
		fs:     fsys,
		arches: map[archKey]*archEntry{},
		byID:   map[fileID]*fileInfo{},
		pages:  elfscan.NewPagesPool(runtime.GOMAXPROCS(0)), // one per worker
	}
	if opts.LDLibraryPath != nil {
		l.llp, l.hasLLP = *opts.LDLibraryPath, true
	} else if v, ok := lookup("LD_LIBRARY_PATH"); ok {
		l.llp, l.hasLLP = v, true
	}
	// ld.so treats an empty LD_LIBRARY_PATH as unset (empty entries inside a
	// longer value are the working directory).
	if l.llp == "" {
		l.hasLLP = false
	}
	if opts.PreloadSet {
		l.preload = splitPreload(strings.Join(opts.Preload, " "), " :")
	} else {
		v, _ := lookup("LD_PRELOAD")
		l.preload = splitPreload(v, " :")
	}
	data, err := fsys.readFile("/etc/ld.so.cache", MaxCacheSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("root %s: %w", fsys.describe(), err)
	default:
		c, perr := ParseCache(data)
		if perr != nil {
			// ld.so ignores a cache it cannot read; we say so.
			l.cacheEr = fmt.Errorf("%s/etc/ld.so.cache: %w (the loader ignores it)", strings.TrimSuffix(fsys.root, "/"), perr)
		} else {
			c.Path = "/etc/ld.so.cache"
			l.cache = c
		}
	}
	if !opts.NoPreloadFile {
		data, err := fsys.readFile("/etc/ld.so.preload", maxPreloadSize)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("root %s: %w", fsys.describe(), err)
		default:
			l.preloadFileNames = parsePreloadFile(data)
		}
	}
	if opts.OnNew != nil {
		opts.OnNew(l)
	}
	return l, nil
}

// Inputs lists the files and directories of this machine whose state the
// loader's answers so far depend on: every directory it listed or
// searched (a library added to an earlier search directory changes it),
// every file it read or stat'ed, its configuration files and the dynamic
// loaders it asked about themselves. Unchanged, they give the same
// answers.
// Pages is the pool of page buffers the loader reads objects through, for
// other readers of the same files to share (bind.NewWithPages).
func (l *Loader) Pages() *elfscan.PagesPool { return l.pages }

// OpenObject opens the ELF file at host (a path of this machine) to be
// read through the loader's page buffers; done closes it and gives them
// back.
func (l *Loader) OpenObject(host string) (f *elfscan.File, done func(), err error) {
	f, err = elfscan.Open(host)
	if err != nil {
		return nil, nil, err
	}
	pages := l.pages.Get()
	f.UsePages(pages)
	return f, func() {
		f.Close()
		l.pages.Put(pages)
	}, nil
}

func (l *Loader) Inputs() []string {
	out := l.fs.consulted()
	l.infos.Keys(func(host string) bool {
		if wheel, _, ok := WheelMember(host); ok {
			host = wheel
		}
		out = append(out, host)
		return true
	})
	for _, guest := range []string{"/etc/ld.so.cache", "/etc/ld.so.preload"} {
		if host, ok := l.fs.resolve(guest); ok {
			out = append(out, host)
		}
	}
	l.mu.Lock()
	for _, e := range l.arches {
		if a := e.a; a != nil && a.Interp != "" {
			if host, ok := l.fs.resolve(a.Interp); ok {
				out = append(out, host)
			}
		}
	}
	l.mu.Unlock()
	return out
}

// IsFile reports whether a regular file (or a link to one) is at the host
// path, through the loader's cached directory listings: a question about a
// search directory costs nothing more, and the directory counts among
// the Inputs.
func (l *Loader) IsFile(host string) bool {
	st := l.fs.stat(host)
	return st.exists && !st.dir
}

// Glob lists, sorted, the names in the host directory dir that match
// pattern (path.Match), through the loader's cached directory listings;
// the directory counts among the Inputs.
func (l *Loader) Glob(dir, pattern string) []string {
	ls := l.fs.listing(path.Clean(dir))
	var out []string
	for n := range ls.names {
		if ok, _ := path.Match(pattern, n); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Cache returns the ld.so.cache the loader uses (nil when there is none) and
// the reason it was ignored, if it was.
func (l *Loader) Cache() (*Cache, error) { return l.cache, l.cacheEr }

// LDLibraryPath returns the LD_LIBRARY_PATH the model uses, and whether it
// is set at all.
func (l *Loader) LDLibraryPath() (string, bool) { return l.llp, l.hasLLP }

// Preload returns the LD_PRELOAD entries the model uses.
func (l *Loader) Preload() []string { return append([]string(nil), l.preload...) }

// HostPath maps a path the loader sees to this machine: under a root, a
// path whose leading directories exist inside the root is the root's, with
// its links resolved inside the root as in a chroot (rootfs.Root.Local:
// what is not there is appended as written, and never through a link out
// of the root); any other (a tree scanned from outside the root) is itself.
func (l *Loader) HostPath(guest string) string {
	root := l.fs.root
	if root == "" || !filepath.IsAbs(guest) || guest == root || strings.HasPrefix(guest, root+"/") {
		return guest
	}
	clean := path.Clean(guest)
	for p := path.Dir(clean); p != "/" && p != "."; p = path.Dir(p) {
		// Not from the listing cache: a placement asks about directories
		// it has just created.
		if _, err := l.fs.r.Walk(p, nil); err == nil {
			return l.fs.r.Local(clean)
		}
	}
	return guest
}

// Root returns the sysroot ("" for the host).
func (l *Loader) Root() string { return l.fs.root }

// GuestPath converts a path on this machine to the path the modelled loader
// would see.
func (l *Loader) GuestPath(host string) string { return l.fs.guestPath(host) }

// Arch returns the calibration used for objects of a machine and class.
func (l *Loader) Arch(ctx context.Context, m elf.Machine, c elf.Class, flags uint32) *ArchConfig {
	if m == elf.EM_ARM || m == elf.EM_RISCV {
		flags &= 0x406 // only the float-ABI bits change the loader
	} else {
		flags = 0
	}
	k := archKey{m, c, flags}
	l.mu.Lock()
	e, ok := l.arches[k]
	if !ok {
		e = &archEntry{}
		l.arches[k] = e
	}
	l.mu.Unlock()
	e.once.Do(func() {
		a := l.calibrate(ctx, m, c, flags)
		l.mu.Lock()
		e.a = a
		l.mu.Unlock()
	})
	return e.a
}

// PrepareHost starts calibrating, in the background, the loader of this
// host's own machine and word size, the one most objects a scan meets are
// for: asking the host's ld.so runs it twice, which then overlaps with
// listing the tree instead of holding up the first closure.
func (l *Loader) PrepareHost(ctx context.Context) {
	m := hostMachine()
	if l.fs.root != "" || l.opts.NoProbe || m == elf.EM_NONE || m == elf.EM_ARM || m == elf.EM_RISCV {
		return // the float ABI of the objects decides
	}
	c := elf.ELFCLASS64
	if strconv.IntSize == 32 {
		c = elf.ELFCLASS32
	}
	go l.Arch(ctx, m, c, 0)
}

func (l *Loader) calibrate(ctx context.Context, m elf.Machine, c elf.Class, flags uint32) *ArchConfig {
	if l.opts.Arch != nil && l.opts.Arch.Machine == m && l.opts.Arch.Class == c {
		return l.opts.Arch
	}
	base := archFromLayout(l.fs, m, c, flags)
	if l.fs.root == "" && !l.opts.NoProbe && m == hostMachine() && base.Interp != "" {
		if _, err := os.Stat(base.Interp); err == nil {
			if a, err := probeLoader(ctx, base.Interp, base); err == nil {
				a.GlibcVersion = base.GlibcVersion
				return a
			}
		}
	}
	return base
}

// splitPreload splits LD_PRELOAD at spaces and colons; empty entries are
// skipped, as ld.so does.
func splitPreload(s, seps string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(seps, r) })
}

// maxPreloadSize bounds /etc/ld.so.preload: it names a few libraries.
const maxPreloadSize = 1 << 20

// preloadFile returns the names /etc/ld.so.preload of the root preloads.
func (l *Loader) preloadFile() []string { return l.preloadFileNames }

// parsePreloadFile reads /etc/ld.so.preload exactly as ld.so does (dl_main
// in glibc's elf/rtld.c, unchanged from 2.17 to 2.42), quirks included:
//
//   - "#" comments are blanked up to the end of their line, but the search
//     for the next "#" restarts at the start of the file with the count of
//     bytes still to go, so it only reaches as far as the file's length
//     minus the offset where the last blanking stopped: a comment late in
//     the file after an earlier one may survive, its words preloaded;
//   - names are separated by spaces, tabs, newlines and colons;
//   - the text ends at the first NUL byte (it is handled as a C string),
//     except for a last name that the file does not terminate, which is
//     read up to the end of the file or a NUL within it.
//
// An empty file preloads nothing (ld.so does not map it).
func parsePreloadFile(data []byte) []string {
	size := len(data)
	if size == 0 {
		return nil
	}
	buf := append([]byte(nil), data...)
	rest := size
	for rest > 0 {
		c := bytes.IndexByte(buf[:rest], '#')
		if c < 0 {
			break
		}
		rest -= c
		for {
			buf[c] = ' '
			rest--
			if rest <= 0 {
				break
			}
			c++
			if buf[c] == '\n' {
				break
			}
		}
	}
	isSep := func(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == ':' }
	// problem is where an unterminated last name starts; -1 when the file
	// ends in a separator.
	problem := -1
	if !isSep(buf[size-1]) {
		problem = size
		for problem > 0 && !isSep(buf[problem-1]) {
			problem--
		}
		if problem > 0 {
			buf[problem-1] = 0
		}
	} else {
		buf[size-1] = 0
	}
	var names []string
	if problem != 0 {
		text := buf
		if i := bytes.IndexByte(text, 0); i >= 0 {
			text = text[:i]
		}
		names = strings.FieldsFunc(string(text), func(r rune) bool { return r < 0x80 && isSep(byte(r)) })
	}
	if problem >= 0 {
		last := buf[problem:]
		if i := bytes.IndexByte(last, 0); i >= 0 {
			last = last[:i]
		}
		names = append(names, string(last))
	}
	return names
}

// open reads a candidate file once per loader.
func (l *Loader) open(host string) *fileInfo {
	// Workers that start together open the same system libraries: one
	// reads, the others wait for it.
	return l.infos.Get(host, func() *fileInfo {
		fi, ok := l.openMember(host)
		if !ok {
			fi = l.readFile(host)
		}
		return l.keep(fi)
	})
}

// keep records a file read without error under its identity, for the
// other names it is met by.
func (l *Loader) keep(fi *fileInfo) *fileInfo {
	if fi.err == nil && fi.id != (fileID{}) {
		l.mu.Lock()
		if l.byID[fi.id] == nil {
			l.byID[fi.id] = fi
		}
		l.mu.Unlock()
	}
	return fi
}

// subdirExists reports whether the hwcaps subdirectory sub of a search
// directory exists. Every search tries every such subdirectory of every
// directory it searches, and they almost never exist.
func (l *Loader) subdirExists(dir, sub string) bool {
	k := [2]string{dir, sub}
	if ok, known := l.hwdirs.load(k); known {
		return ok
	}
	ok := l.fs.dirExists(dir + sub)
	l.hwdirs.store(k, ok)
	return ok
}

// readFile reads a file with plain system calls: os.Open offers every file
// to the runtime's network poller, which refuses regular files, at the cost
// of five more system calls per file (a scan opens thousands).
func (l *Loader) readFile(host string) *fileInfo {
	// O_NONBLOCK: a FIFO in an untrusted tree must not stop the scan.
	fd, err := eintr.Retry(func() (int, error) {
		return syscall.Open(host, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	})
	if err != nil {
		return &fileInfo{err: &fs.PathError{Op: "open", Path: host, Err: err}}
	}
	defer syscall.Close(fd)
	return l.readFD(host, fd, nil)
}

// InfoFD is Info for a file the caller opened as fd (a directory walk that
// opened it to look at its first bytes) and stat'ed as st (nil: not yet):
// the file is read from fd, not opened again. fd stays open.
func (l *Loader) InfoFD(file string, fd int, st *syscall.Stat_t) (*elfscan.Info, error) {
	_, host := l.locate(file)
	if host != absolute(file) {
		// Reached through a link of the root: the loader opens it there.
		return l.Info(file)
	}
	fi := l.infos.Get(host, func() *fileInfo { return l.keep(l.readFD(host, fd, st)) })
	return fi.info, fi.err
}

// readFD reads the file open as fd, met as host, stat'ed as st (nil: not
// yet).
func (l *Loader) readFD(host string, fd int, st *syscall.Stat_t) *fileInfo {
	if st == nil {
		st = new(syscall.Stat_t)
		if _, err := eintr.Retry(func() (int, error) { return 0, syscall.Fstat(fd, st) }); err != nil {
			return &fileInfo{err: &fs.PathError{Op: "stat", Path: host, Err: err}}
		}
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return &fileInfo{err: syscall.EISDIR}
	case syscall.S_IFREG:
	default:
		return &fileInfo{err: &elfscan.FormatError{Path: host, Msg: "not a regular file"}}
	}
	fi := &fileInfo{id: fileID{uint64(st.Dev), uint64(st.Ino)},
		stamp: factcache.StampOf(st)}
	// A file met under another name (/lib and /usr/lib on a merged-/usr
	// system, torch/lib/../../nvidia/... and the root nvidia/...) was read
	// already.
	l.mu.Lock()
	prev, seen := l.byID[fi.id]
	l.mu.Unlock()
	if seen {
		fi.info, fi.notes, fi.notesRead = prev.info, prev.notes, prev.notesRead
		return fi
	}
	pages := l.pages.Get()
	f := elfscan.NewFile(elfscan.FDReader(fd), st.Size, host)
	f.UsePages(pages)
	fi.info, fi.err = f.Info()
	if fi.err == nil && l.notesToo.Load() {
		var err error
		fi.notes, err = f.DlopenNotes()
		fi.notesRead = err == nil
	}
	l.pages.Put(pages)
	return fi
}

// ReadDlopenNotes makes the loader read the dlopen notes of every object
// it reads from now on, with its dynamic facts: whoever resolves run-time
// opens needs them of nearly every object, and a second opening of each
// file for them cost more than the notes.
func (l *Loader) ReadDlopenNotes() { l.notesToo.Store(true) }

// DlopenNotes gives the dlopen notes of the object at host when the loader
// read them with the object (ReadDlopenNotes); false when it did not.
func (l *Loader) DlopenNotes(host string) ([]elfscan.DlopenNote, bool) {
	fi, ok := l.infos.Ready(host)
	if !ok || fi == nil || !fi.notesRead {
		return nil, false
	}
	return fi.notes, true
}

// absolute makes a command-line path absolute the way the loader does for
// $ORIGIN: the working directory is prefixed, nothing is cleaned.
func absolute(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if strings.HasSuffix(wd, "/") {
		return wd + p
	}
	return wd + "/" + p
}
