package scan

import (
	"cmp"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime/trace"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/internal/memo"
	"github.com/cudadeps/cudadeps/internal/workers"
	"github.com/cudadeps/cudadeps/loader/bind"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/runtimeopen"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// Import says how a root that belongs to an installed Python distribution
// was loaded: as importing its package loads it (docs/python-imports.md).
type Import struct {
	Distribution string `json:"distribution"` // "torchvision 0.26.0"
	// Python is the interpreter whose process it was loaded into; empty
	// when none was known (an empty program of its kind stood in).
	Python string `json:"python,omitempty"`
	// After are the files opened before it, in order: the extension
	// modules of the distributions its own requires, what frameworks load
	// by path while their packages are imported, and, for a library that
	// is no extension module, its own package's extension modules.
	After []string `json:"after"`
	// Alone is what loading it on its own gives (as the main program, or
	// an extension module into a bare interpreter) when that fails; nil
	// when it loads on its own too, or when that was not tried.
	Alone *Alone `json:"alone,omitempty"`
	// OnlyInImport marks a root that loads in its import and fails on its
	// own: it is no failure (libtorch_nvshmem.so binds symbols of
	// libc10_cuda.so, which torch loads first).
	OnlyInImport bool `json:"only_in_import,omitempty"`
}

// Alone counts what fails when a root is loaded on its own.
type Alone struct {
	MissingLibraries []string `json:"missing_libraries"`
	UndefinedSymbols int      `json:"undefined_symbols"`
	VersionErrors    int      `json:"version_errors"`
}

// String says it in words: "2 undefined symbols, 1 missing library
// (libc10.so)".
func (a *Alone) String() string {
	var parts []string
	if n := a.UndefinedSymbols; n > 0 {
		parts = append(parts, fmt.Sprintf("%d undefined symbol%s", n, pluralS(n)))
	}
	if n := len(a.MissingLibraries); n > 0 {
		parts = append(parts, fmt.Sprintf("%d missing librar%s (%s)", n, map[bool]string{true: "y", false: "ies"}[n == 1], strings.Join(firstOf(a.MissingLibraries, 3), ", ")))
	}
	if n := a.VersionErrors; n > 0 {
		parts = append(parts, fmt.Sprintf("%d symbol version error%s", n, pluralS(n)))
	}
	return strings.Join(parts, ", ")
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func firstOf(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	return append(slices.Clone(list[:n-1]), fmt.Sprintf("%s and %d more", list[n-1], len(list)-n))
}

// aloneOf summarises a root loaded on its own, nil when it loads.
func aloneOf(r *Root) *Alone {
	if r.OK {
		return nil
	}
	a := &Alone{MissingLibraries: []string{}, UndefinedSymbols: len(r.UndefinedSymbols), VersionErrors: len(r.VersionErrors)}
	for _, m := range r.Missing {
		if !slices.Contains(a.MissingLibraries, m.Soname) {
			a.MissingLibraries = append(a.MissingLibraries, m.Soname)
		}
	}
	return a
}

// Importer loads the files of one Python environment's installed
// distributions as importing their packages loads them: into the
// interpreter's process, after the extension modules of the distributions
// the file's own requires (transitively, each after those it requires),
// after what the frameworks' own loaders load by path while their packages
// are imported (a fallback when a library of theirs does not load, or
// preloads), and, for a library that is no extension module, after its
// own package's extension modules. It is safe for concurrent use.
type Importer struct {
	l      *ldso.Loader
	env    *pyenv.Env
	dists  map[string]*pyenv.Dist // env's, as NewImporter read them
	owners *pyenv.Owners
	opts   ImportOptions
	// orders resolves each distribution's requirements once for every
	// import order they are part of; ordersErr when it cannot be made.
	orders    *pyenv.ImportOrders
	ordersErr error

	// Each is computed once, however many roots ask at the same time.
	python  memo.Map[struct{}, started]
	bases   memo.Map[baseKey, built]
	pkgs    memo.Map[*pyenv.Dist, *pkgLoads]
	order   memo.Map[*pyenv.Dist, importOrder]
	missing memo.Map[string, string] // by the files loaded before and the library
	modules memo.Map[string, bool]   // IsExtensionModule, by file
}

// isModule is (once per file) IsExtensionModule: a library named NAME.so
// is looked up for PyInit_NAME, and a scan asks of each file several times.
func (im *Importer) isModule(file string) bool {
	return im.modules.Get(file, func() bool { return IsExtensionModule(im.l, file) })
}

type importOrder struct {
	dists []*pyenv.Dist
	err   error
}

// ImportOptions configure an Importer.
type ImportOptions struct {
	// Python is the interpreter program whose process files are loaded
	// into; empty: an empty program of each file's kind.
	Python string
	// RuntimeOpens resolves what the frameworks load by path and what the
	// objects open at run time; nil leaves both out.
	RuntimeOpens *runtimeopen.Resolver
	// Symbols binds every reference of what each file loads.
	Symbols bool
	// Binder is shared by the roots of a scan; nil: a fresh one.
	Binder *bind.Binder
	// LeaveOutClosures leaves Root.Closure nil (Options.LeaveOutClosures).
	LeaveOutClosures bool
}

// NewImporter prepares the imports of env's distributions.
func NewImporter(l *ldso.Loader, env *pyenv.Env, opts ImportOptions) *Importer {
	dists, _ := env.Installed()
	if opts.Binder == nil {
		opts.Binder = bind.New()
	}
	if opts.RuntimeOpens != nil {
		dirs := make([]string, len(env.SiteDirs))
		for i, d := range env.SiteDirs {
			dirs[i] = l.GuestPath(d)
		}
		user := ""
		if env.UserSiteEnabled && env.UserSite != "" {
			user = l.GuestPath(env.UserSite)
		}
		opts.RuntimeOpens = opts.RuntimeOpens.WithSites(runtimeopen.Sites{Dirs: dirs, User: user})
	}
	orders, err := env.ImportOrders(dists)
	return &Importer{l: l, env: env, dists: dists, owners: pyenv.NewOwners(dists), opts: opts, orders: orders, ordersErr: err}
}

// Owner is the installed distribution whose RECORD lists file (a path as
// the loader names it), or nil.
func (im *Importer) Owner(file string) *pyenv.Dist {
	return im.owners.Owner(im.l.HostPath(file))
}

// ImportAll imports each file into a process of its own (several at once;
// parallel bounds them, GOMAXPROCS when 0), in the order given: a file
// that cannot be loaded into the process is a FileError; one of no
// installed distribution is loaded as if it had no requirements.
func (im *Importer) ImportAll(ctx context.Context, files []string, parallel int) ([]*Root, []FileError, error) {
	type result struct {
		root    *Root
		fileErr *FileError
		err     error
	}
	results := make([]result, len(files))
	workers.Each(len(files), parallel, func(i int) {
		if ctx.Err() != nil {
			return
		}
		r, err := im.Import(ctx, files[i])
		var fe *unloadable
		if errors.As(err, &fe) {
			results[i] = result{fileErr: &fe.FileError}
		} else {
			results[i] = result{root: r, err: err}
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	var roots []*Root
	var errs []FileError
	for _, r := range results {
		switch {
		case r.err != nil:
			return nil, nil, r.err
		case r.fileErr != nil:
			errs = append(errs, *r.fileErr)
		default:
			roots = append(roots, r.root)
		}
	}
	return roots, errs, nil
}

// unloadable is a file that cannot be loaded into the process.
type unloadable struct{ FileError }

func (e *unloadable) Error() string { return e.Path + ": " + e.FileError.Error }

// Import loads file the way importing its package does and reports it: its
// closure in that process, what its objects open at run time, and (with
// symbols) the references that would not bind. A file that cannot be
// loaded into the process is an error that ImportAll reports as a
// FileError.
func (im *Importer) Import(ctx context.Context, file string) (*Root, error) {
	r, err := im.importAttached(ctx, file)
	if err == nil {
		if !im.opts.LeaveOutClosures {
			withClosure(r)
		}
		detach(r)
	}
	return r, err
}

// importAttached is Import with the answer still naming the objects of
// the process it was loaded in (Root.attached): a scan that reports no
// tree of the file lets that process go without copying what it names.
func (im *Importer) importAttached(ctx context.Context, file string) (*Root, error) {
	if program(im.l, file) {
		return im.run(ctx, file)
	}
	d := im.Owner(file)
	module := d != nil && im.isModule(file)
	b, err := im.base(ctx, file, d, module)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The base is shared by every file of d loaded after the same
	// imports: each loads into a fork of its own.
	p := b.p.Fork()
	// After is the base's own list, complete and never appended to again:
	// the hundreds of roots loaded after the same imports share it.
	info := &Import{Distribution: b.dist, Python: b.python, After: slices.Clip(b.after)}
	o, err := p.Dlopen(ctx, file)
	if err != nil {
		return nil, &unloadable{FileError{Path: file, Error: err.Error()}}
	}
	r := im.newRoot(p.Reach(o))
	r.Import = info
	if im.opts.RuntimeOpens != nil {
		AddRuntimeOpens(ctx, im.opts.RuntimeOpens, p, r)
	}
	if im.opts.Symbols {
		// The base's objects are the fork's own (shared, see ldso.Fork).
		misses, err := im.opts.Binder.Dlopened(ctx, p, o, b.globals...)
		switch {
		case errors.Is(err, bind.ErrUnreadable):
			notBound(r, err)
		case err != nil:
			return nil, err
		default:
			if b.python != "" {
				r.BoundIn = b.python
			}
			setUndefined(r, misses)
		}
	}
	r.attached = true
	return r, nil
}

// detach lets the process r was loaded in go: r keeps copies of the
// objects it names (see ldso.Result.Detached).
func detach(r *Root) {
	if !r.attached {
		return
	}
	r.attached = false
	res, link := r.Result.Detached()
	r.Result = res
	for i, m := range r.RuntimeMisses {
		r.RuntimeMisses[i] = m.Relinked(link)
	}
}

// Prepare loads, several at once (parallel bounds them, GOMAXPROCS when
// 0), the processes the files of the environment's distributions under
// dir (a host path) are loaded into: the imports that come first are then
// loaded while other work goes on, not when the first file waits for
// them.
func (im *Importer) Prepare(ctx context.Context, dir string, parallel int) {
	dists := im.dists
	type first struct {
		d      *pyenv.Dist
		file   string
		module bool
	}
	region := trace.StartRegion(ctx, "scan.prepare")
	names := slices.Sorted(maps.Keys(dists))
	// The first file of each kind of each distribution (an extension
	// module, a library), the distributions side by side.
	firsts := make([][2]string, len(names))
	prefix := dir + "/"
	workers.Each(len(names), parallel, func(i int) {
		module, library := &firsts[i][0], &firsts[i][1]
		for _, host := range dists[names[i]].Files {
			if (*module != "" && *library != "") || ctx.Err() != nil {
				break
			}
			if !strings.HasPrefix(host, prefix) {
				continue
			}
			f := im.l.GuestPath(host)
			if !loadable(im.l, f) || program(im.l, f) {
				continue
			}
			if im.isModule(f) {
				*module = cmp.Or(*module, f)
			} else {
				*library = cmp.Or(*library, f)
			}
		}
	})
	var todo []first
	for i, name := range names {
		if module := firsts[i][0]; module != "" {
			todo = append(todo, first{dists[name], module, true})
		}
		if library := firsts[i][1]; library != "" {
			todo = append(todo, first{dists[name], library, false})
		}
	}
	region.End()
	workers.Each(len(todo), parallel, func(i int) {
		if ctx.Err() == nil {
			_, _ = im.base(ctx, todo[i].file, todo[i].d, todo[i].module)
		}
	})
}

// importBase is the process a file of a distribution is loaded into,
// loaded up to the file itself: the interpreter (or an empty program of
// the file's kind), then the imports that come first. It is never loaded
// into again; files load into forks of it.
type importBase struct {
	p       *ldso.Process
	python  string
	dist    string         // "torch 2.11.0"; empty for a file of no distribution
	after   []string       // the files opened, in order (Import.After)
	globals []*ldso.Object // those opened with RTLD_GLOBAL
}

type built struct {
	b   *importBase
	err error
}

type baseKey struct {
	dist   *pyenv.Dist
	module bool
	kind   string // the empty program's kind when there is no interpreter
}

// base is (once per distribution, kind of file, and program) the process
// file is loaded into: after the extension modules of the distributions
// d requires (each after those it requires), and d's own package: what
// its framework loads by path first, and its extension modules unless
// file is one of them.
func (im *Importer) base(ctx context.Context, file string, d *pyenv.Dist, module bool) (*importBase, error) {
	py, err := im.interpreter(ctx)
	if err != nil {
		return nil, err
	}
	key, err := im.baseKey(file, d, module, py)
	if err != nil {
		return nil, err
	}
	got := im.bases.Get(key, func() built {
		defer trace.StartRegion(ctx, "scan.importBase").End()
		if d != nil && trace.IsEnabled() {
			trace.Log(ctx, "distribution", fmt.Sprintf("%s module=%v", d.Name, module))
		}
		b := &importBase{after: []string{}}
		p, python, err := im.process(ctx, file)
		if err != nil {
			return built{err: err}
		}
		b.p, b.python = p, python
		if d == nil {
			return built{b: b}
		}
		b.dist = d.Name + " " + d.Version
		order, err := im.importOrder(d)
		if err != nil {
			return built{err: err}
		}
		for _, dep := range order {
			b.globals = append(b.globals, im.importPackage(ctx, b.p, dep, true, &b.after)...)
		}
		b.globals = append(b.globals, im.importPackage(ctx, b.p, d, !module, &b.after)...)
		return built{b: b}
	})
	return got.b, got.err
}

// baseKey is the key of the process file is loaded into: its
// distribution, whether it is an extension module, and, with no
// interpreter (py nil), the kind of program that stands in for one.
func (im *Importer) baseKey(file string, d *pyenv.Dist, module bool, py *ldso.Process) (baseKey, error) {
	key := baseKey{dist: d, module: module}
	if py == nil {
		in, err := im.l.Info(file)
		if err != nil {
			return key, &unloadable{FileError{Path: file, Error: err.Error()}}
		}
		key.kind = fmt.Sprintf("%d/%d/%d/%#x", in.Class, in.Data, in.Machine, in.Flags)
	}
	return key, nil
}

// Ready reports whether Import(file) would start at once, without waiting
// for the process it loads file into to be loaded: a scan's worker then
// imports another file meanwhile.
func (im *Importer) Ready(file string) bool {
	if program(im.l, file) {
		return true
	}
	var py *ldso.Process
	if im.opts.Python != "" {
		got, ok := im.python.Ready(struct{}{})
		if !ok {
			return false
		}
		if got.err != nil {
			return true // Import fails at once
		}
		py = got.p
	}
	d := im.Owner(file)
	key, err := im.baseKey(file, d, d != nil && im.isModule(file), py)
	if err != nil {
		return true
	}
	_, ok := im.bases.Ready(key)
	return ok
}

// newRoot is res in report form, its closure's entries made now only
// when run-time opens will add to the process before it is reported and
// closures are wanted (withClosure makes them later otherwise).
func (im *Importer) newRoot(res *ldso.Result) *Root {
	r := newRoot(res)
	if im.opts.RuntimeOpens != nil && !im.opts.LeaveOutClosures {
		r.Closure = closureOf(res)
	}
	return r
}

// run is what running a program of a distribution loads (torch/bin/protoc):
// no import loads it.
func (im *Importer) run(ctx context.Context, file string) (*Root, error) {
	p, err := im.l.Start(ctx, file, ldso.AsListed)
	if err != nil {
		return nil, &unloadable{FileError{Path: file, Error: err.Error()}}
	}
	r := im.newRoot(p.Result())
	if im.opts.RuntimeOpens != nil {
		AddRuntimeOpens(ctx, im.opts.RuntimeOpens, p, r)
	}
	if im.opts.Symbols {
		misses, err := im.opts.Binder.Closure(ctx, r.Result)
		switch {
		case errors.Is(err, bind.ErrUnreadable):
			notBound(r, err)
		case err != nil:
			return nil, err
		default:
			setUndefined(r, misses)
		}
	}
	return r, nil
}

// program reports an executable (ET_EXEC, or a position-independent
// executable): the kernel runs it, no import loads it.
func program(l *ldso.Loader, file string) bool {
	in, err := l.Info(file)
	return err == nil && (in.Type == elf.ET_EXEC || in.Flags1&elf.DF_1_PIE != 0)
}

// importPackage loads into p what importing d's package loads: what its
// framework loads by path first, then (with modules) its extension
// modules, each recorded in after. It returns the objects opened with
// RTLD_GLOBAL. What another package's import misses is its own business:
// a failed load is left as the loader leaves it.
func (im *Importer) importPackage(ctx context.Context, p *ldso.Process, d *pyenv.Dist, modules bool, after *[]string) []*ldso.Object {
	pl := im.loads(ctx, d)
	var globals []*ldso.Object
	open := func(f string) *ldso.Object {
		if slices.Contains(*after, f) {
			return nil
		}
		o, err := p.Dlopen(ctx, f)
		if err != nil {
			return nil
		}
		*after = append(*after, f)
		return o
	}
	for _, lib := range pl.fallbacks {
		// The framework loads lib itself; when the loader misses one of
		// the libraries its fallback names, it loads those by path from
		// where it looks, then lib again.
		if missing := im.missingAfter(ctx, *after, lib); missing != "" {
			if files, ok := im.opts.RuntimeOpens.Fallback(lib, missing); ok {
				for _, f := range files {
					open(f)
				}
			}
		}
		// torch loads it with RTLD_GLOBAL.
		if o := open(lib); o != nil {
			globals = append(globals, o)
		}
	}
	for _, f := range pl.preloads {
		open(f)
	}
	if modules {
		for _, f := range pl.modules {
			open(f)
		}
	}
	return globals
}

// missingAfter is the first name the loader does not find when lib is
// loaded into the interpreter's process after the files of after: the name
// a framework's error message carries. A fresh process replays them, so
// that the process of the import is left as the framework leaves it.
func (im *Importer) missingAfter(ctx context.Context, after []string, lib string) string {
	key := strings.Join(append(slices.Clone(after), lib), "\x00")
	return im.missing.Get(key, func() string {
		p, _, err := im.process(ctx, lib)
		if err != nil {
			return ""
		}
		for _, f := range after {
			_, _ = p.Dlopen(ctx, f)
		}
		if o, err := p.Dlopen(ctx, lib); err == nil {
			if miss := p.Reach(o).Missing; len(miss) > 0 {
				return miss[0].Name
			}
		}
		return ""
	})
}

// pkgLoads are what importing one distribution's package loads by itself.
type pkgLoads struct {
	fallbacks []string // libraries the framework loads itself, with a fallback
	preloads  []string // libraries the framework loads by path first
	modules   []string // its extension modules
}

// loads reads (once) what importing d's package loads.
func (im *Importer) loads(ctx context.Context, d *pyenv.Dist) *pkgLoads {
	return im.pkgs.Get(d, func() *pkgLoads {
		pl := &pkgLoads{}
		rt := im.opts.RuntimeOpens
		for _, host := range d.Files {
			if ctx.Err() != nil {
				break
			}
			f := im.l.GuestPath(host)
			if !loadable(im.l, f) {
				continue
			}
			if rt != nil {
				if rt.HasFallback(f) {
					pl.fallbacks = append(pl.fallbacks, f)
				}
				for _, lib := range rt.Preloads(f) {
					if !slices.Contains(pl.preloads, lib) {
						pl.preloads = append(pl.preloads, lib)
					}
				}
			}
			if im.isModule(f) {
				pl.modules = append(pl.modules, f)
			}
		}
		return pl
	})
}

// importOrder is (once) what d requires, in import order.
func (im *Importer) importOrder(d *pyenv.Dist) ([]*pyenv.Dist, error) {
	o := im.order.Get(d, func() importOrder {
		if im.ordersErr != nil {
			return importOrder{nil, im.ordersErr}
		}
		dists, err := im.orders.Of(d)
		return importOrder{dists, err}
	})
	return o.dists, o.err
}

// process is a fresh process for file: the interpreter's, or, without
// one, an empty program of file's kind; and the interpreter's path.
func (im *Importer) process(ctx context.Context, file string) (*ldso.Process, string, error) {
	py, err := im.interpreter(ctx)
	if err != nil {
		return nil, "", err
	}
	if py != nil {
		return py.Fork(), im.opts.Python, nil
	}
	in, err := im.l.Info(file)
	if err != nil {
		return nil, "", &unloadable{FileError{Path: file, Error: err.Error()}}
	}
	return im.l.StartEmpty(ctx, in), "", nil
}

// interpreter is (once) the interpreter's process with nothing imported
// yet, to be forked; nil when none was named, or it is statically linked
// (python-build-standalone has no link map to speak of: an empty program
// stands in for it).
func (im *Importer) interpreter(ctx context.Context) (*ldso.Process, error) {
	if im.opts.Python == "" {
		return nil, nil
	}
	got := im.python.Get(struct{}{}, func() started {
		p, err := im.l.Start(ctx, im.opts.Python, ldso.AsExecuted)
		switch {
		case errors.Is(err, ldso.ErrStaticallyLinked):
			return started{}
		case err != nil:
			return started{err: fmt.Errorf("interpreter %s: %w", im.opts.Python, err)}
		}
		return started{p: p}
	})
	return got.p, got.err
}

type started struct {
	p   *ldso.Process
	err error
}

// loadable reports a file that the loader can load: a dynamic ELF object
// (Python wheels name every shared object *.so*).
func loadable(l *ldso.Loader, file string) bool {
	if !strings.Contains(filepath.Base(file), ".so") {
		return false
	}
	in, err := l.Info(file)
	return err == nil && notLoadable(in) == ""
}

// LoadableFiles are the loadable ELF objects among files (a distribution's
// RECORD).
func LoadableFiles(l *ldso.Loader, files []string) []string {
	// Read side by side: torch's RECORD names a hundred objects, each
	// opened and read, and the loads that follow find them read.
	ok := make([]bool, len(files))
	workers.Each(len(files), 0, func(i int) { ok[i] = loadable(l, files[i]) })
	var out []string
	for i, f := range files {
		if ok[i] {
			out = append(out, f)
		}
	}
	return out
}

// ReadAhead reads the dynamic facts of the ELF objects among files
// side by side, so that the loads that follow find them read.
func ReadAhead(l *ldso.Loader, files []string) {
	workers.Each(len(files), 0, func(i int) { loadable(l, files[i]) })
}

// HasABITag reports the file name of an extension module built for an
// interpreter: NAME.cpython-312-x86_64-linux-gnu.so, NAME.abi3.so,
// NAME.pypy310-pp73-x86_64-linux-gnu.so.
func HasABITag(base string) bool {
	return strings.HasSuffix(base, ".so") && (strings.Contains(base, ".cpython-") || strings.Contains(base, ".abi3.") || strings.Contains(base, ".pypy"))
}

// IsExtensionModule reports a Python extension module: a file whose name
// the interpreter imports modules from (NAME.so, NAME.TAG.so) and that
// either carries an interpreter's ABI tag or defines PyInit_NAME
// (torchvision/_C.so); libraries are named lib*.so*.
func IsExtensionModule(l *ldso.Loader, file string) bool {
	base := filepath.Base(file)
	name, ok := moduleName(base)
	if !ok {
		return false
	}
	if HasABITag(base) {
		return true
	}
	f, done, err := l.OpenObject(l.HostPath(file))
	if err != nil {
		return false
	}
	defer done()
	defs, err := f.Lookup("PyInit_" + name)
	return err == nil && len(defs) > 0
}
