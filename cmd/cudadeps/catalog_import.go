package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
	"github.com/cudadeps/cudadeps/platform"
)

// --- validate ---------------------------------------------------------------

// catalogCheck is what validate found in one file.
type catalogCheck struct {
	File       string   `json:"file"`
	OK         bool     `json:"ok"`
	Problems   []string `json:"problems"`
	Components int      `json:"components"`
	Archives   int      `json:"archives"`
	Drivers    int      `json:"drivers"`
}

func (a *app) catalogValidateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate [FILE...]",
		Short: "Check catalog files strictly, each layered over the built-in catalog (no FILE: the built-in one)",
		Long: `validate parses each FILE strictly and layers it over the built-in catalog,
reporting every file's problems in one run. Exit status: 0 when every file
is valid, 1 otherwise.`,
		Example: `  cudadeps catalog validate
  cudadeps catalog validate site.yaml extra.yaml --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := catalog.Parse(catalog.DefaultYAML(), catalog.DefaultName)
			if err != nil {
				return err
			}
			checks := []catalogCheck{countCatalog(catalogCheck{File: catalog.DefaultName, OK: true}, base)}
			if len(args) > 0 {
				checks = checks[:0]
			}
			for _, path := range args {
				checks = append(checks, validateLayer(base, path))
			}
			bad := slices.ContainsFunc(checks, func(c catalogCheck) bool { return !c.OK })
			if a.opts.json {
				err = writeJSON(a.stdout, schemaCatalogCheck, struct {
					OK    bool           `json:"ok"`
					Files []catalogCheck `json:"files"`
				}{!bad, checks})
			} else {
				renderChecks(a, checks)
			}
			if err == nil && bad {
				return exitWith(exitError)
			}
			return err
		},
	}
	a.opts.addJSONFlag(cmd)
	return cmd
}

func validateLayer(base *catalog.Catalog, path string) catalogCheck {
	c := catalogCheck{File: path}
	data, err := catalog.ReadFile(path)
	if err != nil {
		return withProblems(c, err)
	}
	layer, err := catalog.ValidateLayer(base, data, path)
	if err != nil {
		return withProblems(c, err)
	}
	c.OK = true
	return countCatalog(c, layer)
}

// withProblems records each of err's problems (a joined error is several).
func withProblems(c catalogCheck, err error) catalogCheck {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			c.Problems = append(c.Problems, e.Error())
		}
		return c
	}
	c.Problems = append(c.Problems, err.Error())
	return c
}

func countCatalog(c catalogCheck, cat *catalog.Catalog) catalogCheck {
	for _, comp := range cat.Components() {
		for _, r := range comp.Releases {
			c.Archives += len(r.Archives)
		}
	}
	c.Components, c.Drivers = len(cat.Components()), len(cat.Drivers())
	return c
}

func renderChecks(a *app, checks []catalogCheck) {
	paint := newPainter(a.stdout)
	for _, c := range checks {
		if c.OK {
			fmt.Fprintf(a.stdout, "%s: ok: %d components, %d archives, %d driver libraries\n", c.File, c.Components, c.Archives, c.Drivers)
			continue
		}
		for _, p := range c.Problems {
			fmt.Fprintf(a.stdout, "%s: %s: %s\n", c.File, paint.bad("FAIL"), p)
		}
	}
}

// --- import -----------------------------------------------------------------

type importFlags struct {
	output     string
	tableFile  string
	scan       bool
	platforms  platformsFlag
	components []string
	mirror     mirrorFlag
	cacheDir   string
	allowHTTP  bool
}

func (a *app) catalogImportCommand() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "import MANIFEST.json|DIR...",
		Short: "Build a catalog from NVIDIA's redistrib manifests (redistrib_X.json)",
		Long: `import reads NVIDIA's redistrib manifests (files, or every *.json of a
directory) and writes a catalog: each Linux archive with its URL, sha256,
size and the sonames it provides. Those come from the curated soname table
built into cudadeps, or with --scan from the ELF files inside each archive,
which is downloaded (from --mirror when given), verified and unpacked.

Layer the result over the built-in catalog with --catalog FILE. With --json
(and -o FILE) a summary of what was written is printed as JSON.`,
		Example: `  cudadeps catalog import catalog/manifests -o catalog/catalog.yaml
  cudadeps catalog import redistrib_13.0.2.json --component libcublas --platform linux-sbsa -o cublas.yaml --json
  cudadeps catalog import redistrib_13.0.2.json --scan --mirror file:///srv/nvidia -o scanned.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runImport(cmd.Context(), args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.output, "output", "o", "", "write the catalog to `FILE` (default: stdout)")
	fl.StringVar(&f.tableFile, "sonames", "", "use this soname table `FILE` instead of the built-in one")
	fl.BoolVar(&f.scan, "scan", false, "download each archive and record the SONAMEs of the ELF files inside it")
	fl.Var(&f.platforms, "platform", "only this platform (repeatable; default: all)")
	fl.StringArrayVar(&f.components, "component", nil, "only this `COMPONENT` (repeatable; default: all)")
	fl.Var(&f.mirror, "mirror", "with --scan, download from this `URL` + relative path instead of NVIDIA")
	fl.StringVar(&f.cacheDir, "cache", "", "with --scan, keep downloaded archives in `DIR` (default: the user cache directory)")
	fl.BoolVar(&f.allowHTTP, "allow-http", false, "with --scan, allow a plain http:// mirror")
	_ = cmd.RegisterFlagCompletionFunc("platform", cobra.FixedCompletions(platform.All(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("component", a.completeComponents)
	a.opts.addJSONFlag(cmd)
	return cmd
}

func (a *app) runImport(ctx context.Context, args []string, f importFlags) error {
	if !f.scan && (f.mirror != "" || f.cacheDir != "" || f.allowHTTP) {
		return usageError("--mirror, --cache and --allow-http only matter with --scan")
	}
	if a.opts.json && (f.output == "" || f.output == "-") {
		return usageError("--json prints a summary: give the catalog a file with -o FILE")
	}
	manifests, names, err := readManifests(args)
	if err != nil {
		return err
	}
	opts := catalog.ImportOptions{Platforms: f.platforms, Components: f.components, Mirror: string(f.mirror), Logger: a.logger}
	if f.tableFile != "" {
		data, err := catalog.ReadFile(f.tableFile)
		if err != nil {
			return fmt.Errorf("read soname table: %w", err)
		}
		if opts.Table, err = catalog.ParseTable(data, f.tableFile); err != nil {
			return err
		}
	}
	if f.scan {
		if opts.Extract, err = a.scanExtractor(f.cacheDir, f.allowHTTP); err != nil {
			return err
		}
	}
	c, err := catalog.Import(ctx, manifests, opts)
	if err != nil {
		return err
	}
	source := "the curated soname table"
	if f.scan {
		source = "the ELF files inside each archive (--scan)"
	}
	header := fmt.Sprintf("cudadeps catalog, generated by `cudadeps catalog import`; do not edit, regenerate.\n"+
		"Archives from NVIDIA's redistrib manifests: %s.\nSonames from %s.\nSchema: docs/catalog.md.",
		strings.Join(names, ", "), source)
	data, err := c.Encode(header)
	if err != nil {
		return err
	}
	if f.output == "" || f.output == "-" {
		_, err = a.stdout.Write(data)
		return err
	}
	if err := atomicfile.WriteFile(f.output, data, 0o644); err != nil {
		return err
	}
	if !a.opts.json {
		return nil
	}
	sum := countCatalog(catalogCheck{File: f.output, OK: true}, c)
	return writeJSON(a.stdout, schemaCatalogImport, struct {
		Output     string   `json:"output"`
		Manifests  []string `json:"manifests"`
		Scanned    bool     `json:"scanned"`
		Components int      `json:"components"`
		Archives   int      `json:"archives"`
		Drivers    int      `json:"drivers"`
	}{f.output, names, f.scan, sum.Components, sum.Archives, sum.Drivers})
}

// readManifests parses each file, or each *.json of each directory, in name
// order. Names are base names, so that the output does not depend on where
// the manifests lie.
func readManifests(args []string) ([]*catalog.Manifest, []string, error) {
	var files []string
	for _, arg := range args {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, nil, fmt.Errorf("read manifest: %w", err)
		}
		if !st.IsDir() {
			files = append(files, arg)
			continue
		}
		matches, err := filepath.Glob(filepath.Join(arg, "*.json"))
		if err != nil {
			return nil, nil, err
		}
		if len(matches) == 0 {
			return nil, nil, fmt.Errorf("read manifests: no *.json in %s", arg)
		}
		slices.Sort(matches)
		files = append(files, matches...)
	}
	var out []*catalog.Manifest
	var names []string
	for _, path := range files {
		data, err := catalog.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read manifest: %w", err)
		}
		m, err := catalog.ParseManifest(data, filepath.Base(path))
		if err != nil {
			return nil, nil, err
		}
		out = append(out, m)
		names = append(names, filepath.Base(path))
	}
	return out, names, nil
}

// scanExtractor gives import --scan its way to bring archives in: the same
// verified, cached downloads and safe extraction as every install.
func (a *app) scanExtractor(cacheDir string, allowHTTP bool) (catalog.Extractor, error) {
	c, err := a.newClient(cacheDir, allowHTTP)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ref catalog.ArchiveRef, dir string) error {
		name := fmt.Sprintf("%s %s (%s %s)", ref.Component, ref.Version, ref.Platform, ref.CUDAVariant)
		return c.Unpack(ctx, fetch.Request{Name: strings.TrimSpace(name), URL: ref.URL, SHA256: ref.SHA256, Size: ref.Size}, dir)
	}, nil
}
