package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/ldso"
	"github.com/cudadeps/cudadeps/resolver"
)

type resolveFlags struct {
	python    string
	siteDir   string
	dryRun    bool
	yes       bool
	copy      bool
	noVerify  bool
	maxRounds int
	allowHTTP bool
	cacheDir  string
}

func (a *app) resolveCommand() *cobra.Command {
	var f resolveFlags
	cmd := &cobra.Command{
		Use:   "resolve TARGET",
		Short: "Fetch and activate every library TARGET needs until it loads",
		Long: `resolve makes TARGET load: it scans what the dynamic loader would not find,
matches each missing soname against the catalog of NVIDIA's redistributable
archives, downloads and verifies them into the store (--prefix), and makes the
loader find them without root, then scans again (a library just installed may
need another) until nothing is missing or no archive helps.

TARGET is an installed Python distribution (torch, cupy-cuda13x), found with
the interpreter of the active environment (--python) from its RECORD; or a
directory or ELF file; or a .whl file, which is only planned (nothing to
install it into).

Activation, without root and without editing any binary: the libraries are
linked into a directory the loader already searches for the objects that need
them (their RPATH or RUNPATH, e.g. site-packages/nvidia/cu13/lib), created if
need be, so the import works in any new shell. Objects that search no such
directory get PREFIX/env.sh, which sets LD_LIBRARY_PATH: source it. Every file
placed is recorded; 'cudadeps undo TARGET' removes exactly those.

For a Python target, the package is then imported in a new interpreter
(--no-verify to skip): a library it dlopen's at run time and cannot open
feeds the loop like any other.

Exit status: 0 when everything loads, 3 when something is still missing (or,
with --dry-run, would be), 1 on errors, 2 on usage errors.

Examples:
  cudadeps resolve torch --dry-run
  cudadeps resolve torch --yes
  cudadeps resolve cupy-cuda13x --python ~/venv/bin/python --json
  cudadeps resolve torch --mirror https://mirror.internal/nvidia/ --yes
  cudadeps resolve torch --site-packages /srv/arm64/venv/lib/python3.12/site-packages --root /srv/arm64 --dry-run`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runResolve(cmd, args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.python, "python", "", "the Python interpreter whose environment holds TARGET (default: the active environment's python3)")
	fl.StringVar(&f.siteDir, "site-packages", "", "read distributions from this `DIR` without running an interpreter (no import check)")
	fl.BoolVarP(&f.dryRun, "dry-run", "n", false, "print the plan; change nothing on disk")
	fl.BoolVarP(&f.yes, "yes", "y", false, "do not ask before downloading")
	fl.BoolVar(&f.copy, "copy", false, "place copies instead of symbolic links into the store")
	fl.BoolVar(&f.noVerify, "no-verify", false, "do not import the package to check the result")
	fl.IntVar(&f.maxRounds, "max-rounds", 8, "give up after `N` rounds")
	fl.BoolVar(&f.allowHTTP, "allow-http", false, "allow plain http:// mirrors other than 127.0.0.1")
	fl.StringVar(&f.cacheDir, "cache", "", "download cache `DIR` (default: $XDG_CACHE_HOME/cudadeps)")
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
	return fetch.DefaultStoreDir()
}

func (a *app) runResolve(cmd *cobra.Command, arg string, f resolveFlags) error {
	ctx := cmd.Context()
	if f.siteDir != "" && f.python != "" {
		return usageError("--python and --site-packages exclude each other")
	}
	if a.opts.platform != "" && !catalog.ValidPlatform(a.opts.platform) {
		return usageError("--platform %q: want one of %s", a.opts.platform, strings.Join(catalog.Platforms(), ", "))
	}
	target, err := resolver.FindTarget(ctx, arg, resolver.TargetOptions{Python: f.python, SiteDir: f.siteDir})
	if err != nil {
		return err
	}
	cat, err := catalog.Load(ctx, catalog.LoadOptions{Extra: a.opts.catalogs, Mirror: a.opts.mirror})
	if err != nil {
		return err
	}
	prefix, err := a.prefix()
	if err != nil {
		return err
	}
	opts := resolver.Options{
		Loader:     a.loaderOptions(cmd),
		WheelMount: "",
		Catalog:    cat,
		Platform:   a.opts.platform,
		CUDAMajor:  a.opts.cuda,
		Prefix:     prefix,
		DryRun:     f.dryRun,
		Copy:       f.copy,
		Verify:     !f.noVerify,
		MaxRounds:  f.maxRounds,
		Logger:     a.logger,
	}
	if !f.dryRun {
		if opts.Store, err = fetch.OpenStore(prefix); err != nil {
			return err
		}
		if opts.Client, err = fetch.NewClient(fetch.Options{CacheDir: f.cacheDir, AllowHTTP: f.allowHTTP, Logger: a.logger, Progress: a.progressWriter(), Limits: a.opts.limits}); err != nil {
			return err
		}
		if !f.yes && !a.opts.json && a.interactive() {
			opts.Confirm = a.confirmPlan(prefix)
		}
	}
	out, err := resolver.Resolve(ctx, target, opts)
	if err != nil {
		return err
	}
	if a.opts.json {
		if err := writeJSON(a.stdout, out); err != nil {
			return err
		}
	} else {
		renderResolve(a.stdout, out)
	}
	if out.OK {
		return nil
	}
	return exitWith(exitMissing)
}

// interactive reports whether the user can be asked a question.
func (a *app) interactive() bool {
	in, ok := a.stdin.(*os.File)
	if !ok {
		return false
	}
	errf, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(errf.Fd()))
}

func (a *app) confirmPlan(prefix string) func(*resolver.Plan) (bool, error) {
	return func(p *resolver.Plan) (bool, error) {
		n := 0
		for _, s := range p.Steps {
			if !s.Installed {
				n++
			}
		}
		if n == 0 {
			return true, nil
		}
		fmt.Fprintf(a.stderr, "Download %d archive(s), %s, into %s? [y/N] ", n, humanBytes(p.Bytes()), prefix)
		line, err := bufio.NewReader(a.stdin).ReadString('\n')
		if err != nil && err != io.EOF {
			return false, err
		}
		ans := strings.ToLower(strings.TrimSpace(line))
		return ans == "y" || ans == "yes", nil
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// renderResolve prints the short human report: what was missing, what was
// installed where, how it was activated, what remains and what to do.
func renderResolve(w io.Writer, o *resolver.Outcome) {
	t := o.Target
	fmt.Fprintf(w, "%s: %s", t.Kind, t.Describe())
	if o.Platform != "" {
		fmt.Fprintf(w, " — %s", o.Platform)
	}
	if o.CUDAMajor != 0 {
		fmt.Fprintf(w, ", CUDA %d", o.CUDAMajor)
	}
	fmt.Fprintln(w)
	for _, r := range o.Rounds {
		if len(r.Missing) == 0 && r.Verify == nil {
			continue
		}
		if len(r.Missing) > 0 {
			fmt.Fprintf(w, "\nRound %d: %d librar%s missing\n", r.N, len(r.Missing), plural(len(r.Missing), "y", "ies"))
		}
		if r.Plan != nil {
			for _, s := range r.Plan.Steps {
				state := humanBytes(s.Size)
				if s.Installed {
					state = "already in the store"
				}
				variant := ""
				if s.CUDAVariant != "" {
					variant = ", " + s.CUDAVariant
				}
				fmt.Fprintf(w, "  %s\n      ← %s %s (%s%s), %s\n", strings.Join(s.Provides, ", "), s.Component, s.Version, s.Platform, variant, state)
				for _, d := range r.Decisions {
					if d.Step != s {
						continue
					}
					for _, p := range d.Placements {
						verb := "link into"
						if p.Create {
							verb = "create and link into"
						}
						fmt.Fprintf(w, "      → %s %s (%s %s)\n", verb, p.HostDir, p.Rule, p.Entry)
					}
					if d.Env != nil {
						fmt.Fprintf(w, "      → LD_LIBRARY_PATH via the activation script, for %s\n", strings.Join(shortList(d.Env.For, 2), ", "))
					}
				}
			}
			for _, u := range r.Plan.Unresolved {
				fmt.Fprintf(w, "  %s: %s\n", u.Soname, u.Reason)
				if u.Advice != "" {
					fmt.Fprintf(w, "      %s\n", u.Advice)
				}
			}
		}
		if len(r.Placed) > 0 {
			fmt.Fprintf(w, "  placed %d file(s)\n", len(r.Placed))
		}
		if v := r.Verify; v != nil {
			status := "ok"
			if !v.OK {
				status = "FAILED"
			}
			fmt.Fprintf(w, "\nImport check: %s → %s\n", strings.Join(v.Command, " "), status)
			if !v.OK && v.Output != "" {
				fmt.Fprintf(w, "%s\n", indent(lastLines(v.Output, 8), "    "))
			}
		}
	}
	for _, v := range o.VersionErrors {
		if !v.Weak {
			fmt.Fprintf(w, "  ! %s\n", v.Message)
		}
	}
	fmt.Fprintln(w)
	switch {
	case o.OK && len(o.Rounds) == 1 && len(o.Rounds[0].Missing) == 0:
		fmt.Fprintln(w, "Nothing is missing: the loader finds everything.")
	case o.OK:
		fmt.Fprintln(w, "Done: the loader now finds everything.")
	case t.Kind == resolver.KindWheel:
		fmt.Fprintln(w, "A wheel is only planned: install it (pip install), then run 'cudadeps resolve' on the installed distribution.")
	case o.DryRun:
		fmt.Fprintln(w, "Dry run: nothing was changed. Run without --dry-run to apply the plan (after installing, another round may find more).")
	default:
		fmt.Fprintf(w, "Not done (%s).\n", o.Stopped)
	}
	if o.Activation.Script != "" {
		fmt.Fprintf(w, "Some objects search no directory you may write: run '. %s' in shells that use them.\n", o.Activation.Script)
	}
	if len(o.Activation.InPlace) > 0 && !o.DryRun {
		fmt.Fprintf(w, "Libraries were linked into: %s\nUndo with: cudadeps undo %s\n", strings.Join(o.Activation.InPlace, ", "), t.Name)
	}
}

func shortList(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	return append(append([]string(nil), list[:n]...), fmt.Sprintf("%d more", len(list)-n))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(s, "\n", "\n"+pre)
}

func (a *app) undoCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "undo [TARGET...]",
		Short: "Remove exactly what resolve placed for TARGET (all targets without one)",
		Long: `undo removes what 'cudadeps resolve' recorded for each TARGET: the links or
copies it placed (only those still as it left them), the directories it
created (once empty), its entries in PREFIX/env.sh, and the store entries it
installed that no other target uses. Files it did not place are never
touched. TARGET is named as it was for resolve (a distribution name or a
path); without TARGET, every recorded target is undone.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix, err := a.prefix()
			if err != nil {
				return err
			}
			store, err := fetch.OpenStore(prefix)
			if err != nil {
				return err
			}
			reps, err := resolver.Undo(cmd.Context(), prefix, store, args, a.logger)
			if err != nil {
				return err
			}
			if a.opts.json {
				return writeJSON(a.stdout, reps)
			}
			if len(reps) == 0 {
				fmt.Fprintln(a.stdout, "Nothing recorded: nothing to undo.")
			}
			for _, r := range reps {
				fmt.Fprintf(a.stdout, "%s: removed %d file(s), %d director%s, %d store entr%s\n", r.Target, len(r.Removed), len(r.Dirs), plural(len(r.Dirs), "y", "ies"), len(r.Store), plural(len(r.Store), "y", "ies"))
				for _, l := range r.Left {
					fmt.Fprintf(a.stdout, "  left %s: changed since it was placed\n", l)
				}
				for _, w := range r.Warnings {
					fmt.Fprintf(a.stdout, "  %s\n", w)
				}
			}
			return nil
		},
	}
	a.opts.addStoreFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}
