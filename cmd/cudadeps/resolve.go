package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/check"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/plan"
	"github.com/cudadeps/cudadeps/fleet/registry"
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/humansize"
	"github.com/cudadeps/cudadeps/internal/tty"
	"github.com/cudadeps/cudadeps/loader/gpuarch"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/platform"
	"github.com/cudadeps/cudadeps/python/pypi"
	"github.com/cudadeps/cudadeps/resolver"
)

type resolveFlags struct {
	python    string
	siteDir   string
	dryRun    bool
	yes       bool
	copy      bool
	noVerify  bool
	check     string
	checkTime time.Duration
	maxRounds int
	allowHTTP bool
	cacheDir  string
	// noCache reads and keeps no answer in the fact cache.
	noCache bool
	// Where libraries come from, and the package index for wheels.
	source        string
	indexURL      string
	extraIndexURL []string
	// cov asks for the GPU code coverage of what finally loads.
	cov coverageFlags
}

// facts is the fact cache resolve reads and keeps answers in: none with
// --no-cache.
func (f resolveFlags) facts() factcache.Dir {
	if f.noCache {
		return factcache.Dir{}
	}
	return factcache.Open()
}

const resolveLong = `resolve makes TARGET load: it scans what the dynamic loader would not find,
matches each missing soname against the catalog of NVIDIA's redistributable
archives, downloads and verifies them into the store (--prefix), and makes the
loader find them without root, then scans again (a library just installed may
need another) until nothing is missing or no archive helps.

TARGET is an installed Python distribution (torch, cupy-cuda13x), found with
the interpreter of the active environment (--python) from its RECORD (under
--root, in the root's own Python installation, read from its files and never
run: docs/platforms.md says in which order its site directories count); or a
directory or ELF file; or a .whl file, which is only planned (nothing to
install it into).

Before anything is downloaded or placed, the plan (archives, URLs, sizes, the
total and the directories) is printed on stderr and you are asked. Where
nobody can answer (stdin is not a terminal), resolve refuses unless --yes is
given, and exits with status 2.

Activation, without root and without editing any binary: the libraries are
linked into a directory the loader already searches for the objects that need
them (their RPATH or RUNPATH, e.g. site-packages/nvidia/cu13/lib), created if
need be, so the import works in any new shell. Objects that search no such
directory get PREFIX/env.sh, which sets LD_LIBRARY_PATH: source it. Every file
placed is recorded; 'cudadeps undo TARGET' removes exactly those.

Sources (--source): NVIDIA's archives, or wheels from the Python package
index the environment uses (pip's configuration: PIP_INDEX_URL,
PIP_EXTRA_INDEX_URL, pip.conf's index-url; or --index-url). With auto (the
default), a library that a distribution the package requires owns comes as
that distribution's exact wheel (nvidia-cudnn-cu13==9.19.0.56) when an index
is configured, placed where its RECORD puts it; everything else, and what the
index lacks, from NVIDIA's archives. pypi takes wheels only (other libraries
through cudadeps' table of NVIDIA's distributions); nvidia archives only.

For a Python target, the package is then imported in a new interpreter, and
a short probe runs for each framework it is or requires (torch, CuPy, JAX's
CUDA plugin, onnxruntime-gpu, TensorFlow) that makes it open what it opens
lazily: cuDNN's sub-libraries, cuFFT, NVRTC and its builtins, the driver.
Without a GPU only the steps that need none run; the others are reported as
skipped. --check CMD runs your own command (sh -c, same environment, the
interpreter's directory first on PATH) instead of the probes, for any
target; --no-verify skips the import and the probes. A library the import,
a probe or the command cannot open (or finds too old) feeds the loop like any
other, unless no copy placed could load instead (an installed distribution's
own copy loads, or a copy on LD_LIBRARY_PATH comes first: the report names
it); any other failure is reported with a command line that reruns it.

A dry run of a target that loads whole is kept in the fact cache
($XDG_CACHE_HOME/cudadeps/facts) with the state of everything it read, and
printed again from there while none of it changed, as check does; what the
interpreter said and what binding answered are kept by the stamps of their
files. --no-cache computes all of it again and keeps nothing.

Libraries that only an optional module needs (CuPy's cuTENSOR, NCCL,
cuSPARSELt and cuDNN backends) are reported as optional with the package
that provides them, and never fetched.

With --coverage or --sm N, the GPU code of every library of the final scan
is judged for the device (see scan --help and docs/coverage.md): a package
that loads can still carry nothing that runs on this GPU.

Exit status: 0 when everything loads and runs, 3 when a library is still
missing or wrong (or, with --dry-run, would be), 1 on errors, when TARGET
holds no ELF object, and when the import, a probe or the check fails for a
reason that names no library, 2 on usage errors and when asking was not
possible, 130 when interrupted.`

func (a *app) resolveCommand() *cobra.Command {
	var f resolveFlags
	cmd := &cobra.Command{
		Use:   "resolve TARGET",
		Short: "Fetch and activate every library TARGET needs until it loads",
		Long:  resolveLong,
		Example: `  cudadeps resolve torch --dry-run
  cudadeps resolve torch --yes
  cudadeps resolve cupy-cuda13x --python ~/venv/bin/python --json --yes
  cudadeps resolve torch --mirror https://mirror.internal/nvidia/ --yes
  cudadeps resolve torch --site-packages /srv/arm64/venv/lib/python3.12/site-packages --root /srv/arm64 --dry-run`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runResolve(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.python, "python", "", "the Python `INTERPRETER` whose environment holds TARGET (default: the active environment's python3; with --root, the root's own, and one inside the root is read, never run)")
	fl.StringVar(&f.siteDir, "site-packages", "", "read distributions from this `DIR` without running an interpreter (no import check)")
	fl.BoolVarP(&f.dryRun, "dry-run", "n", false, "print the plan; change nothing on disk")
	fl.BoolVarP(&f.yes, "yes", "y", false, "do not ask before downloading and placing (needed when stdin is not a terminal)")
	fl.BoolVar(&f.copy, "copy", false, "place copies instead of symbolic links into the store")
	fl.BoolVar(&f.noVerify, "no-verify", false, "do not import the package nor run the probes or --check")
	fl.StringVar(&f.check, "check", "", "run `CMD` (sh -c) to check the result instead of the framework probes")
	fl.DurationVar(&f.checkTime, "check-timeout", resolver.DefaultCheckTimeout, "time limit for the import check and each probe or --check run")
	fl.IntVar(&f.maxRounds, "max-rounds", 8, "give up after `N` rounds")
	fl.BoolVar(&f.allowHTTP, "allow-http", false, "allow plain http:// mirrors other than 127.0.0.1")
	fl.StringVar(&f.cacheDir, "cache", "", "download cache `DIR` (default: $XDG_CACHE_HOME/cudadeps)")
	fl.BoolVar(&f.noCache, "no-cache", false, "compute every answer again: read and keep nothing in the fact cache (a dry run's kept answer, the interpreter's paths, what binding answered); downloads are cached still")
	fl.StringVar(&f.source, "source", string(resolver.SourceAuto), "where libraries come from: `SOURCE` auto (pinned wheels from the package index when one is configured, else NVIDIA's archives), nvidia or pypi")
	fl.StringVar(&f.indexURL, "index-url", "", "the package index `URL` for wheels, as pip's --index-url (default: pip's configuration)")
	fl.StringArrayVar(&f.extraIndexURL, "extra-index-url", nil, "more package index `URL`s, as pip's --extra-index-url (repeatable)")
	var sources []string
	for _, s := range resolver.Sources() {
		sources = append(sources, string(s))
	}
	f.cov.register(cmd, "the libraries that finally load")
	_ = cmd.RegisterFlagCompletionFunc("source", cobra.FixedCompletions(sources, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("site-packages")
	_ = cmd.MarkFlagDirname("cache")
	a.opts.addLoaderFlags(cmd)
	a.opts.addCatalogFlags(cmd)
	a.opts.addStoreFlags(cmd)
	a.opts.addLimitFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

func (a *app) loaderOptions(cmd *cobra.Command) ldso.Options {
	opts := ldso.Options{Root: a.opts.root}
	if cmd.Flags().Changed("ld-library-path") {
		v := a.opts.ldLibraryPath
		opts.LDLibraryPath = &v
	}
	if cmd.Flags().Changed("preload") {
		opts.Preload, opts.PreloadSet = a.opts.preload, true
	}
	return opts
}

func (a *app) prefix() (string, error) {
	if a.opts.prefix != "" {
		return filepath.Abs(a.opts.prefix)
	}
	return activation.DefaultDirIn(a.opts.root)
}

// loadCatalog loads the embedded catalog with the --catalog and --mirror flags applied.
func (a *app) loadCatalog(ctx context.Context) (*catalog.Catalog, error) {
	return catalog.Load(ctx, catalog.LoadOptions{UserLayer: a.userLayer(), Extra: a.opts.catalogs, Mirror: string(a.opts.mirror)})
}

// openPrefix opens the prefix and a download client for its store.
func (a *app) openPrefix(cacheDir string, allowHTTP bool) (*activation.Prefix, *fetch.Client, error) {
	prefix, err := activation.OpenIn(a.opts.prefix, a.opts.root)
	if err != nil {
		return nil, nil, err
	}
	client, err := a.newClient(cacheDir, allowHTTP)
	if err != nil {
		return nil, nil, err
	}
	return prefix, client, nil
}

// recoverPrefix finishes what interrupted runs left in the prefix, before
// a command changes it, and says so on stderr.
func (a *app) recoverPrefix(ctx context.Context, p *activation.Prefix) error {
	recovered, err := p.Recover(ctx)
	for _, rc := range recovered {
		a.logger.Warn("recovered an interrupted run", "kind", string(rc.Kind), "target", rc.Name, "finished", len(rc.Finished))
	}
	return err
}

// newClient is a download client; where the mirror is a registry
// (oci://), one that fetches its blobs with its login.
func (a *app) newClient(cacheDir string, allowHTTP bool) (*fetch.Client, error) {
	var rem *registry.Remote
	if m := string(a.opts.mirror); registry.IsReference(m) {
		var err error
		if rem, err = a.openRegistry(m, allowHTTP); err != nil {
			return nil, err
		}
	}
	return a.clientFor(rem, cacheDir, allowHTTP)
}

// clientFor is a download client that fetches rem's blobs (rem may be nil).
func (a *app) clientFor(rem *registry.Remote, cacheDir string, allowHTTP bool) (*fetch.Client, error) {
	opts := fetch.Options{CacheDir: cacheDir, AllowHTTP: allowHTTP, Logger: a.logger, Progress: a.progressWriter(), Limits: a.opts.limits}
	if rem != nil {
		opts = rem.FetchOptions(opts)
	}
	return fetch.NewClient(opts)
}

// openRegistry opens the repository an oci:// reference names, with the
// logins of Docker's configuration.
func (a *app) openRegistry(ref string, allowHTTP bool) (*registry.Remote, error) {
	r, err := registry.ParseReference(ref)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return registry.Open(r, registry.Options{AllowHTTP: allowHTTP, Logger: a.logger})
}

func (a *app) runResolve(cmd *cobra.Command, arg string, f resolveFlags) error {
	ctx := cmd.Context()
	if err := f.checkUsage(); err != nil {
		return err
	}
	start := time.Now()
	ctx, kept, answered, err := a.recallDryRun(ctx, cmd, arg, f)
	if err != nil || answered {
		return err
	}
	target, err := resolver.FindTarget(ctx, arg, resolver.TargetOptions{Python: f.python, SiteDir: f.siteDir, Root: a.opts.root, Cache: f.facts()})
	if err != nil {
		return err
	}
	a.logger.Debug("target", "kind", target.Kind, "name", target.Name, "describe", target.Describe())
	cat, err := a.loadCatalog(ctx)
	if err != nil {
		return err
	}
	prefix, err := activation.OpenIn(a.opts.prefix, a.opts.root)
	if err != nil {
		return err
	}
	index, err := a.packageIndex(f, target)
	if err != nil {
		return err
	}
	opts := resolver.Options{
		Source:       resolver.Source(f.source),
		Index:        index,
		Loader:       a.loaderOptions(cmd),
		Catalog:      cat,
		Platform:     string(a.opts.platform),
		CUDAMajor:    int(a.opts.cuda),
		Prefix:       prefix,
		DryRun:       f.dryRun,
		Copy:         f.copy,
		Verify:       !f.noVerify,
		Check:        f.check,
		CheckTimeout: f.checkTime,
		MaxRounds:    f.maxRounds,
		Logger:       a.logger,
	}
	if !f.dryRun {
		if opts.Client, err = a.newClient(f.cacheDir, f.allowHTTP); err != nil {
			return err
		}
		if err := a.recoverPrefix(ctx, prefix); err != nil {
			return err
		}
		opts.Confirm = a.confirmPlan(prefix, opts.Client, f.yes)
	}
	watched := resolver.Watch(&opts)
	var dev *gpuarch.Device
	if f.cov.wanted() {
		// Before anything is fetched: a bad --sm is a usage error.
		python := f.python
		if python == "" && target.Python != nil {
			python = target.Python.Interpreter
		}
		if dev, err = a.device(ctx, &f.cov, python); err != nil {
			return err
		}
	}
	out, err := resolver.Resolve(ctx, target, opts)
	if err != nil {
		return err
	}
	if dev != nil && out.FinalScan != nil {
		if out.Coverage, err = a.assessCoverage(ctx, dev, out.FinalScan.LoadedFiles()); err != nil {
			return err
		}
	}
	logRounds(a, out)
	watched.Done(out)
	return a.finishResolve(ctx, target, watched, kept, start)
}

// finishResolve prints the outcome of the resolve w watched and says how
// it ended; a whole target's dry run is kept under kept when it is not
// nil.
func (a *app) finishResolve(ctx context.Context, target *resolver.Target, w *resolver.Analysis, kept *check.Options, start time.Time) error {
	out := w.Outcome
	var printed bytes.Buffer
	if err := a.printResolve(ctx, io.MultiWriter(a.stdout, &printed), out); err != nil {
		return err
	}
	if err := a.resolveExit(ctx, target, out); err != nil {
		return err
	}
	if kept != nil && out.OK {
		check.Remember(ctx, *kept, dryRunAnswer, printed.String(), target, w, start)
	}
	return nil
}

// recallDryRun prints the answer a dry run of a whole target gave while
// nothing it depends on changed since (answered), after a stat of each of
// its inputs; kept says under what a new answer is kept (nil: none is).
// The key, the dry run and the answer kept after it all ask which
// interpreter a wrapper runs: the context returned carries it, run once.
func (a *app) recallDryRun(ctx context.Context, cmd *cobra.Command, arg string, f resolveFlags) (_ context.Context, kept *check.Options, answered bool, err error) {
	if kept, err = a.keptDryRun(cmd, arg, f); err != nil || kept == nil {
		return ctx, kept, false, err
	}
	ctx = check.KnowInterpreter(ctx, *kept)
	var text string
	if !check.Recall(ctx, *kept, dryRunAnswer, &text) {
		return ctx, kept, false, nil
	}
	a.logger.Debug("dry run answered from cache: nothing it depends on changed since it was made")
	_, err = io.WriteString(a.stdout, text)
	return ctx, kept, true, err
}

// dryRunAnswer names the answers kept for resolve --dry-run.
const dryRunAnswer = "resolve --dry-run"

// keptDryRun says under what a dry run's answer is kept (check's cache,
// its key and inputs, with every flag that changes what is printed); nil
// when it is not: no dry run, or one that judges GPU code for a device.
func (a *app) keptDryRun(cmd *cobra.Command, arg string, f resolveFlags) (*check.Options, error) {
	if !f.dryRun || f.cov.wanted() || f.noCache {
		return nil, nil
	}
	co := check.Options{Target: arg, Python: f.python, SiteDir: f.siteDir, Cache: factcache.Open()}
	if err := a.checkSettings(cmd, &co); err != nil {
		return nil, err
	}
	co.Key = append(co.Key, "command="+a.commandLine("resolve", arg), "source="+f.source, "index-url="+f.indexURL,
		"extra-index-url="+strings.Join(f.extraIndexURL, " "), fmt.Sprintf("platform=%s cuda=%d json=%v quiet=%v max-rounds=%d verify=%v check=%s",
			a.opts.platform, a.opts.cuda, a.opts.json, a.opts.quiet, f.maxRounds, !f.noVerify, f.check))
	// The host line: the driver, a Jetson's release and device tree.
	for _, p := range []string{platform.DriverFile, platform.TegraReleaseFile, platform.CompatibleFile, platform.ProductNameFile} {
		co.Inputs = append(co.Inputs, filepath.Join("/", a.opts.root, p))
	}
	return &co, nil
}

// checkUsage refuses flags that contradict each other or cannot hold.
func (f resolveFlags) checkUsage() error {
	if f.siteDir != "" && f.python != "" {
		return usageError("--python and --site-packages exclude each other")
	}
	if _, err := resolver.ParseSource(f.source); err != nil {
		return usageError("--%v", err)
	}
	if f.check != "" && f.noVerify {
		return usageError("--check and --no-verify exclude each other")
	}
	if f.checkTime <= 0 {
		return usageError("--check-timeout must be positive, not %s", f.checkTime)
	}
	return nil
}

// resolveExit is resolve's exit status for what it did.
func (a *app) resolveExit(ctx context.Context, target *resolver.Target, out *resolver.Outcome) error {
	switch {
	case out.OK && (target.Kind == resolver.KindDir || target.Kind == resolver.KindFile):
		if has, err := scan.HasObject(ctx, target.Path); err != nil || !has {
			fmt.Fprintf(a.stderr, "warning: %s holds no loadable ELF object: nothing was checked\n", target.Path)
			return exitWith(exitError)
		}
		return nil
	case out.OK:
		return nil
	case out.Stopped == resolver.StopNotConfirmed:
		return exitWith(exitError)
	case len(out.Unresolved) == 0 && out.Verify != nil && !out.Verify.OK && !out.Verify.BlamesLibrary():
		// It loads, and fails for another reason than a library.
		return exitWith(exitError)
	}
	return exitWith(exitMissing)
}

// packageIndex is the index wheels come from: pip's configuration for the
// target's environment, with --index-url and --extra-index-url over it as
// pip takes them. nil when none is configured (pip's default index does not
// count: nothing asked for it).
func (a *app) packageIndex(f resolveFlags, t *resolver.Target) (*pypi.Client, error) {
	if resolver.Source(f.source) == resolver.SourceNVIDIA {
		return nil, nil
	}
	var cfg pypi.PipConfig
	if t.Python != nil {
		cfg.Prefix = t.Python.Prefix
	}
	ix, err := pypi.PipIndexes(cfg)
	if err != nil {
		return nil, err
	}
	configured := len(ix.Sources) > 0
	if f.indexURL != "" {
		ix.Index, configured = f.indexURL, true
	}
	if len(f.extraIndexURL) > 0 {
		ix.Extra, configured = f.extraIndexURL, true
	}
	if !configured || len(ix.All()) == 0 {
		if resolver.Source(f.source) == resolver.SourcePyPI {
			return nil, usageError("--source pypi: no package index is configured (pip's configuration names none, or says no-index): pass --index-url URL or set PIP_INDEX_URL")
		}
		return nil, nil
	}
	a.logger.Debug("package index", "indexes", len(ix.All()), "from", strings.Join(ix.Sources, ", "))
	return pypi.NewClient(pypi.Options{Indexes: ix.All(), AllowHTTP: f.allowHTTP, Logger: a.logger})
}

func (a *app) printResolve(ctx context.Context, w io.Writer, out *resolver.Outcome) error {
	if a.opts.json {
		// With the machine it ran on, the document is a plan that
		// 'cudadeps apply' can check another machine against.
		return writeJSON(w, schemaResolve, plan.NewDocument(ctx, out, a.opts.root))
	}
	renderResolve(w, out, a.commandLine, a.planShown)
	if out.Coverage != nil {
		fmt.Fprintln(w)
		renderCoverage(w, out.Coverage, out.Coverage.Device, newPainter(a.stdout))
	}
	return nil
}

// logRounds walks the rounds at debug level, for -v.
func logRounds(a *app, o *resolver.Outcome) {
	for _, r := range o.Rounds {
		steps := 0
		if r.Plan != nil {
			steps = len(r.Plan.Steps)
		}
		a.logger.Debug("round", "n", r.N, "missing", len(r.Missing), "archives", steps, "installed", len(r.Installed), "placed", len(r.Placed))
		if v := r.Verify; v != nil {
			a.logger.Debug("verify", "command", strings.Join(v.Command, " "), "ok", v.OK)
			for _, p := range v.Probes {
				a.logger.Debug("probe", "name", p.Name, "command", p.Reproduce, "ok", p.OK, "exit", p.ExitCode)
			}
		}
	}
	a.logger.Debug("resolve done", "ok", o.OK, "stopped", o.Stopped)
}

// terminal is where a question can be put: stdin must be a terminal (the
// answer comes from there), and the question is written where the user
// sees it: stderr when it is a terminal, else the controlling terminal
// (resolve ... 2> log), else stdout when it is one. close releases it.
func (a *app) terminal() (w io.Writer, close func(), err error) {
	if !tty.Is(a.stdin) {
		return nil, nil, errors.New("stdin is not a terminal")
	}
	if tty.Is(a.stderr) {
		return a.stderr, func() {}, nil
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		return tty, func() { tty.Close() }, nil
	}
	if tty.Is(a.stdout) {
		return a.stdout, func() {}, nil
	}
	return nil, nil, errors.New("no terminal to show the question on (stderr and stdout are not terminals, and /dev/tty cannot be opened)")
}

// confirmPlan shows each round's plan on stderr, then asks; with --yes it
// only shows it. Where nobody can answer it refuses, as apt-get does.
func (a *app) confirmPlan(prefix *activation.Prefix, client *fetch.Client, yes bool) func(*resolver.Round) (bool, error) {
	return func(r *resolver.Round) (bool, error) {
		p := r.Plan
		a.logger.Debug("plan", "archives", len(p.Steps), "download", humansize.Bytes(p.Bytes()))
		if !a.opts.quiet || !yes {
			renderPlan(a.stderr, r, prefix)
		}
		if yes {
			return true, nil
		}
		show := func(w io.Writer) { renderPlan(w, r, prefix) }
		ok, err := a.ask(planQuestion(p, prefix.Dir()), "rerun with --yes to proceed, or --dry-run to only see the plan", show)
		if ok && tty.Is(a.stdout) {
			if a.planShown == nil {
				a.planShown = map[int]bool{}
			}
			a.planShown[r.N] = true
		}
		return ok, err
	}
}

// ask puts a yes/no question on the terminal and reads the answer (no
// unless y or yes). show, when set, writes what the question is about; it
// is written there too when the question does not go to stderr, which
// already has it. When nobody can answer, that is a usage error whose hint
// says what to do instead.
func (a *app) ask(question, hint string, show func(io.Writer)) (bool, error) {
	w, closeTerm, err := a.terminal()
	if err != nil {
		return false, usageError("not asking %q: %v; %s", question, err, hint)
	}
	defer closeTerm()
	if w != a.stderr && show != nil {
		show(w)
	}
	fmt.Fprintf(w, "%s [y/N] ", question)
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && err != io.EOF {
		return false, err
	}
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes", nil
}

func planQuestion(p *resolver.Plan, storeDir string) string {
	n, bytes := p.Downloads()
	if n == 0 {
		return "Place the libraries of the store for the loader?"
	}
	return fmt.Sprintf("Download %d archive(s), %s, into %s, and place their libraries for the loader?", n, humansize.Bytes(bytes), storeDir)
}

// renderPlan prints what a round will fetch, from where, into which store
// entry, and where each library will be placed for the loader.
func renderPlan(w io.Writer, r *resolver.Round, prefix *activation.Prefix) {
	p := r.Plan
	fmt.Fprintf(w, "Plan (%s", p.Platform)
	if p.CUDAMajor != 0 {
		fmt.Fprintf(w, ", CUDA %d", p.CUDAMajor)
	}
	if p.Host != "" {
		fmt.Fprintf(w, ") for %s\n", p.Host)
	} else {
		fmt.Fprintln(w, "):")
	}
	for _, j := range p.JetPack {
		fmt.Fprintf(w, "  %s\n", j)
	}
	for _, u := range p.Undeclared {
		fmt.Fprintf(w, "  %s\n", u)
	}
	for _, s := range p.Steps {
		if s.Source == resolver.SourcePyPI {
			fmt.Fprintf(w, "  %s %s (wheel %s, from %s) for %s\n", s.Project, s.Version, s.Filename, s.Index, strings.Join(s.Provides, ", "))
		} else {
			fmt.Fprintf(w, "  %s %s%s for %s\n", s.Component, s.Version, variantNote(s.CUDAVariant), strings.Join(s.Provides, ", "))
		}
		switch {
		case s.Installed:
			fmt.Fprintf(w, "      already in the store\n")
		case s.Cached:
			fmt.Fprintf(w, "      %s  in the download cache (from %s)\n", humansize.Bytes(s.Size), s.URL)
		default:
			fmt.Fprintf(w, "      %s  %s\n", humansize.Bytes(s.Size), s.URL)
		}
		if dir, err := prefix.Store().EntryDir(s.Key()); err == nil {
			fmt.Fprintf(w, "      → %s\n", dir)
		}
		for _, line := range placementLines(r, s, scriptLabel(prefix)) {
			fmt.Fprintf(w, "      %s\n", line)
		}
	}
	n, bytes := p.Downloads()
	fmt.Fprintf(w, "Total: %d archive(s) to download, %s.\n", n, humansize.Bytes(bytes))
}

// scriptLabel names how objects that search no writable directory are
// served: the activation script, or under --root the root's
// ld.so.conf.d entry when its ldconfig runs here.
func scriptLabel(prefix *activation.Prefix) string {
	if prefix.Root() == "" {
		return "LD_LIBRARY_PATH via " + prefix.EnvScript()
	}
	return activation.ConfFile(prefix.Root()) + " and the root's ld.so.cache (else LD_LIBRARY_PATH via " + prefix.EnvScript() + ")"
}

func variantNote(v string) string {
	if v == "" {
		return ""
	}
	return " (" + v + ")"
}

// unwritableHint says what to do when err is a failure to create or write
// where the store or the download cache lies by default (a read-only or
// odd HOME): name other directories. "" for any other error.
func (a *app) unwritableHint(err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) || !(errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EROFS)) {
		return ""
	}
	within := func(dir string) bool {
		return dir != "" && (pe.Path == dir || strings.HasPrefix(dir, pe.Path+"/") || strings.HasPrefix(pe.Path, dir+"/"))
	}
	if store, serr := activation.DefaultDir(); serr == nil && a.opts.prefix == "" && within(store) {
		return fmt.Sprintf("the store defaults to %s ($XDG_DATA_HOME or ~/.local/share), which cannot be written: pass --prefix DIR or set CUDADEPS_PREFIX", store)
	}
	if cache, cerr := fetch.DefaultCacheDir(); cerr == nil && within(cache) {
		return fmt.Sprintf("the download cache defaults to %s ($XDG_CACHE_HOME or ~/.cache), which cannot be written: pass --cache DIR or set XDG_CACHE_HOME", cache)
	}
	return ""
}
