package main

import (
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/plural"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/runtimeopen"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

const scanLong = `scan reads the ELF objects in PATH (a file, a directory searched recursively,
or a wheel read without unpacking it) and computes, for each, what glibc's
dynamic loader would load: every needed library, where it is found and by
which rule (rpath, runpath, LD_LIBRARY_PATH, ld.so.cache, default directories,
already loaded), and what it would not find.

A single object prints as a tree. For many objects, the ones that would fail
print as trees pruned to the failing branches, then a summary; --all prints
every tree in full.

Libraries that the objects open at run time (dlopen: NVIDIA's libraries and
the common frameworks, from a curated table, and any ELF .note.dlopen) are
resolved from their opener as dlopen would and listed under each tree; a
required one not found counts as missing, an optional one never does.
A file named on the command line that is no loadable object (a linker script
such as libc.so, an object file such as crt1.o) is skipped with a note.

A directory's files are chosen by name, so that the tens of thousands of
sources, headers and data files of a Python environment are never opened: a
name containing ".so" is read; a name with an extension no loadable object
has (.py, .pyc, .h, .hpp, .cu, .txt, .json, .a, .o, ...; see
docs/performance.md) is not; any other file is read when it has an execute
bit (programs). __pycache__ directories are not entered. --all-files reads
every regular file instead, for a shared object named otherwise and not
executable.

With --coverage or --sm N, the CUDA fat binaries of every object loaded are
read (their headers only) and judged for the GPU: native code (SASS) that
runs there, PTX the driver compiles at first use (and how much), a library
known to build its kernels at run time, or nothing that runs. The compute
capability comes from NVML, else the PCI ID or a Jetson's device tree; --sm
plans for another machine (--sm thor, --sm 12.1). See docs/coverage.md.

Files that an installed Python distribution's RECORD lists are loaded as
importing their package loads them: into the interpreter's process, after
the extension modules of the distributions theirs requires (torchvision's
after torch's), after what the frameworks load by path while importing
(torch's fallback to NVIDIA's libraries on sys.path, CUDA Python's
pathfinder), and, for a library, after its own package's modules. One that
loads so and fails on its own is listed as failing only when loaded on its
own, which does not change the exit status (--json: "import"). See
docs/python-imports.md.

With --symbols (the default), every undefined symbol of every object is
bound as ld.so binds it with RTLD_NOW, and the ones nothing defines are
reported as ld.so reports them ("undefined symbol: NAME, version VER"). A
Python extension module is bound as an import binds it, in the process of
its environment's interpreter (--python), which defines the C API.
What binding answered is kept in the cache ($XDG_CACHE_HOME/cudadeps) by the
identity of every file it read (device, inode, size, modification and change
time): a later scan of files unchanged since reads no symbol table, and a
file changed since is bound again. --no-cache computes every answer and
keeps none.

Exit status: 0 when every object would load, 3 when a library is missing, a
required symbol version is absent or a symbol does not bind, 1 on errors and
when PATH holds no loadable ELF object (nothing was checked), 2 on usage
errors.`

func (a *app) scanCommand() *cobra.Command {
	var all, allFiles, noRuntime, symbols, noCache bool
	var mount, python string
	var cov coverageFlags
	cmd := &cobra.Command{
		Use:   "scan PATH...",
		Short: "Show where the dynamic loader would find every library an object needs",
		Long:  scanLong,
		Example: `  cudadeps scan /usr/lib/x86_64-linux-gnu/libcurl.so.4
  cudadeps scan ~/venv/lib/python3.12/site-packages/torch --json
  cudadeps scan torch-2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl --root /srv/arm64-sysroot
  cudadeps scan dist/my_ext.whl --site-packages ~/venv/lib/python3.12/site-packages
  cudadeps scan ~/venv/lib/python3.12/site-packages/torch --sm thor`,
		Args: argsAtLeast(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := scan.Options{WheelMount: mount, Logger: a.logger, Symbols: symbols, AllFiles: allFiles,
				// Without --all or --verbose, only the trees of what does
				// not load are printed; coverage reads every root's
				// objects.
				ResultsOfFailuresOnly: !all && !a.opts.verbose && !cov.wanted(),
				// The text draws trees from each root's loader answer.
				LeaveOutClosures: !a.opts.json}
			if !noCache {
				opts.Cache = factcache.Open()
			}
			if err := scanInterpreters(cmd.Context(), python, a.opts.root, &opts); err != nil {
				return err
			}
			return a.runScan(cmd, args, opts, all, !noRuntime, &cov)
		},
	}
	a.opts.addLoaderFlags(cmd)
	a.opts.addJSONFlag(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "print every object's full tree, system libraries expanded too")
	cmd.Flags().BoolVar(&allFiles, "all-files", false, "in a directory, read every regular file as a possible object, not only those named as objects or executable")
	cmd.Flags().BoolVar(&noRuntime, "no-runtime-opens", false, "leave out the libraries objects open at run time (dlopen)")
	cmd.Flags().StringVar(&mount, "site-packages", "", "mount wheels on this `DIR` (a real site-packages), so their dependencies resolve against what is installed there")
	cmd.Flags().BoolVar(&symbols, "symbols", true, "bind every undefined symbol as ld.so does with RTLD_NOW and report those nothing defines")
	cmd.Flags().BoolVar(&noCache, "no-cache", false, "compute every answer again: read and keep nothing in the cache (binding answers, the interpreters' paths)")
	cmd.Flags().StringVar(&python, "python", "", "bind Python extension modules in the process of this interpreter `PATH` (default: their environment's, else python3 on PATH)")
	cov.register(cmd, "every object loaded")
	return cmd
}

func (a *app) runScan(cmd *cobra.Command, args []string, opts scan.Options, all, runtimeOpens bool, cov *coverageFlags) error {
	l, err := a.newLoader(cmd)
	if err != nil {
		return err
	}
	defer l.Close()
	if runtimeOpens {
		table, err := runtimeopen.Load()
		if err != nil {
			return err
		}
		opts.RuntimeOpens = runtimeopen.NewResolver(table, l)
	}
	rep, err := scan.Run(cmd.Context(), l, args, opts)
	if err != nil {
		return err
	}
	rep.Loader = a.loaderInfo(l)
	if cov.wanted() {
		dev, err := a.device(cmd.Context(), cov, opts.Python)
		if err != nil {
			return err
		}
		if rep.Coverage, err = a.assessCoverage(cmd.Context(), dev, rep.LoadedFiles()); err != nil {
			return err
		}
	}
	for _, s := range rep.Skipped {
		if slices.Contains(args, s.Path) {
			fmt.Fprintf(a.stderr, "note: skipped %s: %s\n", s.Path, s.Reason)
		}
	}
	if a.opts.json {
		err = writeJSON(a.stdout, schemaScan, rep)
	} else {
		renderScan(a.stdout, rep, all || a.opts.verbose, newPainter(a.stdout))
		if rep.Coverage != nil {
			fmt.Fprintln(a.stdout)
			renderCoverage(a.stdout, rep.Coverage, rep.Coverage.Device, newPainter(a.stdout))
		}
	}
	if err != nil {
		return err
	}
	for _, e := range rep.Errors {
		a.logger.Warn("unreadable file", "path", e.Path, "error", e.Error)
	}
	switch {
	case !rep.OK():
		return exitWith(exitMissing)
	case len(rep.Errors) > 0:
		return exitWith(exitError)
	case len(rep.Roots) == 0:
		fmt.Fprintf(a.stderr, "warning: no loadable ELF object in %s: nothing was checked\n", strings.Join(args, ", "))
		return exitWith(exitError)
	}
	return nil
}

// newLoader builds the loader model from the shared flags.
func (a *app) newLoader(cmd *cobra.Command) (*ldso.Loader, error) {
	l, err := ldso.New(cmd.Context(), a.loaderOptions(cmd))
	if err != nil {
		return nil, err
	}
	if _, cerr := l.Cache(); cerr != nil {
		a.logger.Warn("ignoring unreadable loader cache", "error", cerr)
	}
	return l, nil
}

func (a *app) loaderInfo(l *ldso.Loader) scan.LoaderInfo {
	info := scan.LoaderInfo{Root: l.Root()}
	if info.Root == "" {
		info.Root = "/"
	}
	if c, _ := l.Cache(); c != nil {
		info.Cache = c.Path
	}
	if v, ok := l.LDLibraryPath(); ok {
		info.LDLibraryPath = &v
	}
	info.Preload = l.Preload()
	return info
}

// countNotBound counts the roots whose references were not bound.
func countNotBound(roots []*scan.Root) int {
	n := 0
	for _, r := range roots {
		if r.SymbolsNotBound != "" {
			n++
		}
	}
	return n
}

// renderScan prints trees and a summary.
func renderScan(w io.Writer, rep *scan.Report, all bool, paint painter) {
	single := len(rep.Roots) == 1
	okCount := 0
	for _, root := range rep.Roots {
		switch {
		case single || all:
			renderTree(w, root.Result, treeOptions{expandSystem: all, paint: paint})
			renderRuntimeOpens(w, root, true)
			fmt.Fprintln(w)
		case !root.OK:
			renderTree(w, root.Result, treeOptions{prune: true, paint: paint})
			renderRuntimeOpens(w, root, false)
			fmt.Fprintln(w)
		default:
			okCount++
		}
	}
	for _, s := range rep.Skipped {
		if all {
			fmt.Fprintf(w, "skipped %s: %s\n", s.Path, s.Reason)
		}
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "error   %s: %s\n", e.Path, e.Error)
	}
	if len(rep.Missing) > 0 {
		fmt.Fprintln(w, "Missing libraries:")
		for _, m := range rep.Missing {
			fmt.Fprintf(w, "  %s\n", m.Soname)
			verb := "needed by"
			if m.RunTime {
				verb = "opened at run time by"
			}
			for _, by := range limit(m.NeededBy, 5) {
				fmt.Fprintf(w, "      %s %s\n", verb, by)
			}
			if m.Problem != "" {
				fmt.Fprintf(w, "      %s\n", m.Problem)
			}
		}
	}
	if len(rep.VersionErrors) > 0 {
		fmt.Fprintln(w, "Symbol version errors:")
		for _, v := range rep.VersionErrors {
			fmt.Fprintf(w, "  %s\n", v.Message)
		}
	}
	renderUndefined(w, rep)
	renderOnlyInImport(w, rep, all)
	for _, msg := range rep.Warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	bad := len(rep.Roots) - countOK(rep.Roots)
	fmt.Fprintf(w, "%d object(s) scanned: %d load, %d would fail", len(rep.Roots), len(rep.Roots)-bad, bad)
	if len(rep.Missing) > 0 {
		fmt.Fprintf(w, " (%d missing librar%s)", len(rep.Missing), plural.Of(len(rep.Missing), "y", "ies"))
	}
	notELF := 0
	for _, s := range rep.Skipped {
		if s.NotELF {
			notELF++
		}
	}
	if n := len(rep.Skipped) - notELF; n > 0 {
		fmt.Fprintf(w, "; %d ELF file(s) skipped (static or not loadable)", n)
	}
	if notELF > 0 {
		fmt.Fprintf(w, "; %d file%s skipped: not ELF", notELF, plural.Of(notELF, "", "s"))
	}
	fmt.Fprintln(w, ".")
	if n := countNotBound(rep.Roots); n > 0 {
		fmt.Fprintf(w, "Symbols not bound in %d object(s): a file of their closure cannot be read here (a wheel's members are bound once installed; --json: symbols_not_bound).\n", n)
	}
	if okCount > 0 && !single && !all {
		fmt.Fprintf(w, "Objects that load are not shown; --all prints every tree.\n")
	}
}

// renderOnlyInImport names the objects that load in their import and fail
// on their own: no failure, but what `ldd` on them alone would show.
func renderOnlyInImport(w io.Writer, rep *scan.Report, all bool) {
	var lines []string
	for _, r := range rep.Roots {
		if r.Import != nil && r.Import.OnlyInImport {
			lines = append(lines, fmt.Sprintf("  %s: fails only when loaded on its own: %s", r.Path, r.Import.Alone))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "Load where their package's import loads them (after the modules it imports first), fail on their own:")
	if !all {
		lines = limit(lines, 10)
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func countOK(roots []*scan.Root) int {
	n := 0
	for _, r := range roots {
		if r.OK {
			n++
		}
	}
	return n
}

func limit(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	out := append([]string(nil), list[:n]...)
	return append(out, fmt.Sprintf("... and %d more", len(list)-n))
}

type treeOptions struct {
	prune        bool // show only branches that lead to a problem
	expandSystem bool // expand libraries found in the cache or default dirs
	paint        painter
}

// renderTree prints an object's dependencies as the loader resolves them.
// An object's own dependencies are shown at its first appearance; later
// appearances are leaves, as in libtree.
func renderTree(w io.Writer, r *ldso.Result, opts treeOptions) {
	bad := problemSet(r)
	fmt.Fprintf(w, "%s\n", r.Main.Path)
	shown := map[*ldso.Object]bool{r.Main: true}
	var walk func(o *ldso.Object, prefix string)
	walk = func(o *ldso.Object, prefix string) {
		deps := o.Deps
		if opts.prune {
			var keep []*ldso.Object
			for _, d := range deps {
				if bad[d] {
					keep = append(keep, d)
				}
			}
			deps = keep
		}
		for i, d := range deps {
			branch, next := "├── ", "│   "
			if i == len(deps)-1 {
				branch, next = "└── ", "    "
			}
			seen := shown[d]
			fmt.Fprintf(w, "%s%s%s\n", prefix, branch, describe(o, d, seen, opts.paint))
			if seen || !d.Found() {
				continue
			}
			shown[d] = true
			system := d.Via == ldso.ViaCache || d.Via == ldso.ViaDefault || d.Via == ldso.ViaInterpreter
			if system && !opts.expandSystem && !bad[d] {
				continue
			}
			walk(d, prefix+next)
		}
	}
	walk(r.Main, "")
	for _, v := range r.VersionErrors {
		fmt.Fprintf(w, "  ! %s: version '%s' not found (required by %s)%s\n", v.Provider.Path, v.Version, v.Object.Path, weakNote(v.Weak))
	}
}

func weakNote(weak bool) string {
	if weak {
		return " [weak: a warning only]"
	}
	return ""
}

// describe is one line of the tree.
func describe(parent, o *ldso.Object, seen bool, paint painter) string {
	if !o.Found() {
		s := o.Name + "  " + paint.bad("NOT FOUND")
		if o.Problem != "" {
			s += " (" + o.Problem + ")"
		}
		return s
	}
	if seen {
		return fmt.Sprintf("%s  [already loaded] %s", o.Name, o.Path)
	}
	how := string(o.Via)
	switch o.Via {
	case ldso.ViaRPath, ldso.ViaRunPath:
		how += " " + o.Entry
		if o.Source != nil && o.Source != parent {
			how += " of " + path.Base(o.Source.Path)
		}
	case ldso.ViaLDLibraryPath:
		how = "LD_LIBRARY_PATH " + o.Entry
	case ldso.ViaCache:
		how = "ld.so.cache"
	case ldso.ViaDefault:
		how = "default path"
	}
	if o.Path == o.Name {
		return fmt.Sprintf("%s  [%s]", o.Name, how)
	}
	return fmt.Sprintf("%s  [%s] %s", o.Name, how, o.Path)
}

// problemSet marks the objects on a path from the main object to a miss or
// a version error.
func problemSet(r *ldso.Result) map[*ldso.Object]bool {
	bad := map[*ldso.Object]bool{}
	for _, o := range r.Objects {
		if !o.Found() {
			bad[o] = true
		}
	}
	for _, v := range r.VersionErrors {
		if !v.Weak {
			bad[v.Object] = true
			bad[v.Provider] = true
		}
	}
	// Propagate to everything that needs a bad object.
	for changed := true; changed; {
		changed = false
		for _, o := range r.Objects {
			if bad[o] {
				continue
			}
			for _, d := range o.Deps {
				if bad[d] {
					bad[o] = true
					changed = true
					break
				}
			}
		}
	}
	return bad
}

// argsAtLeast is cobra.MinimumNArgs reported as a usage error.
func argsAtLeast(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return &flagError{err: fmt.Errorf("%s needs at least %d argument(s); see '%s --help'", cmd.Name(), n, cmd.CommandPath())}
		}
		return nil
	}
}

// argsExactly is cobra.ExactArgs reported as a usage error.
func argsExactly(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return &flagError{err: fmt.Errorf("%s takes %d argument(s), got %d; see '%s --help'", cmd.Name(), n, len(args), cmd.CommandPath())}
		}
		return nil
	}
}

// renderRuntimeOpens lists what a root's objects open at run time: all of
// it, or only the failures.
func renderRuntimeOpens(w io.Writer, root *scan.Root, all bool) {
	header := false
	for _, o := range root.RuntimeOpens {
		if !all && o.Path != nil {
			continue
		}
		if !header {
			fmt.Fprintln(w, "opened at run time:")
			header = true
		}
		kind := "required"
		switch {
		case o.Driver:
			kind = "driver"
		case o.Optional:
			kind = "optional"
		}
		where := "not found"
		if o.Path != nil {
			where = "=> " + *o.Path + " [" + o.How + "]"
		} else if kind == "required" {
			where = "not found (missing)"
		}
		fmt.Fprintf(w, "  %s opens %s (%s) %s\n", path.Base(o.Opener), o.Soname, kind, where)
		if all {
			fmt.Fprintf(w, "      evidence: %s\n", o.Evidence)
		}
	}
}

// renderUndefined lists the references that would not bind, in ld.so's
// words; those a missing library explains are counted under it instead,
// a few of them named: one absent library would otherwise stand for
// hundreds of lines (--json keeps every one).
func renderUndefined(w io.Writer, rep *scan.Report) {
	list := uniqueUndefined(rep)
	if len(list) == 0 {
		return
	}
	missing := map[string]bool{}   // sonames missing at load time
	lacks := map[string][]string{} // object → the missing sonames it needs
	for _, m := range rep.Missing {
		if m.RunTime {
			continue
		}
		missing[m.Soname] = true
		for _, by := range m.NeededBy {
			if !slices.Contains(lacks[by], m.Soname) {
				lacks[by] = append(lacks[by], m.Soname)
			}
		}
	}
	type group struct {
		head  string
		names []string
	}
	var groups []*group
	byHead := map[string]*group{}
	fmt.Fprintln(w, "Undefined symbols:")
	for _, u := range list {
		var head string
		switch {
		case missing[u.File]:
			head = "needed from " + u.File + ", which is missing"
		case u.File == "" && len(lacks[u.Object]) > 0:
			head = "of " + u.Object + ", which needs " + strings.Join(lacks[u.Object], ", ") + " (missing)"
		default:
			fmt.Fprintf(w, "  %s\n", u.Message())
			continue
		}
		g := byHead[head]
		if g == nil {
			g = &group{head: head}
			byHead[head] = g
			groups = append(groups, g)
		}
		g.names = append(g.names, u.Symbol)
	}
	for _, g := range groups {
		fmt.Fprintf(w, "  %d undefined symbol%s %s: %s\n", len(g.names), plural.Of(len(g.names), "", "s"), g.head, firstFew(g.names, 3))
	}
}

// uniqueUndefined is every root's undefined symbols, each once, in order.
func uniqueUndefined(rep *scan.Report) []scan.UndefinedSymbol {
	seen := map[scan.UndefinedSymbol]bool{}
	var list []scan.UndefinedSymbol
	for _, root := range rep.Roots {
		for _, u := range root.UndefinedSymbols {
			if !seen[u] {
				seen[u] = true
				list = append(list, u)
			}
		}
	}
	return list
}

// firstFew names the first n of names and counts the rest.
func firstFew(names []string, n int) string {
	if len(names) <= n+1 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// scanInterpreters sets the interpreters extension modules are bound in:
// --python, or python3 on PATH as the last resort, each the real program
// behind a shim (pyenv, asdf and conda wrappers are shell scripts).
func scanInterpreters(ctx context.Context, python, root string, opts *scan.Options) error {
	if python != "" {
		real, err := pyenv.Interpreter(ctx, python)
		if err != nil {
			return usageError("--python: %v", err)
		}
		opts.Python = real
		return nil
	}
	if root == "" {
		// Asked once, when the scan meets a Python environment: a
		// shim's program is known only by running the shim.
		var once sync.Once
		var real string
		opts.DefaultPython = func(ctx context.Context) string {
			once.Do(func() { real, _ = pyenv.Interpreter(ctx, "python3") })
			return real
		}
	}
	return nil
}
