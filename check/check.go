// Package check answers whether a target loads whole, within a time budget and from cache while nothing the answer depends on has changed: the question a job prologue asks on every job.
//
// The answer is the resolver's own analysis (resolver.Analyze, the dry run
// of resolve without the network), as a list of problems. It is kept in
// the cache (internal/factcache) with the stat of every file and directory
// the analysis read or searched, and given again while each of them stats
// the same: a no-op check of a healthy environment is then a few thousand
// stat calls.
package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/resolver"
)

// Options say what to check and how.
type Options struct {
	// Target is an installed distribution's name, a directory, an ELF
	// file or a wheel, as resolve takes it.
	Target string
	// Python and SiteDir find a distribution, as for resolve.
	Python, SiteDir string
	Loader          ldso.Options
	// Catalog loads the catalog, when the analysis has to run.
	Catalog func(context.Context) (*catalog.Catalog, error)
	// Prefix is the cudadeps prefix whose activation counts ("" for the
	// default one).
	Prefix string
	// Timeout bounds the whole check (no bound when 0).
	Timeout time.Duration
	// Cache keeps answers; the zero Dir keeps none.
	Cache factcache.Dir
	// Key are more things the answer depends on (the command line, the
	// settings in force); Inputs more files (config files, catalogs).
	Key    []string
	Inputs []string
	// Import, when set, is a command that imports a Python target in a new
	// process (python -c 'import torch'), run beside the analysis within
	// ImportTimeout (no bound of its own when 0). An answer with an import
	// is kept only when the import succeeded, with every file of the
	// target's distribution among its inputs: a failing import runs again
	// each time.
	Import        []string
	ImportTimeout time.Duration
	Logger        *slog.Logger
}

// Result is the answer.
type Result struct {
	// Target describes what was checked.
	Target   string             `json:"target"`
	OK       bool               `json:"ok"`
	Problems []resolver.Problem `json:"problems"`
	// Notes are what keeps nothing from loading whole but is worth
	// knowing (resolver.Analysis.Notes).
	Notes []string `json:"notes"`
	// Import is what Options.Import did; nil when it was not asked for.
	Import *Import `json:"import,omitempty"`
	// Cached is set when nothing the answer depends on changed since it
	// was last computed.
	Cached bool `json:"cached"`
}

// Import is the outcome of importing the target in a new process.
type Import struct {
	Command string `json:"command"`
	OK      bool   `json:"ok"`
	// TimedOut says the import did not finish within its bound.
	TimedOut bool `json:"timed_out,omitempty"`
	// LastLine is the last line of its output when it failed (a Python
	// traceback ends with the exception).
	LastLine string `json:"last_line,omitempty"`
	// At is when it ran: from the cache, when it last really ran.
	At time.Time `json:"at"`
}

// ErrTimeout is returned when the check did not end within its budget.
var ErrTimeout = errors.New("check did not finish in time")

// Run answers whether the target loads whole.
func Run(ctx context.Context, opts Options) (*Result, error) {
	return runWithin(ctx, opts, factcache.SettleMargin)
}

// runWithin is Run with the margin answers must be settled by.
func runWithin(ctx context.Context, opts Options, margin time.Duration) (*Result, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		return run(ctx, opts, margin)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	type answer struct {
		r   *Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := run(ctx, opts, margin)
		done <- answer{r, err}
	}()
	// A file system that hangs (a dead network mount) holds a goroutine in
	// a system call that no context interrupts: the budget is kept here,
	// whatever it is doing.
	select {
	case a := <-done:
		if a.err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w (%s)", ErrTimeout, opts.Timeout)
		}
		return a.r, a.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w (%s)", ErrTimeout, opts.Timeout)
		}
		return nil, ctx.Err()
	}
}

// verdict is a kept answer, with what it was derived from.
type verdict[T any] struct {
	Key    string
	Inputs factcache.Inputs
	Answer T
}

// keep bounds the answers kept, one per target and environment.
const keep = 64

func run(ctx context.Context, opts Options, margin time.Duration) (*Result, error) {
	var r Result
	ctx = KnowInterpreter(ctx, opts)
	key := joinKey(ctx, opts, "")
	if recall(opts, key, &r) {
		r.Cached = true
		return &r, nil
	}
	start := time.Now()
	t, a, r2, err := analyze(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r2.Import == nil || r2.Import.OK {
		remember(opts, key, r2, t, a, start, margin)
	}
	return r2, nil
}

// Recall loads into v the answer kept for what (a kind of answer: "" is
// check's own) with opts, when nothing it depends on has changed.
func Recall(ctx context.Context, opts Options, what string, v any) bool {
	return recall(opts, joinKey(ctx, opts, what), v)
}

func recall(opts Options, key string, v any) bool {
	var kept verdict[json.RawMessage]
	if !opts.Cache.Load(factcache.Key("check", key), &kept) || kept.Key != key || !kept.Inputs.Unchanged() {
		return false
	}
	return json.Unmarshal(kept.Answer, v) == nil
}

// Remember keeps v as the answer for what with opts, derived from the
// analysis a of target t begun at start, for Recall to give while nothing
// it depends on changes: the analysis' inputs, opts.Inputs, the
// interpreter and this program. Only an answer about a Python
// distribution or a file is kept (a tree's walk is not among the inputs),
// and only when its inputs had settled when it began.
func Remember(ctx context.Context, opts Options, what string, v any, t *resolver.Target, a *resolver.Analysis, start time.Time) {
	remember(opts, joinKey(ctx, opts, what), v, t, a, start, factcache.SettleMargin)
}

func remember(opts Options, key string, v any, t *resolver.Target, a *resolver.Analysis, start time.Time, margin time.Duration) {
	if opts.Cache.Path() == "" || t.Kind != resolver.KindPython && t.Kind != resolver.KindFile {
		return
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	answer, err := json.Marshal(v)
	if err != nil {
		opts.Logger.Debug("answer not cached", "error", err)
		return
	}
	inputs := append(a.Inputs(), opts.Inputs...)
	if t.Python != nil {
		inputs = append(inputs, t.Python.Inputs...)
		inputs = append(inputs, t.Python.Interpreter, t.Python.Executable, t.Python.RealExec)
		if len(opts.Import) > 0 && t.Dist != nil {
			inputs = append(inputs, importInputs(t.Dist.Files)...)
		}
	}
	if exe, err := os.Executable(); err == nil {
		inputs = append(inputs, exe) // the catalog and the rules are in it
	}
	kept := verdict[json.RawMessage]{Key: key, Inputs: factcache.Capture(inputs), Answer: answer}
	if !kept.Inputs.Settled(start, margin) {
		opts.Logger.Debug("answer not cached: its inputs changed moments ago", "newest", kept.Inputs.Newest())
		return
	}
	if err := opts.Cache.Save(factcache.Key("check", key), kept); err != nil {
		opts.Logger.Debug("answer not cached", "error", err)
	}
	opts.Cache.Trim("check-", keep)
}

// importInputs are what an import of a distribution reads besides the
// libraries: its own modules and data, each stat'ed so that one edited in
// place is seen. Headers and sources for compilers, CMake files and type
// stubs no import reads: their directories are stat'ed instead, which sees
// one added, removed or replaced (most of torch's twelve thousand files
// are C++ headers; a stat each was most of what a kept answer cost).
func importInputs(files []string) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		ext := ""
		if i := strings.LastIndexByte(f, '.'); i > strings.LastIndexByte(f, '/') {
			ext = f[i+1:]
		}
		if neverImported(ext) {
			f = filepath.Dir(f)
		}
		out = append(out, f)
	}
	return out
}

// neverImported reports the extensions of the files of a distribution
// that Python's import system never reads: C, C++ and CUDA headers and
// sources, CMake files, Cython sources, type stubs.
func neverImported(ext string) bool {
	switch ext {
	case "h", "hh", "hpp", "hxx", "cuh", "inl", "ipp", "tcc", "c", "cc", "cpp", "cxx", "cu", "cmake", "pyx", "pxd", "pxi", "pyi":
		return true
	}
	return false
}

// analyze runs the resolver's analysis and, when asked, the import
// beside it.
func analyze(ctx context.Context, opts Options) (*resolver.Target, *resolver.Analysis, *Result, error) {
	t, err := resolver.FindTarget(ctx, opts.Target, resolver.TargetOptions{Python: opts.Python, SiteDir: opts.SiteDir, Root: opts.Loader.Root, Cache: opts.Cache})
	if err != nil {
		return nil, nil, nil, err
	}
	cat, err := opts.Catalog(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	prefix, err := activation.OpenIn(opts.Prefix, opts.Loader.Root)
	if err != nil {
		return nil, nil, nil, err
	}
	// The import takes seconds where the analysis takes a fraction of one:
	// it runs beside it.
	imported := make(chan *Import, 1)
	if len(opts.Import) > 0 {
		go func() { imported <- runImport(ctx, opts.Import, opts.ImportTimeout) }()
	} else {
		imported <- nil
	}
	a, err := resolver.Analyze(ctx, t, resolver.Options{Loader: opts.Loader, Catalog: cat, Prefix: prefix, Logger: opts.Logger})
	imp := <-imported
	if err != nil {
		return nil, nil, nil, err
	}
	problems := a.Problems()
	r := &Result{Target: t.Describe(), OK: len(problems) == 0, Problems: problems, Notes: a.Notes(), Import: imp}
	if r.Problems == nil {
		r.Problems = []resolver.Problem{}
	}
	return t, a, r, nil
}

// joinKey is the text of everything the answer depends on besides files.
func joinKey(ctx context.Context, opts Options, what string) string {
	return strings.Join(append(keyParts(ctx, opts), "answer="+what), "\x00")
}

// KnowInterpreter returns ctx carrying which program the interpreter of
// opts runs, when the answers' key needs it: the key and the analysis it
// was missed for then run a wrapper (a pyenv shim) once between them.
func KnowInterpreter(ctx context.Context, opts Options) context.Context {
	if !asksInterpreter(opts) {
		return ctx
	}
	return pyenv.KnowSelected(ctx, opts.Python)
}

// asksInterpreter: a root's interpreter is never run, and a site
// directory given is read without one.
func asksInterpreter(opts Options) bool { return opts.Loader.Root == "" && opts.SiteDir == "" }

// keyParts are what the answer depends on besides files: the machine, the
// working directory (a relative target), the options and the environment
// the loader and the interpreter read.
func keyParts(ctx context.Context, opts Options) []string {
	host, _ := os.Hostname()
	wd, _ := os.Getwd()
	parts := []string{"host=" + host, "wd=" + wd, "target=" + opts.Target, "python=" + opts.Python, "site=" + opts.SiteDir,
		"root=" + opts.Loader.Root, "prefix=" + opts.Prefix}
	if opts.Loader.LDLibraryPath != nil {
		parts = append(parts, "ld-library-path="+*opts.Loader.LDLibraryPath)
	}
	if opts.Loader.PreloadSet {
		parts = append(parts, "preload="+strings.Join(opts.Loader.Preload, ":"))
	}
	if len(opts.Import) > 0 {
		parts = append(parts, "import="+strings.Join(opts.Import, "\x00"))
	}
	if asksInterpreter(opts) {
		// The interpreter a wrapper (a pyenv shim) picks now: no key part
		// above sees the version it picks by.
		parts = append(parts, "runs="+pyenv.Selected(ctx, opts.Python))
	}
	parts = append(parts, opts.Key...)
	return append(parts, environ()...)
}

// environ is the part of the environment the answer depends on, sorted:
// what the loader reads (LD_LIBRARY_PATH, LD_PRELOAD, GLIBC_TUNABLES, ...),
// what finds the interpreter and its paths, and cudadeps' own settings.
func environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "LD_"), strings.HasPrefix(name, "PYTHON"), strings.HasPrefix(name, "CUDADEPS_"),
			strings.HasPrefix(name, "XDG_"), slices.Contains([]string{"GLIBC_TUNABLES", "PATH", "HOME", "VIRTUAL_ENV", "CONDA_PREFIX"}, name):
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return out
}

// runImport runs the import command with the user's environment, within
// timeout when it is positive.
func runImport(ctx context.Context, argv []string, timeout time.Duration) *Import {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	imp := &Import{Command: strings.Join(argv, " "), At: time.Now().UTC().Truncate(time.Second)}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	switch err := cmd.Run(); {
	case err == nil:
		imp.OK = true
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		imp.TimedOut = true
	default:
		imp.LastLine = lastLine(out.String())
	}
	return imp
}

// lastLine is a process's last non-empty line of output, at most 300
// bytes.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			return l
		}
	}
	return "(no output)"
}
