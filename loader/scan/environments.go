package scan

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime/trace"
	"slices"
	"strings"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/dirent"
	"github.com/cudadeps/cudadeps/internal/eintr"
	"github.com/cudadeps/cudadeps/internal/freelist"
	"github.com/cudadeps/cudadeps/internal/memo"
	"github.com/cudadeps/cudadeps/loader/bind"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// importRoot loads again, as importing its package does, a root that an
// installed Python distribution's RECORD lists, and returns that answer,
// with what loading it on its own gave (alone); any other root is
// returned as it is.
func (e *environments) importRoot(ctx context.Context, alone *Root) (*Root, error) {
	if program(e.l, alone.Path) {
		return alone, nil // run, not imported: its own answer stands
	}
	im := e.importer(ctx, alone.Path)
	if im == nil {
		return alone, nil
	}
	r, err := im.importAttached(ctx, alone.Path) // detached when kept (examining.keep)
	if ue := (*unloadable)(nil); errors.As(err, &ue) {
		return alone, nil // it does not load into the interpreter: its own answer stands
	}
	if err != nil {
		return nil, err
	}
	r.Import.Alone = aloneOf(alone)
	r.Import.OnlyInImport = r.OK && r.Import.Alone != nil
	for _, w := range alone.Warnings {
		if !slices.Contains(r.Warnings, w) {
			r.Warnings = append(r.Warnings, w)
		}
	}
	return r, nil
}

// importReady reports whether importRoot would answer for file at once:
// its environment is read and the process it is imported into loaded (or
// it has none).
func (e *environments) importReady(file string) bool {
	if program(e.l, file) {
		return true
	}
	ready := true
	e.sitesFrom(filepath.Dir(e.l.HostPath(file)), func(site string) bool {
		im, ok := e.sites.Ready(site)
		switch {
		case !ok:
			ready = false
		case im != nil && im.Owner(file) != nil:
			ready = im.Ready(file)
		default:
			return true
		}
		return false
	})
	return ready
}

// environments finds the Python environment each file belongs to: the
// site directory above it whose installed distributions' RECORDs list it.
// An environment is taken from an interpreter only when that interpreter
// was named (--python) or is the one python3 runs: a scan never runs a
// program of the tree it reads. Otherwise the site directory alone
// describes it, and the interpreter program of its installation (read,
// not run) is the process files are loaded into.
type environments struct {
	l      *ldso.Loader
	opts   Options
	binder *bind.Binder

	// Each is computed once, however many roots ask at the same time.
	sites   memo.Map[string, *Importer]  // by site directory (host path); nil: none there
	hasInfo memo.Map[string, bool]       // directories holding a *.dist-info
	pythons memo.Map[string, *pyenv.Env] // what each interpreter asked says; nil: failed

	// dirBufs are the buffers distInfoIn lists directories with: it is
	// asked of hundreds of directories.
	dirBufs freelist.List[*[]byte]
}

// importer is the Importer of the environment whose distributions own
// file, or nil.
func (e *environments) importer(ctx context.Context, file string) *Importer {
	var found *Importer
	e.sitesFrom(filepath.Dir(e.l.HostPath(file)), func(site string) bool {
		if im := e.at(ctx, site); im != nil && im.Owner(file) != nil {
			found = im
			return false
		}
		return true
	})
	return found
}

// prefetch reads the environments of the site directories at and above
// target (a file or directory scanned), and loads the processes their
// files under target are imported into, so that this is done while the
// scan collects and examines files instead of when its first import
// waits for it.
func (e *environments) prefetch(ctx context.Context, target string) {
	host := e.l.OpenPath(target)
	if st, err := os.Stat(host); err != nil || !st.IsDir() {
		host = filepath.Dir(host)
	}
	e.sitesFrom(host, func(site string) bool {
		if im := e.at(ctx, site); im != nil {
			im.Prepare(ctx, host, e.opts.Parallel)
		}
		return ctx.Err() == nil
	})
}

// sitesFrom calls fn with dir and each directory above it (inside the
// root) that holds a *.dist-info directory, nearest first, until fn
// returns false.
func (e *environments) sitesFrom(dir string, fn func(site string) bool) {
	root := e.l.Root()
	for ; dir != "/" && dir != "." && (root == "" || strings.HasPrefix(dir, root+"/")); dir = filepath.Dir(dir) {
		if e.distInfoIn(dir) && !fn(dir) {
			return
		}
	}
}

// distInfoIn reports (once) whether dir holds a *.dist-info directory.
func (e *environments) distInfoIn(dir string) bool {
	return e.hasInfo.Get(dir, func() bool {
		// Asked of every directory a root lies in and of those above it:
		// read without sorting or a value per entry, and only until one
		// is found.
		fd, err := eintr.Retry(func() (int, error) {
			return syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		})
		if err != nil {
			return false
		}
		defer syscall.Close(fd)
		buf := listBuffer(&e.dirBufs, 8<<10)
		defer e.dirBufs.Put(buf)
		found := dirent.Each(fd, *buf, func(name []byte, typ byte) error {
			if !bytes.HasSuffix(name, []byte(".dist-info")) {
				return nil
			}
			if typ == syscall.DT_UNKNOWN {
				typ, _ = typeAt(fd, string(name))
			}
			if typ == syscall.DT_DIR {
				return errFound
			}
			return nil
		})
		return found == errFound
	})
}

// errFound stops a directory's reading at what was looked for.
var errFound = errors.New("found")

// at is (once) the Importer of the environment of site.
func (e *environments) at(ctx context.Context, site string) *Importer {
	return e.sites.Get(site, func() *Importer { return e.load(ctx, site) })
}

func (e *environments) load(ctx context.Context, site string) *Importer {
	defer trace.StartRegion(ctx, "scan.environment").End()
	iopts := ImportOptions{RuntimeOpens: e.opts.RuntimeOpens, Symbols: e.opts.Symbols, Binder: e.binder, LeaveOutClosures: e.opts.LeaveOutClosures}
	if e.l.Root() == "" {
		// --python, then python3 on PATH, asked only if --python's
		// environment is not site's.
		for i := range 2 {
			py := e.opts.Python
			if i == 1 {
				py = e.opts.defaultPython(ctx)
			}
			if env := e.python(ctx, py); env != nil && holds(env.SiteDirs, site) {
				env.ObjectsOnly = true
				iopts.Python = env.Executable
				if !env.FromPython || !isProgram(e.l, env.Executable) {
					iopts.Python = py
				}
				return NewImporter(e.l, env, iopts)
			}
		}
	}
	env, err := pyenv.FromSiteDir(site, e.l.Root())
	if err != nil {
		e.opts.Logger.Debug("no Python environment", "site", site, "error", err)
		return nil
	}
	env.ObjectsOnly = true // the scan asks whose each object is, never a digest
	iopts.Python = pythonOf(ctx, e.l, e.l.GuestPath(site), e.opts)
	return NewImporter(e.l, env, iopts)
}

// python is (once) the environment an interpreter reports; nil when it
// cannot say.
func (e *environments) python(ctx context.Context, py string) *pyenv.Env {
	if py == "" {
		return nil
	}
	return e.pythons.Get(py, func() *pyenv.Env {
		env, err := pyenv.DiscoverCached(ctx, py, e.opts.Cache)
		if err != nil {
			e.opts.Logger.Debug("interpreter not asked", "python", py, "error", err)
			return nil
		}
		return env
	})
}

// holds reports whether dirs name dir (links resolved).
func holds(dirs []string, dir string) bool {
	want := dir
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		want = r
	}
	for _, d := range dirs {
		if d == dir {
			return true
		}
		if r, err := filepath.EvalSymlinks(d); err == nil && r == want {
			return true
		}
	}
	return false
}
