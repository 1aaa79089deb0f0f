package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/plan"
	"github.com/cudadeps/cudadeps/resolver"
)

const schemaApply = "cudadeps.apply/v1"

func (a *app) applyCommand() *cobra.Command {
	var f resolveFlags
	cmd := &cobra.Command{
		Use:   "apply PLAN [TARGET]",
		Short: "Carry out on this machine a plan made on another, downloading only from a mirror",
		Long: `apply runs a plan made on another machine ('cudadeps resolve TARGET --json',
with or without --dry-run) on this one, downloading only from the mirror
(--mirror URL, CUDADEPS_MIRROR or the config file), which 'cudadeps mirror'
fills.

It first checks that this machine matches what the plan depends on: the
target (its kind and name; for a Python distribution its version and the
versions of the required distributions the plan names), the machine, a
glibc no older than the plan's, and the NVIDIA platform. Each difference is
named and nothing is changed. It then resolves as resolve --yes does, with
the plan's platform and CUDA major, and admits each round only when it takes
the plan's archives, the same sha256, and nothing else.

TARGET defaults to the plan's (its name, or its path); give it for the same
directory or file at another path. A plan made with --dry-run lists the first
round only: where the libraries it installs need more, apply refuses; make the
plan with a resolve that ran (resolve TARGET --yes --json) to list every round.

Exit status: 0 when everything loads, 3 when something is still missing, 1
when this machine differs from the plan's or on errors, 2 on usage errors.`,
		Example: `  cudadeps apply plan.json --mirror https://mirror.internal/cudadeps/
  CUDADEPS_MIRROR=file:///shared/cudadeps-mirror cudadeps apply plan.json --json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runApply(cmd, args, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.python, "python", "", "the Python `INTERPRETER` whose environment holds TARGET (default: the active environment's python3)")
	fl.StringVar(&f.siteDir, "site-packages", "", "read distributions from this `DIR` without running an interpreter (no import check)")
	fl.BoolVar(&f.copy, "copy", false, "place copies instead of symbolic links into the store")
	fl.BoolVar(&f.noVerify, "no-verify", false, "do not import the package to check the result")
	fl.IntVar(&f.maxRounds, "max-rounds", 8, "give up after `N` rounds")
	fl.BoolVar(&f.allowHTTP, "allow-http", false, "allow a plain http:// mirror other than 127.0.0.1")
	fl.StringVar(&f.cacheDir, "cache", "", "download cache `DIR` (default: $XDG_CACHE_HOME/cudadeps)")
	a.opts.addLoaderFlags(cmd)
	a.opts.addCatalogFlags(cmd)
	a.opts.addStoreFlags(cmd)
	a.opts.addLimitFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

func (a *app) runApply(cmd *cobra.Command, args []string, f resolveFlags) error {
	ctx := cmd.Context()
	if a.opts.mirror == "" {
		return usageError("apply downloads only from a mirror: give --mirror URL (or set CUDADEPS_MIRROR)")
	}
	if cmd.Flags().Changed("platform") || cmd.Flags().Changed("cuda") {
		return usageError("apply takes the platform and CUDA major from the plan")
	}
	if f.siteDir != "" && f.python != "" {
		return usageError("--python and --site-packages exclude each other")
	}
	p, err := plan.Read(args[0], a.stdin)
	if err != nil {
		return err
	}
	arg := applyTargetArg(p, args)
	target, err := resolver.FindTarget(ctx, arg, resolver.TargetOptions{Python: f.python, SiteDir: f.siteDir, Root: a.opts.root, Cache: factcache.Open()})
	if err != nil {
		return err
	}
	cat, err := a.loadCatalog(ctx)
	if err != nil {
		return err
	}
	prefix, client, err := a.openPrefix(f.cacheDir, f.allowHTTP)
	if err != nil {
		return err
	}
	if err := a.recoverPrefix(ctx, prefix); err != nil {
		return err
	}
	opts := resolver.Options{Loader: a.loaderOptions(cmd), Catalog: cat, Prefix: prefix, Client: client,
		Copy: f.copy, Verify: !f.noVerify, MaxRounds: f.maxRounds, Logger: a.logger, Confirm: a.confirmPlan(prefix, client, true)}
	res, err := p.Apply(ctx, target, plan.ApplyOptions{Resolve: opts, Root: a.opts.root, AllowHTTP: f.allowHTTP})
	var refused *plan.RefusedError
	if errors.As(err, &refused) {
		return a.reportRefused(p, res, refused, arg)
	}
	if err != nil {
		return err
	}
	out := res.Outcome
	logRounds(a, out)
	if a.opts.json {
		if err := writeJSON(a.stdout, schemaApply, res); err != nil {
			return err
		}
	} else {
		renderResolve(a.stdout, out, a.commandLine, nil)
		if len(res.Unused) > 0 {
			fmt.Fprintf(a.stdout, "Not needed here: %s\n", strings.Join(res.Unused, ", "))
		}
	}
	if out.OK {
		return nil
	}
	return exitWith(exitMissing)
}

// applyTargetArg is the target to apply the plan to: the one named on the
// command line, else the plan's (its path when it has one).
func applyTargetArg(p *plan.Plan, args []string) string {
	if len(args) == 2 {
		return args[1]
	}
	if p.Target.Path != "" {
		return p.Target.Path
	}
	return p.Target.Name
}

// reportRefused says why the plan does not hold here, and exits 1.
func (a *app) reportRefused(p *plan.Plan, res *plan.Applied, refused *plan.RefusedError, arg string) error {
	if a.opts.json {
		if err := writeJSON(a.stdout, schemaApply, res); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stderr, "cudadeps: %s does not hold on this machine:\n", p.File)
	for _, d := range refused.Differences {
		fmt.Fprintf(a.stderr, "  %s\n", d)
	}
	if placedAny(res.Outcome) {
		fmt.Fprintf(a.stderr, "what the rounds before placed stays; %s removes it\n", a.commandLine("undo", arg))
	}
	return exitWith(exitError)
}

// placedAny reports whether a round of out placed a file.
func placedAny(out *resolver.Outcome) bool {
	if out == nil {
		return false
	}
	for _, r := range out.Rounds {
		if len(r.Placed) > 0 {
			return true
		}
	}
	return false
}
