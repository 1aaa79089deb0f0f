package scan

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/dirent"
	"github.com/cudadeps/cudadeps/internal/eintr"
	"github.com/cudadeps/cudadeps/internal/freelist"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"golang.org/x/sys/unix"
)

// walkDir lists the loadable ELF objects of a tree. Several workers list
// directories and examine files at once, a directory's files in batches,
// each file opened relative to its directory (no path walk) and read only
// when it starts with the ELF magic. A Python environment is mostly other
// files, and opening them was most of the cost of a scan: only the files
// the candidate rule names are opened (all of them with all set; see
// candidate.go). The objects come out in the order a sorted depth-first
// walk meets them. host is where dir is on this machine (dir itself but
// under a root, through an absolute link); the objects keep dir's name.
// found is told of each object as soon as it is read.
func walkDir(ctx context.Context, l *ldso.Loader, dir, host string, parallel int, all bool, rep *Report, found func(string)) ([]string, error) {
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	w := &walker{ctx: ctx, l: l, all: all, found: found, name: func(p string) string { return p }, bufs: freelist.List[*[]byte]{Max: maxListBuffers}}
	if host != dir {
		w.name = func(p string) string { return dir + strings.TrimPrefix(p, host) }
	}
	w.cond = sync.NewCond(&w.mu)
	// A root that is a symlink to a directory is walked through the link:
	// the paths keep the link's name, as the loader would see them.
	w.push(walkTask{list: host})
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.work()
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return w.results(rep), nil
}

// walker is the shared state of one walk's workers.
type walker struct {
	ctx  context.Context
	l    *ldso.Loader
	name func(host string) string // the name a host path is reported by
	all  bool                     // read every regular file, not only candidates
	// found is told of each loadable object as it is read.
	found func(path string)

	mu     sync.Mutex
	cond   *sync.Cond
	tasks  []walkTask
	active int // tasks taken and not finished
	files  []walkFile

	// bufs are the buffers directories are listed with, one per worker
	// at a time (thousands of directories, each listed once).
	bufs freelist.List[*[]byte]
}

// maxListBuffers bounds the buffers directories are listed with
// (getdents) kept from one listing to the next: one per worker at a time.
const maxListBuffers = 64

// listBuffer is a buffer of at least size bytes to list a directory with,
// one of bufs when it keeps one large enough; give it back with Put.
func listBuffer(bufs *freelist.List[*[]byte], size int) *[]byte {
	if b, ok := bufs.Get(); ok && len(*b) >= size {
		return b
	}
	b := make([]byte, size)
	return &b
}

// walkTask is a directory to list, or a batch of its files to examine.
type walkTask struct {
	list  string // host path of a directory to list
	dir   *openDir
	files []dirFile
}

// dirFile is a regular file of a directory and what its name says of it.
type dirFile struct {
	name string
	how  candidacy
}

// openDir is a directory held open while batches of its files are examined.
type openDir struct {
	path string
	fd   int
	left atomic.Int32 // batches not yet done
}

// walkFile is an ELF file or a directory that could not be listed.
type walkFile struct {
	path string // as reported
	id   [2]uint64
	in   *elfscan.Info
	err  error
	// walkErr is a directory the walk could not list.
	walkErr error
}

// batch is how many files of a directory one task examines.
const batch = 64

func (w *walker) push(t walkTask) {
	w.mu.Lock()
	w.tasks = append(w.tasks, t)
	w.mu.Unlock()
	w.cond.Signal()
}

// work runs tasks until there are none left and none running.
func (w *walker) work() {
	for {
		w.mu.Lock()
		for len(w.tasks) == 0 && w.active > 0 {
			w.cond.Wait()
		}
		if len(w.tasks) == 0 {
			w.mu.Unlock()
			w.cond.Broadcast()
			return
		}
		t := w.tasks[len(w.tasks)-1]
		w.tasks = w.tasks[:len(w.tasks)-1]
		w.active++
		w.mu.Unlock()

		if w.ctx.Err() == nil {
			if t.list != "" {
				w.list(t.list)
			} else {
				w.examine(t.dir, t.files)
			}
		} else if t.dir != nil && t.dir.left.Add(-1) == 0 {
			syscall.Close(t.dir.fd)
		}

		w.mu.Lock()
		w.active--
		done := w.active == 0 && len(w.tasks) == 0
		w.mu.Unlock()
		if done {
			w.cond.Broadcast()
		}
	}
}

func (w *walker) add(f walkFile) {
	w.mu.Lock()
	w.files = append(w.files, f)
	w.mu.Unlock()
	if f.walkErr == nil && f.err == nil && f.in != nil && notLoadable(f.in) == "" && w.found != nil {
		w.found(f.path)
	}
}

// list reads a directory: its subdirectories become tasks, its regular
// files batches of tasks.
func (w *walker) list(path string) {
	fd, err := eintr.Retry(func() (int, error) {
		return syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		w.add(walkFile{path: w.name(path), walkErr: &fs.PathError{Op: "open", Path: path, Err: err}})
		return
	}
	files, err := w.entries(fd, path)
	if err != nil {
		w.add(walkFile{path: w.name(path), walkErr: &fs.PathError{Op: "readdirent", Path: path, Err: err}})
	}
	if len(files) == 0 {
		syscall.Close(fd)
		return
	}
	d := &openDir{path: path, fd: fd}
	d.left.Store(int32((len(files) + batch - 1) / batch))
	for i := 0; i < len(files); i += batch {
		w.push(walkTask{dir: d, files: files[i:min(i+batch, len(files))]})
	}
}

// entries reads the directory open as fd: subdirectories are pushed as
// tasks, the regular files worth reading returned. Symlinks are other
// names of files the walk meets anyway (or of files outside the tree); the
// walk does not follow them.
func (w *walker) entries(fd int, path string) ([]dirFile, error) {
	var files []dirFile
	buf := listBuffer(&w.bufs, 16<<10)
	defer w.bufs.Put(buf)
	err := dirent.Each(fd, *buf, func(name []byte, typ byte) error {
		how := readFile
		if !w.all {
			// Decided before the name is copied: most files end here.
			if how = candidate(string(name)); how == skipFile && typ == syscall.DT_REG {
				return nil
			}
		}
		var mode uint32
		if typ == syscall.DT_UNKNOWN {
			// Some file systems never record the type.
			typ, mode = typeAt(fd, string(name))
			if how == readIfExecutable && typ == syscall.DT_REG {
				how = executable(mode)
			}
		}
		switch typ {
		case syscall.DT_DIR:
			if w.all || !skipDir(string(name)) {
				w.push(walkTask{list: filepath.Join(path, string(name))})
			}
		case syscall.DT_REG:
			if how != skipFile {
				files = append(files, dirFile{name: string(name), how: how})
			}
		}
		return nil
	})
	return files, err
}

// typeAt is the type (DT_*) and mode of the entry name of the directory
// open as dirfd, asked of the file system, links not followed.
func typeAt(dirfd int, name string) (byte, uint32) {
	var st unix.Stat_t
	if _, err := eintr.Retry(func() (int, error) {
		return 0, unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}); err != nil {
		return syscall.DT_UNKNOWN, 0
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return syscall.DT_DIR, st.Mode
	case syscall.S_IFREG:
		return syscall.DT_REG, st.Mode
	}
	return syscall.DT_UNKNOWN, st.Mode
}

// executable is readFile for a mode with an execute bit, else skipFile.
func executable(mode uint32) candidacy {
	if mode&0o111 != 0 {
		return readFile
	}
	return skipFile
}

// examine reads the ELF files among files, files of d.
func (w *walker) examine(d *openDir, files []dirFile) {
	defer func() {
		if d.left.Add(-1) == 0 {
			syscall.Close(d.fd)
		}
	}()
	for _, df := range files {
		if w.ctx.Err() != nil {
			return
		}
		if df.how == readIfExecutable {
			if typ, mode := typeAt(d.fd, df.name); typ != syscall.DT_REG || executable(mode) == skipFile {
				continue
			}
		}
		if f, ok := w.examineFile(d, df.name); ok {
			w.add(f)
		}
	}
}

// examineFile reads one file if it starts with the ELF magic; ok is false
// for anything else and for a file gone since the listing. Opening it
// costs three system calls where a full read costs six.
func (w *walker) examineFile(d *openDir, name string) (walkFile, bool) {
	fd, err := eintr.Retry(func() (int, error) {
		return syscall.Openat(d.fd, name, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return walkFile{}, false
		}
		p := w.name(filepath.Join(d.path, name))
		return walkFile{path: p, err: &fs.PathError{Op: "open", Path: p, Err: err}}, true
	}
	defer syscall.Close(fd)
	var magic [4]byte
	if n, err := eintr.Retry(func() (int, error) { return syscall.Pread(fd, magic[:], 0) }); err != nil || n < 4 || string(magic[:]) != "\x7fELF" {
		return walkFile{}, false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Size < 64 {
		return walkFile{}, false
	}
	f := walkFile{path: w.name(filepath.Join(d.path, name)), id: [2]uint64{uint64(st.Dev), uint64(st.Ino)}}
	// Read through the loader's cache: the closure of a root then starts
	// from what was read here instead of reading the file again.
	f.in, f.err = w.l.InfoFD(f.path, fd, &st)
	var fe *elfscan.FormatError
	if errors.As(f.err, &fe) && fe.Path != f.path {
		// The loader names files by absolute path; the report names the
		// file as the walk found it.
		named := *fe
		named.Path = f.path
		f.err = &named
	}
	return f, true
}

// results puts what the walk found in walk order and keeps the loadable
// objects, each file once (another name of a file met before is left
// out), recording the others on rep.
func (w *walker) results(rep *Report) []string {
	slices.SortFunc(w.files, func(a, b walkFile) int { return comparePaths(a.path, b.path) })
	var out []string
	seen := map[[2]uint64]bool{}
	for _, f := range w.files {
		if f.walkErr != nil {
			rep.Errors = append(rep.Errors, FileError{Path: f.path, Error: f.walkErr.Error()})
			continue
		}
		if f.id != ([2]uint64{}) {
			if seen[f.id] {
				continue
			}
			seen[f.id] = true
		}
		if classify(f.path, f.in, f.err, rep) {
			out = append(out, f.path)
		}
	}
	return out
}

// comparePaths orders paths as a depth-first walk that lists each
// directory sorted meets them: component by component.
func comparePaths(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] == b[i] {
			continue
		}
		switch {
		case a[i] == '/':
			return -1
		case b[i] == '/':
			return 1
		case a[i] < b[i]:
			return -1
		}
		return 1
	}
	return len(a) - len(b)
}
