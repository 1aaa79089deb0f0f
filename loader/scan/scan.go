// Package scan finds the ELF objects of files, directories and wheels and runs the loader model over each of them.
package scan

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/trace"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cudadeps/cudadeps/internal/eintr"
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/freelist"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/bind"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/gpuarch"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/runtimeopen"
	"github.com/cudadeps/cudadeps/platform"
)

// Options configure a scan.
type Options struct {
	// WheelMount is where wheels are mounted (ldso.DefaultWheelMount when
	// empty); naming a real site-packages directory checks a wheel against
	// what is installed there.
	WheelMount string
	// Parallel bounds the closures computed at once (GOMAXPROCS when 0).
	Parallel int
	Logger   *slog.Logger
	// RuntimeOpens resolves what the objects open at run time (dlopen) with
	// this resolver; nil skips it.
	RuntimeOpens *runtimeopen.Resolver
	// Symbols binds every reference of every closure (see bindRoots).
	Symbols bool
	// AllFiles reads every regular file of a directory as a possible
	// object, not only those the candidate rule names (a name with ".so",
	// or an execute bit; see candidate.go).
	AllFiles bool
	// Python is the interpreter extension modules are bound in (default:
	// their environment's).
	Python string
	// DefaultPython names the interpreter that python3 on PATH runs
	// (through a shim, maybe), taken last, when an extension module's own
	// installation has none; nil: none. It is asked only when the scan
	// meets a Python environment, and at most once: finding the program
	// behind a shim runs the shim.
	DefaultPython func(context.Context) string
	// Cache keeps, from one scan to the next, what Python and
	// DefaultPython say of their site directories and, with Symbols, what
	// binding answered, by the stamps of the files it read (bind.Kept): a
	// warm scan of files unchanged since reads no symbol table. The zero
	// Dir keeps nothing: every answer is computed.
	Cache factcache.Dir
	// ResultsOfFailuresOnly keeps Root.Result, the loader's answer with its
	// objects, only for the roots that do not load and for the first root
	// done: what the scan command prints without --all, so that a scan of
	// an environment does not hold the answers of the hundreds that load.
	ResultsOfFailuresOnly bool
	// began is when the scan is taken to have begun (zero: now): files
	// changed within factcache.SettleMargin before it have no answers
	// kept. Tests move it past the files they write.
	began time.Time
	// LeaveOutClosures leaves Root.Closure nil: a renderer that draws trees
	// from Root.Result (the scan command's text) reads no copy of each
	// root's closure.
	LeaveOutClosures bool
}

func (o Options) defaultPython(ctx context.Context) string {
	if o.DefaultPython == nil {
		return ""
	}
	return o.DefaultPython(ctx)
}

// Report is the outcome of a scan. Its JSON form is documented in
// docs/json.md ("scan --json").
type Report struct {
	Loader        LoaderInfo     `json:"loader"`
	Roots         []*Root        `json:"roots"`
	Missing       []Missing      `json:"missing"`
	VersionErrors []VersionError `json:"version_errors"`
	Skipped       []Skipped      `json:"skipped,omitempty"`
	Errors        []FileError    `json:"errors,omitempty"`
	Warnings      []string       `json:"warnings,omitempty"`
	// Coverage is what the GPU code of the loaded objects does on a device;
	// absent unless asked for (see LoadedFiles).
	Coverage *gpuarch.Report `json:"coverage,omitempty"`
}

// LoaderInfo records the loader model the scan used.
type LoaderInfo struct {
	Root          string   `json:"root"`
	Cache         string   `json:"cache"`
	LDLibraryPath *string  `json:"ld_library_path"`
	Preload       []string `json:"preload,omitempty"`
}

// Root is one object examined as the loader's main object.
type Root struct {
	Path          string         `json:"path"`
	Machine       string         `json:"machine"`
	Class         string         `json:"class"`
	OK            bool           `json:"ok"`
	Closure       []Entry        `json:"closure"`
	Missing       []Missing      `json:"missing"`
	VersionErrors []VersionError `json:"version_errors"`
	Warnings      []string       `json:"warnings,omitempty"`
	// RuntimeOpens are the libraries its objects open at run time; absent
	// when they were not resolved.
	RuntimeOpens []RuntimeOpen `json:"runtime_opens,omitempty"`
	// UndefinedSymbols are the references that would not bind; nil when
	// symbols were not bound (Options.Symbols off, or SymbolsNotBound).
	UndefinedSymbols []UndefinedSymbol `json:"undefined_symbols"`
	// SymbolsNotBound says why the references of a scan that binds
	// symbols were not bound for this root: an object of its scope has
	// no file here to read (a wheel's member, a file removed since).
	SymbolsNotBound string `json:"symbols_not_bound,omitempty"`
	BoundIn         string `json:"bound_in,omitempty"` // the interpreter an extension module was bound in
	// Import says how a file of an installed Python distribution was
	// loaded: as importing its package loads it, and what loading it on
	// its own gives. Absent for other files.
	Import *Import `json:"import,omitempty"`

	// Result is the loader model's full answer, for renderers.
	Result *ldso.Result `json:"-"`
	// RuntimeMisses are the required run-time opens not found, in the
	// loader's terms (who asked, which directories were searched), like
	// Result.Missing.
	RuntimeMisses []ldso.Miss `json:"-"`
	// attached is set while Result names the objects of a process shared
	// with nothing else but still whole (an import's fork): detach copies
	// what it names and lets the process go.
	attached bool
}

// Entry is one object of a closure, in load order.
type Entry struct {
	Soname   string   `json:"soname"` // the name it was requested by
	Path     *string  `json:"path"`   // null when not found
	Via      ldso.Via `json:"via"`
	From     string   `json:"from,omitempty"` // the search list entry that found it
	NeededBy []string `json:"needed_by"`
	Problem  string   `json:"problem,omitempty"`
}

// Missing is a name the loader would not find.
type Missing struct {
	Soname   string   `json:"soname"`
	NeededBy []string `json:"needed_by"`
	Problem  string   `json:"problem,omitempty"`
	// Fatal marks a file the loader refuses outright (invalid ELF).
	Fatal bool `json:"fatal,omitempty"`
	// RunTime marks a library opened at run time (dlopen), not needed at
	// load time: NeededBy are its openers.
	RunTime bool `json:"run_time,omitempty"`
}

// VersionError is a required symbol version that its provider lacks.
type VersionError struct {
	Object   string `json:"object"`   // the object requiring it
	File     string `json:"file"`     // the file it is required from (as named)
	Provider string `json:"provider"` // the object that answered to that name
	Version  string `json:"version"`
	Weak     bool   `json:"weak,omitempty"`
	// Message is what ld.so prints.
	Message string `json:"message"`
}

// Skipped is a file named as a target that is not a loadable dynamic
// object: an ELF file that is not one, or (NotELF) no ELF file at all.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	NotELF bool   `json:"not_elf,omitempty"`
}

// FileError is a file that could not be read as ELF.
type FileError struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// OK reports whether every root loads.
func (r *Report) OK() bool {
	for _, root := range r.Roots {
		if !root.OK {
			return false
		}
	}
	return true
}

// Run scans the targets: ELF files, directories (recursively) and wheels.
func Run(ctx context.Context, l *ldso.Loader, targets []string, opts Options) (*Report, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	rep := &Report{}
	l.PrepareHost(ctx)
	binder := bind.NewWithPages(l.Pages()) // a file's symbols are read once for every step
	kept := keptAnswers(l, targets, opts)
	if kept != nil {
		binder.Keeping(kept)
	}
	envs := &environments{l: l, opts: opts, binder: binder, dirBufs: freelist.List[*[]byte]{Max: maxListBuffers}}
	var prefetch sync.WaitGroup
	defer prefetch.Wait()
	for _, t := range targets {
		prefetch.Add(1)
		go func() {
			defer prefetch.Done()
			envs.prefetch(ctx, t)
		}()
	}
	q := newRootQueue(envs.importReady, 4*examiners(opts))
	w := startExamining(ctx, l, binder, envs, q, opts)
	var roots []string
	region := trace.StartRegion(ctx, "scan.collect")
	for _, t := range targets {
		found, err := collect(ctx, l, t, opts, rep, q.add)
		if err != nil {
			region.End()
			q.close()
			w.wait()
			return nil, err
		}
		roots = append(roots, found...)
	}
	region.End()
	opts.Logger.Debug("collected objects", "roots", len(roots))
	// A file met by two names was examined under both; the walk keeps the
	// first (results below). A root no walk handed out is added now.
	for _, r := range roots {
		q.add(r)
	}
	q.close()
	region = trace.StartRegion(ctx, "scan.roots")
	results := w.wait()
	region.End()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, path := range roots {
		switch res := results[path]; {
		case res.fatal != nil:
			return nil, res.fatal
		case res.err != nil:
			rep.Errors = append(rep.Errors, FileError{Path: path, Error: res.err.Error()})
		default:
			rep.Roots = append(rep.Roots, res.root)
		}
	}
	rep.aggregate()
	if kept != nil {
		recalled, computed, unkept := kept.Counts()
		opts.Logger.Debug("binding answers", "kept", recalled, "computed", computed, "too_recent_to_keep", unkept)
		if err := kept.Save(); err != nil {
			// Only the next scan's time depends on it.
			opts.Logger.Debug("binding answers not kept", "error", err)
		}
	}
	return rep, nil
}

// keptAnswers is what earlier scans of targets kept of their binding
// answers, nil when nothing is bound or kept. One file per machine
// (LoadKept), root, interpreter and targets: a scan of one tree does not
// push out another's answers (Kept.Save writes only one run's).
func keptAnswers(l *ldso.Loader, targets []string, opts Options) *bind.Kept {
	if !opts.Symbols || opts.Cache.Path() == "" {
		return nil
	}
	key := []string{"scan", l.Root(), opts.Python}
	for _, t := range targets {
		if abs, err := filepath.Abs(t); err == nil {
			t = abs
		}
		key = append(key, t)
	}
	began := opts.began
	if began.IsZero() {
		began = time.Now()
	}
	return bind.LoadKept(opts.Cache, began, key...)
}

// examining is the workers of a scan that examine its roots.
type examining struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	results map[string]closureResult // by path
	roots   int                      // results that are roots (not errors)
}

// wait waits for the workers to finish and gives their results.
func (w *examining) wait() map[string]closureResult {
	w.wg.Wait()
	return w.results
}

// examiners is how many workers take roots: Parallel, or one per
// processor.
func examiners(opts Options) int {
	if opts.Parallel > 0 {
		return opts.Parallel
	}
	return runtime.GOMAXPROCS(0)
}

// startExamining starts the workers that take the roots of q. Each root
// goes through every step in one worker (its closure, its symbols, its
// import) as soon as the walk finds it: a long one (libtorch_cuda.so's
// symbols) holds up no step of the others, and an import whose process is
// not loaded yet waits while the worker takes other roots (rootQueue).
func startExamining(ctx context.Context, l *ldso.Loader, binder *bind.Binder, envs *environments, q *rootQueue, opts Options) *examining {
	w := &examining{results: map[string]closureResult{}}
	var interps interpreters
	for range examiners(opts) {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				j, ok := q.next()
				if !ok {
					return
				}
				if ctx.Err() != nil {
					continue
				}
				var res closureResult
				if j.alone == nil {
					if res = examine(ctx, l, binder, &interps, j.path, opts); res.root != nil && !envs.importReady(j.path) {
						q.wait(&rootJob{path: j.path, alone: res.root})
						continue
					}
					j.alone = res.root
				}
				if j.alone != nil {
					root, err := envs.importRoot(ctx, j.alone)
					res = closureResult{root: root, fatal: err}
				}
				w.keep(j.path, res, opts)
			}
		}()
	}
	return w
}

// keep records the result of a root.
func (w *examining) keep(path string, res closureResult, opts Options) {
	r := res.root
	w.mu.Lock()
	first := w.roots == 0
	if r != nil {
		w.roots++
	}
	w.mu.Unlock()
	if r != nil {
		if !opts.LeaveOutClosures {
			withClosure(r)
		}
		// The first root keeps its answer: it is printed when it is the
		// only one. Another that loads is printed by no renderer that
		// asked for ResultsOfFailuresOnly.
		if r.OK && opts.ResultsOfFailuresOnly && !first {
			r.Result, r.RuntimeMisses, r.attached = nil, nil, false
		}
		detach(r)
	}
	w.mu.Lock()
	w.results[path] = res
	w.mu.Unlock()
}

// foreignToRoot warns, under a root, about an object whose machine the
// root has no loader for (an x86_64 file scanned against an aarch64
// sysroot): its closure is then a model of no system the object runs on.
func foreignToRoot(l *ldso.Loader, r *ldso.Result) string {
	root := l.Root()
	if root == "" || root == "/" || r.Arch == nil || r.Arch.Interp == "" || r.Main == nil || r.Main.Info == nil {
		return ""
	}
	if _, err := os.Lstat(filepath.Join(root, r.Arch.Interp)); err == nil {
		return ""
	}
	m := platform.MachineName(r.Main.Info.Machine)
	return fmt.Sprintf("%s is an %s object, and --root %s has no %s loader (%s): it is not a system this object runs on", r.Main.Path, m, root, m, r.Arch.Interp)
}

// collect lists the loadable ELF objects of one target; found is told of
// each as soon as it is known (of a directory's, maybe more than it
// lists: a file met by two names).
func collect(ctx context.Context, l *ldso.Loader, target string, opts Options, rep *Report, found func(string)) ([]string, error) {
	// Under --root, links on the way resolve inside the root.
	host := l.OpenPath(target)
	st, err := os.Stat(host)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", target, errors.Unwrap(err))
	}
	if st.IsDir() {
		return walkDir(ctx, l, target, host, opts.Parallel, opts.AllFiles, rep, found)
	}
	if strings.HasSuffix(target, ".whl") || strings.HasSuffix(target, ".zip") {
		members, err := l.MountWheel(host, opts.WheelMount)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, m := range members {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			in, err := l.Info(m)
			if classify(m, in, err, rep) {
				out = append(out, m)
			}
		}
		return out, nil
	}
	in, err := elfscan.ReadInfo(host)
	if errors.Is(err, elfscan.ErrNotELF) {
		// A file named on the command line that the loader would never
		// load (a linker script such as libc.so) is noted, not fatal.
		rep.Skipped = append(rep.Skipped, Skipped{Path: target, Reason: notELF(target), NotELF: true})
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if reason := notLoadable(in); reason != "" {
		rep.Skipped = append(rep.Skipped, Skipped{Path: target, Reason: reason})
		return nil, nil
	}
	return []string{target}, nil
}

// hasELFMagic reports whether a file starts with the ELF magic. Most files
// of a Python environment are not ELF: this costs them three system calls
// (no poller registration, no stat) where a full read costs six.
func hasELFMagic(p string) (bool, error) {
	fd, err := eintr.Retry(func() (int, error) { return syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0) })
	if err != nil {
		return false, err
	}
	defer syscall.Close(fd)
	var b [4]byte
	n, err := eintr.Retry(func() (int, error) { return syscall.Pread(fd, b[:], 0) })
	if err != nil {
		return false, err
	}
	return n == len(b) && string(b[:]) == elf.ELFMAG, nil
}

// classify decides whether a file is a root, recording why not.
func classify(p string, in *elfscan.Info, err error, rep *Report) bool {
	if errors.Is(err, elfscan.ErrNotELF) {
		return false
	}
	if err != nil {
		rep.Errors = append(rep.Errors, FileError{Path: p, Error: err.Error()})
		return false
	}
	if reason := notLoadable(in); reason != "" {
		rep.Skipped = append(rep.Skipped, Skipped{Path: p, Reason: reason})
		return false
	}
	return true
}

func notLoadable(in *elfscan.Info) string {
	switch {
	case in.Type != elf.ET_DYN && in.Type != elf.ET_EXEC:
		return fmt.Sprintf("%s object, not loadable", strings.TrimPrefix(in.Type.String(), "ET_"))
	case !in.Dynamic && in.Type == elf.ET_EXEC:
		return "statically linked"
	case !in.Dynamic:
		return "no dynamic section (separate debug information, or a static object)"
	}
	return ""
}

type closureResult struct {
	root  *Root
	err   error // the file cannot be loaded: a FileError
	fatal error // the scan cannot go on
}

// examine is what a scan says of one root loaded on its own: its closure
// and report form; with a resolver, its run-time opens (in the same
// process, after the closure); with symbols, the references that do not
// bind. For a file of an installed Python distribution, its import
// follows (environments.importRoot).
func examine(ctx context.Context, l *ldso.Loader, b *bind.Binder, is *interpreters, file string, opts Options) closureResult {
	p, err := l.Start(ctx, file, ldso.AsListed)
	if err != nil {
		return closureResult{err: err}
	}
	// The closure is read before the run-time opens add to the process: a
	// copy, since Result is the process's own.
	r := *p.Result()
	root := newRoot(&r)
	if opts.RuntimeOpens != nil && !opts.LeaveOutClosures {
		// Its entries now: the run-time opens add to the objects'
		// NeededBy. Without them, they are made only if this answer is
		// the one reported (withClosure).
		root.Closure = closureOf(&r)
	}
	if opts.RuntimeOpens != nil {
		runtimeOpens(ctx, opts.RuntimeOpens, p, r.Objects, root)
	}
	if w := foreignToRoot(l, root.Result); w != "" {
		root.Warnings = append(root.Warnings, w)
	}
	if opts.Symbols {
		if err := bindRoot(ctx, l, b, is, root, opts); err != nil {
			return closureResult{fatal: err}
		}
	}
	return closureResult{root: root}
}

// NewRoot converts a loader result to its report form.
func NewRoot(r *ldso.Result) *Root {
	root := newRoot(r)
	root.Closure = closureOf(r)
	return root
}

// newRoot is NewRoot without the closure's entries, for an answer that
// may be replaced before it is reported (a root's own load, when its
// import answers for it); withClosure completes it.
func newRoot(r *ldso.Result) *Root {
	root := &Root{Path: r.Main.Path, Result: r, Missing: []Missing{}, VersionErrors: []VersionError{}, Warnings: r.Warnings}
	if in := r.Main.Info; in != nil {
		root.Machine = strings.TrimPrefix(in.Machine.String(), "EM_")
		root.Class = strings.TrimPrefix(in.Class.String(), "ELFCLASS")
	}
	for _, m := range r.Missing {
		mm := Missing{Soname: m.Name, Problem: m.Problem, Fatal: m.Fatal, NeededBy: []string{}}
		for _, by := range m.NeededBy {
			mm.NeededBy = uniq.Append(mm.NeededBy, by.Path)
		}
		root.Missing = append(root.Missing, mm)
	}
	for _, v := range r.VersionErrors {
		root.VersionErrors = append(root.VersionErrors, NewVersionError(v))
	}
	root.OK = r.OK()
	return root
}

// withClosure is root with the entries of its closure, made if newRoot
// left them out. They must be made before run-time opens add to the
// process, when the root's Result is the process's own.
func withClosure(root *Root) *Root {
	if root.Closure == nil {
		root.Closure = closureOf(root.Result)
	}
	return root
}

// closureOf lists the objects of a loader result, in load order, the
// main object left out; a name not found is listed once.
func closureOf(r *ldso.Result) []Entry {
	closure := make([]Entry, 0, len(r.Objects))
	paths := make([]string, 0, len(r.Objects)) // copies: an entry keeps no object of the process
	faked := map[string]int{}
	for _, o := range r.Objects {
		if o == r.Main {
			continue
		}
		if !o.Found() {
			if i, ok := faked[o.Name]; ok {
				for _, by := range r.NeededBy(o) {
					closure[i].NeededBy = uniq.Append(closure[i].NeededBy, by.Path)
				}
				continue
			}
			faked[o.Name] = len(closure)
		}
		e := Entry{Soname: o.Name, Via: o.Via, From: o.From, Problem: o.Problem, NeededBy: make([]string, 0, len(r.NeededBy(o)))}
		if o.Found() {
			paths = append(paths, o.Path)
			e.Path = &paths[len(paths)-1]
		}
		for _, by := range r.NeededBy(o) {
			e.NeededBy = uniq.Append(e.NeededBy, by.Path)
		}
		closure = append(closure, e)
	}
	return closure
}

// NewVersionError converts a loader version error, with ld.so's message.
func NewVersionError(v ldso.VersionError) VersionError {
	weak := ""
	if v.Weak {
		weak = "weak "
	}
	return VersionError{
		Object: v.Object.Path, File: v.File, Provider: v.Provider.Path, Version: v.Version, Weak: v.Weak,
		Message: fmt.Sprintf("%s: %sversion '%s' not found (required by %s)", v.Provider.Path, weak, v.Version, v.Object.Path),
	}
}

// NewReport builds a report from roots computed elsewhere (the resolver's
// per-import processes).
func NewReport(roots []*Root) *Report {
	r := &Report{Roots: roots}
	r.aggregate()
	return r
}

// aggregate merges the misses and version errors of all roots.
func (r *Report) aggregate() {
	r.Missing = []Missing{}
	r.VersionErrors = []VersionError{}
	idx := map[string]int{}
	seenV := map[string]bool{}
	for _, root := range r.Roots {
		for _, m := range root.Missing {
			i, ok := idx[m.Soname]
			if !ok {
				i = len(r.Missing)
				idx[m.Soname] = i
				r.Missing = append(r.Missing, Missing{Soname: m.Soname, Problem: m.Problem, Fatal: m.Fatal, RunTime: m.RunTime, NeededBy: []string{}})
			}
			for _, by := range m.NeededBy {
				r.Missing[i].NeededBy = uniq.Append(r.Missing[i].NeededBy, by)
			}
			r.Missing[i].Fatal = r.Missing[i].Fatal || m.Fatal
			// Needed at load time by anyone: not only a run-time open.
			r.Missing[i].RunTime = r.Missing[i].RunTime && m.RunTime
			if r.Missing[i].Problem == "" {
				r.Missing[i].Problem = m.Problem
			}
		}
		for _, v := range root.VersionErrors {
			k := v.Object + "\x00" + v.Provider + "\x00" + v.Version
			if !seenV[k] {
				seenV[k] = true
				r.VersionErrors = append(r.VersionErrors, v)
			}
		}
		for _, w := range root.Warnings {
			r.Warnings = uniq.Append(r.Warnings, w)
		}
	}
	for i := range r.Missing {
		sort.Strings(r.Missing[i].NeededBy)
	}
	sort.Slice(r.Missing, func(i, j int) bool { return r.Missing[i].Soname < r.Missing[j].Soname })
}

func fileKey(info fs.FileInfo) ([2]uint64, bool) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return [2]uint64{uint64(st.Dev), uint64(st.Ino)}, true
	}
	return [2]uint64{}, false
}
