package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/plan"
	"github.com/cudadeps/cudadeps/fleet/registry"
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/resolver"
)

const schemaApply = "cudadeps.apply/v1"

func (a *app) applyCommand() *cobra.Command {
	var f resolveFlags
	cmd := &cobra.Command{
		Use:   "apply PLAN|oci://HOST/REPOSITORY:TAG [TARGET]",
		Short: "Carry out on this machine a plan made on another, downloading only from a mirror or a registry",
		Long: `apply runs a plan made on another machine ('cudadeps resolve TARGET --json',
with or without --dry-run) on this one, downloading only from the mirror
(--mirror URL, CUDADEPS_MIRROR or the config file), which 'cudadeps mirror'
fills.

Given oci://HOST/REPOSITORY:TAG instead of a plan file, it reads the plan
for this machine's platform from the registry ('cudadeps mirror --to' pushed
it), with the catalog entries of its archives, and brings every archive and
wheel it takes into the download cache first: each blob verified by its
digest, resumed where a killed run stopped, fetched once on this machine
however many runs pull it at once. Nothing comes from NVIDIA or a package
index. Logins come from Docker's configuration (~/.docker/config.json,
DOCKER_CONFIG, credential helpers); a private certificate authority from
SSL_CERT_FILE; HTTPS_PROXY is honoured; plain HTTP only on 127.0.0.1 unless
--allow-http. Where the tag holds plans for several targets on this
platform, TARGET names the one to apply.

It first checks that this machine matches what the plan depends on: the
target (its kind and name; for a Python distribution its version and the
versions of the required distributions the plan names), the machine, a
glibc no older than the plan's, and the NVIDIA platform. Each difference is
named and nothing is changed (nor downloaded). It then resolves as resolve
--yes does, with the plan's platform and CUDA major, and admits each round
only when it takes the plan's archives, the same sha256, and nothing else.

TARGET defaults to the plan's (its name, or its path); give it for the same
directory or file at another path. A plan made with --dry-run lists the first
round only: where the libraries it installs need more, apply refuses; make the
plan with a resolve that ran (resolve TARGET --yes --json) to list every round.

Exit status: 0 when everything loads, 3 when something is still missing, 1
when this machine differs from the plan's or on errors, 2 on usage errors.`,
		Example: `  cudadeps apply plan.json --mirror https://mirror.internal/cudadeps/
  CUDADEPS_MIRROR=file:///shared/cudadeps-mirror cudadeps apply plan.json --json
  cudadeps apply oci://registry.internal/cudadeps/torch:2.11-cu13 --python /opt/venv/bin/python`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runApply(cmd, args, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.python, "python", "", "the Python `INTERPRETER` whose environment holds TARGET (default: the active environment's python3; with --root, the root's own, and one inside the root is read, never run)")
	fl.StringVar(&f.siteDir, "site-packages", "", "read distributions from this `DIR` without running an interpreter (no import check)")
	fl.BoolVar(&f.copy, "copy", false, "place copies instead of symbolic links into the store")
	fl.BoolVar(&f.noVerify, "no-verify", false, "do not import the package to check the result")
	fl.IntVar(&f.maxRounds, "max-rounds", 8, "give up after `N` rounds")
	fl.BoolVar(&f.allowHTTP, "allow-http", false, "allow a plain http:// mirror or registry other than 127.0.0.1")
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
	if cmd.Flags().Changed("platform") || cmd.Flags().Changed("cuda") {
		return usageError("apply takes the platform and CUDA major from the plan")
	}
	if f.siteDir != "" && f.python != "" {
		return usageError("--python and --site-packages exclude each other")
	}
	if registry.IsReference(args[0]) {
		return a.applyFromRegistry(cmd, args, f)
	}
	switch m := string(a.opts.mirror); {
	case m == "":
		return usageError("apply downloads only from a mirror: give --mirror URL (or set CUDADEPS_MIRROR)")
	case registry.IsReference(m):
		return usageError("a registry serves its plans with their archives: cudadeps apply %s:TAG [TARGET]", strings.TrimSuffix(m, "/"))
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
	prefix, client, err := a.openPrefix(f.cacheDir, f.allowHTTP)
	if err != nil {
		return err
	}
	return a.carryOut(cmd, p, target, arg, prefix, client, f, nil)
}

// pulledJSON is what apply oci://... adds to apply's JSON document.
type pulledJSON struct {
	*plan.Applied
	Artifact *registry.Artifact `json:"artifact"`
	Pulled   *registry.Pulled   `json:"pulled"`
}

// applyFromRegistry reads this machine's plan from the registry, checks
// that it holds here before anything is downloaded, pulls what it takes
// into the download cache and carries it out from there.
func (a *app) applyFromRegistry(cmd *cobra.Command, args []string, f resolveFlags) error {
	ctx := cmd.Context()
	rem, err := a.openRegistry(args[0], f.allowHTTP)
	if err != nil {
		return err
	}
	sel := registry.Select{}
	if len(args) == 2 {
		sel.Target = args[1]
	}
	art, err := rem.Read(ctx, sel)
	if err != nil {
		return err
	}
	p := art.Plan
	arg := applyTargetArg(p, args)
	target, err := resolver.FindTarget(ctx, arg, resolver.TargetOptions{Python: f.python, SiteDir: f.siteDir})
	if err != nil {
		return err
	}
	if d := p.Differences(ctx, target, a.opts.root); len(d) > 0 {
		res := &plan.Applied{Plan: p.File, Mirror: args[0], Differences: d}
		return a.reportRefused(p, pulledJSON{Applied: res, Artifact: art}, &plan.RefusedError{File: p.File, Differences: d}, res, arg)
	}
	prefix, err := activation.Open(a.opts.prefix)
	if err != nil {
		return err
	}
	client, err := a.clientFor(rem, f.cacheDir, f.allowHTTP)
	if err != nil {
		return err
	}
	pulled, err := art.Pull(ctx, registry.PullOptions{Client: client, Store: prefix.Store()})
	if err != nil {
		return err
	}
	a.logger.Debug("pulled", "reference", art.Reference, "files", len(pulled.Files), "spared", len(pulled.Spared), "mirror", pulled.Mirror)
	if !a.opts.json {
		fmt.Fprintf(a.stdout, "Pulled %s: %d file(s) in the download cache, verified", art.Reference, len(pulled.Files))
		if len(pulled.Spared) > 0 {
			fmt.Fprintf(a.stdout, ", %d in the store already", len(pulled.Spared))
		}
		fmt.Fprintf(a.stdout, "; the plan is applied from there.\n\n")
	}
	a.opts.mirror = mirrorFlag(pulled.Mirror)
	if pulled.Catalog != "" {
		a.opts.catalogs = append(a.opts.catalogs, pulled.Catalog)
	}
	return a.carryOut(cmd, p, target, arg, prefix, client, f, func(res *plan.Applied) any {
		return pulledJSON{Applied: res, Artifact: art, Pulled: pulled}
	})
}

// carryOut applies p to target from the mirror in force and reports;
// document, when set, is the JSON document for apply's result.
func (a *app) carryOut(cmd *cobra.Command, p *plan.Plan, target *resolver.Target, arg string, prefix *activation.Prefix, client *fetch.Client, f resolveFlags, document func(*plan.Applied) any) error {
	ctx := cmd.Context()
	if document == nil {
		document = func(res *plan.Applied) any { return res }
	}
	cat, err := a.loadCatalog(ctx)
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
		return a.reportRefused(p, document(res), refused, res, arg)
	}
	if err != nil {
		return err
	}
	out := res.Outcome
	logRounds(a, out)
	if a.opts.json {
		if err := writeJSON(a.stdout, schemaApply, document(res)); err != nil {
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

// reportRefused says why the plan does not hold here, and exits 1; doc is
// the JSON document to print (res, or res with more).
func (a *app) reportRefused(p *plan.Plan, doc any, refused *plan.RefusedError, res *plan.Applied, arg string) error {
	if a.opts.json {
		if err := writeJSON(a.stdout, schemaApply, doc); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stderr, "cudadeps: %s does not hold on this machine:\n", p.File)
	for _, d := range refused.Differences {
		fmt.Fprintf(a.stderr, "  %s\n", d)
	}
	if res != nil && placedAny(res.Outcome) {
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
