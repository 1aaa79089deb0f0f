package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/mirror"
	"github.com/cudadeps/cudadeps/fleet/plan"
	"github.com/cudadeps/cudadeps/fleet/registry"
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/humansize"
	"github.com/cudadeps/cudadeps/resolver"
)

const (
	schemaMirror = "cudadeps.mirror/v1"
	schemaPush   = "cudadeps.mirror.push/v1"
)

type mirrorFlags struct {
	to        string
	plan      string
	target    string
	python    string
	siteDir   string
	allowHTTP bool
	cacheDir  string
}

func (a *app) mirrorCommand() *cobra.Command {
	var f mirrorFlags
	cmd := &cobra.Command{
		Use:   "mirror DIR | --to oci://HOST/REPOSITORY:TAG",
		Short: "Put exactly the archives a plan needs into a directory laid out as NVIDIA's redist tree, or push them to an OCI registry, to serve a cluster",
		Long: `mirror downloads and verifies the archives (and wheels) that a plan needs and
writes them into DIR as NVIDIA lays them out, with their manifests, so that
any static HTTP server, object store or shared file system serving DIR can
stand in for NVIDIA:

  DIR/<relative path>                      each archive: --mirror URL fetches URL/<relative path>
  DIR/<product>/redist/redistrib_<v>.json  its manifest, listed in DIR/<product>/redist/index.html
                                           (what catalog update --mirror URL reads)
  DIR/simple/<project>/<wheel>             each wheel, in a PEP 503 index (--index-url URL/simple/)

With --to oci://HOST/REPOSITORY:TAG it pushes them to an OCI registry
instead (Harbor, Artifactory, Zot, a cloud registry, docker-registry): each
archive and wheel becomes the blob of its own sha256, sent only when the
registry lacks it, with the plan and the catalog entries of its archives,
under one manifest for the plan's platform and target; the tag's image
index lists it beside the plans pushed there for other platforms and
targets. Logins come from Docker's configuration (docker login, DOCKER_CONFIG,
credential helpers); a private certificate authority from SSL_CERT_FILE.
Nodes then run 'cudadeps apply oci://HOST/REPOSITORY:TAG'.

The plan is the JSON of 'cudadeps resolve TARGET --dry-run --json' (--plan),
or mirror makes it itself (--target TARGET). Files already in DIR are
verified, not downloaded again; running mirror for several plans into one
DIR merges them. Other machines then run 'cudadeps apply PLAN --mirror URL'.

Archives come from the mirror in force (--mirror, CUDADEPS_MIRROR, the config
file) when it has them, else from the plan's URLs. Exit status: 0 done, 1 error, 2 usage.`,
		Example: `  cudadeps resolve torch --dry-run --json > plan.json
  cudadeps mirror /srv/cudadeps-mirror --plan plan.json
  cudadeps mirror /srv/cudadeps-mirror --target torch --json
  cudadeps mirror --plan plan.json --to oci://registry.internal/cudadeps/torch:2.11-cu13`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runMirror(cmd, args, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.to, "to", "", "push to this OCI registry `REFERENCE` (oci://HOST/REPOSITORY:TAG) instead of writing DIR")
	fl.StringVar(&f.plan, "plan", "", "the plan `FILE` (resolve --dry-run --json; - for stdin)")
	fl.StringVar(&f.target, "target", "", "make the plan for `TARGET` here, as resolve --dry-run does")
	fl.StringVar(&f.python, "python", "", "with --target: the Python `INTERPRETER` whose environment holds it")
	fl.StringVar(&f.siteDir, "site-packages", "", "with --target: read distributions from this `DIR`")
	fl.BoolVar(&f.allowHTTP, "allow-http", false, "allow plain http:// sources other than 127.0.0.1")
	fl.StringVar(&f.cacheDir, "cache", "", "download cache `DIR` (default: $XDG_CACHE_HOME/cudadeps)")
	_ = cmd.MarkFlagFilename("plan", "json")
	a.opts.addLoaderFlags(cmd)
	a.opts.addCatalogFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

func (a *app) runMirror(cmd *cobra.Command, args []string, f mirrorFlags) error {
	ctx := cmd.Context()
	if (len(args) == 1) == (f.to != "") {
		return usageError("mirror needs one of DIR and --to oci://HOST/REPOSITORY:TAG")
	}
	if (f.plan == "") == (f.target == "") {
		return usageError("mirror needs one of --plan FILE and --target TARGET")
	}
	if f.plan != "" && (f.python != "" || f.siteDir != "") {
		return usageError("--python and --site-packages only matter with --target")
	}
	cat, err := a.loadCatalog(ctx)
	if err != nil {
		return err
	}
	var p *plan.Plan
	if f.plan != "" {
		if p, err = plan.Read(f.plan, a.stdin); err != nil {
			return err
		}
	} else {
		if f.siteDir != "" && f.python != "" {
			return usageError("--python and --site-packages exclude each other")
		}
		t, err := resolver.FindTarget(ctx, f.target, resolver.TargetOptions{Python: f.python, SiteDir: f.siteDir, Root: a.opts.root, Cache: factcache.Open()})
		if err != nil {
			return err
		}
		out, err := resolver.Resolve(ctx, t, resolver.Options{Loader: a.loaderOptions(cmd), Catalog: cat,
			Platform: string(a.opts.platform), CUDAMajor: int(a.opts.cuda), DryRun: true, Logger: a.logger})
		if err != nil {
			return err
		}
		if p, err = plan.FromOutcome(plan.NewDocument(ctx, out, a.opts.root), "the plan for "+f.target); err != nil {
			return err
		}
	}
	client, err := a.newClient(f.cacheDir, f.allowHTTP)
	if err != nil {
		return err
	}
	if f.to != "" {
		return a.push(ctx, p, f, cat, client)
	}
	res, err := mirror.Write(ctx, p.Steps(), mirror.Options{Dir: args[0], Catalog: cat, Client: client, Logger: a.logger})
	if err != nil {
		return err
	}
	if a.opts.json {
		return writeJSON(a.stdout, schemaMirror, res)
	}
	for _, fl := range append(res.Archives, res.Wheels...) {
		state := "downloaded"
		if fl.Present {
			state = "present, verified"
		}
		fmt.Fprintf(a.stdout, "%s  %s  (%s, %s)\n", fl.Step, fl.Path, humansize.Bytes(fl.Step.Size), state)
	}
	fmt.Fprintf(a.stdout, "%d archive(s), %d wheel(s) in %s; %s downloaded; %d manifest(s) and %d index page(s) written\n",
		len(res.Archives), len(res.Wheels), res.Dir, humansize.Bytes(res.Bytes), len(res.Manifests), len(res.Indexes))
	if len(res.Archives)+len(res.Wheels) == 0 {
		fmt.Fprintln(a.stdout, "the plan takes no archive: nothing to mirror")
	}
	return nil
}

// push sends the plan with what it takes to the registry f.to names.
func (a *app) push(ctx context.Context, p *plan.Plan, f mirrorFlags, cat *catalog.Catalog, client *fetch.Client) error {
	rem, err := a.openRegistry(f.to, f.allowHTTP)
	if err != nil {
		return err
	}
	res, err := rem.Push(ctx, p, registry.PushOptions{Catalog: cat, Client: client})
	if err != nil {
		return err
	}
	if a.opts.json {
		return writeJSON(a.stdout, schemaPush, res)
	}
	for _, fl := range res.Files {
		state := "in the registry already"
		if fl.Uploaded {
			state = "uploaded"
		}
		fmt.Fprintf(a.stdout, "%s  %s  (%s, %s)\n", fl.Name, fl.Digest, humansize.Bytes(fl.Size), state)
	}
	fmt.Fprintf(a.stdout, "pushed %s for %s, %s: manifest %s; %s uploaded\n", res.Reference, res.Target.Name, res.Platform, res.Manifest.Digest, humansize.Bytes(res.Uploaded))
	for _, e := range res.Platforms {
		fmt.Fprintf(a.stdout, "  the tag serves %s on %s (CUDA %d)\n", e.Target, e.Platform, e.CUDAMajor)
	}
	return nil
}
