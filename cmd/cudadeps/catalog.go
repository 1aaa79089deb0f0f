package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
)

func (a *app) catalogCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Which NVIDIA archive provides which shared library",
		Long: `The catalog maps sonames to NVIDIA's redistributable archives, per platform
(linux-x86_64, linux-sbsa, linux-aarch64) and CUDA major, with URL, sha256 and
size. The default catalog is built into cudadeps; --catalog layers more files
on top and --mirror fetches archives from another place.`,
	}
	cmd.AddCommand(a.catalogListCommand(), a.catalogShowCommand(), a.catalogWhichCommand(),
		a.catalogValidateCommand(), a.catalogImportCommand(), a.catalogUpdateCommand())
	return cmd
}

// loadCatalog loads the embedded catalog with the --catalog and --mirror flags applied.
func (a *app) loadCatalog(ctx context.Context) (*catalog.Catalog, error) {
	if a.opts.mirror != "" {
		if _, err := catalog.NormalizeMirror(a.opts.mirror); err != nil {
			return nil, usageError("--mirror: %v", err)
		}
	}
	return catalog.Load(ctx, catalog.LoadOptions{UserLayer: a.userLayer(), Extra: a.opts.catalogs, Mirror: a.opts.mirror})
}

func (a *app) checkPlatformFlag() error {
	if a.opts.platform != "" && !catalog.ValidPlatform(a.opts.platform) {
		return usageError("--platform %q: want one of %s", a.opts.platform, strings.Join(catalog.Platforms(), ", "))
	}
	if a.opts.cuda < 0 || a.opts.cuda > 99 {
		return usageError("--cuda %d: want a CUDA major such as 12 or 13", a.opts.cuda)
	}
	return nil
}

func (a *app) writeJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// --- list -------------------------------------------------------------------

type componentSummary struct {
	Component string   `json:"component"`
	Product   string   `json:"product"`
	Title     string   `json:"title,omitempty"`
	Latest    string   `json:"latest,omitempty"`
	Versions  []string `json:"versions"`
	Platforms []string `json:"platforms"`
	CUDA      []int    `json:"cuda"`
	Sonames   []string `json:"sonames"`
}

type driverSummary struct {
	Soname string `json:"soname"`
	Advice string `json:"advice"`
}

func (a *app) catalogListCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the catalog's components (and driver libraries)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.checkPlatformFlag(); err != nil {
				return err
			}
			c, err := a.loadCatalog(cmd.Context())
			if err != nil {
				return err
			}
			var comps []componentSummary
			for _, comp := range c.Components() {
				s := summarize(comp, a.opts.platform, a.opts.cuda)
				if (a.opts.platform != "" || a.opts.cuda != 0) && s.Latest == "" {
					continue
				}
				comps = append(comps, s)
			}
			var drivers []driverSummary
			for _, d := range c.Drivers() {
				drivers = append(drivers, driverSummary{d.Soname, d.Advice})
			}
			if a.opts.json {
				return a.writeJSON(struct {
					Components []componentSummary `json:"components"`
					Drivers    []driverSummary    `json:"drivers"`
				}{orEmpty(comps), orEmpty(drivers)})
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "COMPONENT\tPRODUCT\tLATEST\tPLATFORMS\tCUDA\tSONAMES")
			for _, s := range comps {
				latest, plats := s.Latest, strings.Join(s.Platforms, ",")
				if latest == "" {
					latest, plats = "-", "(no archive)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Component, s.Product, latest, plats, majorsText(s.CUDA), strings.Join(s.Sonames, " "))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if a.opts.platform == "" && a.opts.cuda == 0 {
				fmt.Fprintf(a.stdout, "\ndriver libraries (never downloaded): %s\n", strings.Join(driverNames(drivers), " "))
			}
			return nil
		},
	}
	a.opts.addCatalogFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

// summarize describes a component, counting only archives on platform and
// for CUDA major cuda when those are given.
func summarize(comp *catalog.Component, platform string, cuda int) componentSummary {
	s := componentSummary{Component: comp.Name, Product: comp.Product, Title: comp.Title, Sonames: comp.Sonames,
		Versions: []string{}, Platforms: []string{}, CUDA: []int{}}
	for _, r := range comp.Releases {
		kept := false
		for _, ar := range r.Archives {
			m := ar.CUDAMajor(r)
			if (platform != "" && ar.Platform != platform) || (cuda != 0 && m != 0 && m != cuda) {
				continue
			}
			kept = true
			if !slices.Contains(s.Platforms, ar.Platform) {
				s.Platforms = append(s.Platforms, ar.Platform)
			}
			if !slices.Contains(s.CUDA, m) {
				s.CUDA = append(s.CUDA, m)
			}
		}
		if kept {
			s.Versions = append(s.Versions, r.Version)
		}
	}
	if len(s.Versions) > 0 {
		s.Latest = s.Versions[0] // releases are newest first
	}
	slices.SortFunc(s.Platforms, func(x, y string) int {
		return slices.Index(catalog.Platforms(), x) - slices.Index(catalog.Platforms(), y)
	})
	slices.Sort(s.CUDA)
	return s
}

func majorsText(ms []int) string {
	var out []string
	for _, m := range ms {
		if m == 0 {
			out = append(out, "any")
		} else {
			out = append(out, fmt.Sprint(m))
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ",")
}

func driverNames(ds []driverSummary) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Soname)
	}
	return out
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// --- show -------------------------------------------------------------------

type archiveJSON struct {
	Platform     string   `json:"platform"`
	CUDAVariant  string   `json:"cuda_variant"`
	CUDA         int      `json:"cuda"`
	URL          string   `json:"url"`
	RelativePath string   `json:"relative_path"`
	SHA256       string   `json:"sha256"`
	Size         int64    `json:"size"`
	Sonames      []string `json:"sonames"`
}

type releaseJSON struct {
	Version  string        `json:"version"`
	Release  string        `json:"release,omitempty"`
	Date     string        `json:"date,omitempty"`
	Archives []archiveJSON `json:"archives"`
}

type componentJSON struct {
	Component string        `json:"component"`
	Product   string        `json:"product"`
	Title     string        `json:"title,omitempty"`
	License   string        `json:"license,omitempty"`
	Sonames   []string      `json:"sonames"`
	Releases  []releaseJSON `json:"releases"`
}

func (a *app) catalogShowCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show COMPONENT",
		Short: "Show a component: its sonames and every archive, with URL, sha256 and size",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.checkPlatformFlag(); err != nil {
				return err
			}
			c, err := a.loadCatalog(cmd.Context())
			if err != nil {
				return err
			}
			comp, ok := c.Component(args[0])
			if !ok {
				fmt.Fprintf(a.stderr, "cudadeps: no component %q in the catalog (see 'cudadeps catalog list')\n", args[0])
				return exitWith(exitMissing)
			}
			out := componentJSON{Component: comp.Name, Product: comp.Product, Title: comp.Title, License: comp.License,
				Sonames: comp.Sonames, Releases: []releaseJSON{}}
			for _, r := range comp.Releases {
				rj := releaseJSON{Version: r.Version, Release: r.Label, Date: r.Date}
				for _, ar := range r.Archives {
					m := ar.CUDAMajor(r)
					if (a.opts.platform != "" && ar.Platform != a.opts.platform) || (a.opts.cuda != 0 && m != 0 && m != a.opts.cuda) {
						continue
					}
					rj.Archives = append(rj.Archives, archiveJSON{ar.Platform, ar.CUDAVariant, m, c.URL(comp, ar),
						ar.RelativePath, ar.SHA256, ar.Size, ar.Sonames})
				}
				if len(rj.Archives) > 0 {
					out.Releases = append(out.Releases, rj)
				}
			}
			if a.opts.json {
				return a.writeJSON(out)
			}
			return renderComponent(a.stdout, c, out)
		},
	}
	a.opts.addCatalogFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

func renderComponent(w io.Writer, c *catalog.Catalog, comp componentJSON) error {
	title := comp.Product
	if p, ok := c.Product(comp.Product); ok {
		title = p.DisplayName()
	}
	fmt.Fprintf(w, "%s: %s\n", comp.Component, comp.Title)
	fmt.Fprintf(w, "  product: %s (%s)\n", comp.Product, title)
	if comp.License != "" {
		fmt.Fprintf(w, "  license: %s\n", comp.License)
	}
	fmt.Fprintf(w, "  sonames: %s\n", strings.Join(comp.Sonames, " "))
	if len(comp.Releases) == 0 {
		_, err := fmt.Fprintln(w, "  no archive in the catalog")
		return err
	}
	for _, r := range comp.Releases {
		fmt.Fprintf(w, "\n  %s", r.Version)
		if r.Release != "" {
			fmt.Fprintf(w, "  (release %s %s)", r.Release, r.Date)
		}
		fmt.Fprintln(w)
		for _, ar := range r.Archives {
			cuda := "any CUDA"
			if ar.CUDA != 0 {
				cuda = fmt.Sprintf("CUDA %d", ar.CUDA)
			}
			fmt.Fprintf(w, "    %-14s %-9s %s\n", ar.Platform, cuda, ar.URL)
			fmt.Fprintf(w, "    %-14s %-9s sha256 %s, %d bytes\n", "", "", ar.SHA256, ar.Size)
			fmt.Fprintf(w, "    %-14s %-9s provides %s\n", "", "", strings.Join(ar.Sonames, " "))
		}
	}
	return nil
}

// --- which ------------------------------------------------------------------

type notFoundJSON struct {
	Soname    string `json:"soname"`
	Found     bool   `json:"found"`
	Component string `json:"component,omitempty"`
	Product   string `json:"product,omitempty"`
	Reason    string `json:"reason"`
}

func (a *app) catalogWhichCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "which SONAME",
		Short: "Which archive provides SONAME for a platform and CUDA major (exit 3 when none does)",
		Long: `which names the newest archive that provides SONAME for the platform (default:
this host's) and CUDA major (--cuda; needed when archives for several CUDA
majors provide it). A driver library is reported with advice instead: it is
never downloaded. When nothing fits, it says why and exits with status 3.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.checkPlatformFlag(); err != nil {
				return err
			}
			c, err := a.loadCatalog(cmd.Context())
			if err != nil {
				return err
			}
			soname := args[0]
			q := catalog.Query{Platform: a.opts.platform, CUDAMajor: a.opts.cuda}
			if _, driver := c.Driver(soname); !driver && q.Platform == "" {
				if q.Platform, err = catalog.HostPlatform(q.CUDAMajor); err != nil {
					return usageError("%v", err)
				}
			}
			m, err := c.Which(soname, q)
			var nf *catalog.NotFoundError
			if errors.As(err, &nf) {
				if a.opts.json {
					if err := a.writeJSON(notFoundJSON{soname, false, nf.Component, nf.Product, nf.Reason}); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(a.stdout, "%s: not found: %s\n", soname, nf.Reason)
				}
				return exitWith(exitMissing)
			}
			if err != nil {
				return err
			}
			if a.opts.json {
				return a.writeJSON(m)
			}
			return renderMatch(a.stdout, m)
		},
	}
	a.opts.addCatalogFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

func renderMatch(w io.Writer, m *catalog.Match) error {
	if m.Driver {
		_, err := fmt.Fprintf(w, "%s: driver library, never downloaded\n  %s\n", m.Soname, m.Advice)
		return err
	}
	cuda := "any CUDA"
	if m.CUDAMajor != 0 {
		cuda = fmt.Sprintf("CUDA %d", m.CUDAMajor)
	}
	fmt.Fprintf(w, "%s: %s %s (%s, %s, %s)\n", m.Soname, m.Component, m.Version, m.Product, m.Platform, cuda)
	fmt.Fprintf(w, "  url:      %s\n", m.URL)
	fmt.Fprintf(w, "  sha256:   %s\n", m.SHA256)
	fmt.Fprintf(w, "  size:     %d bytes (%.1f MiB)\n", m.Size, float64(m.Size)/(1<<20))
	_, err := fmt.Fprintf(w, "  provides: %s\n", strings.Join(m.Sonames, " "))
	return err
}

// --- validate ---------------------------------------------------------------

func (a *app) catalogValidateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate [FILE...]",
		Short: "Check catalog files strictly, each layered over the built-in catalog (no FILE: the built-in one)",
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := catalog.Parse(cudadeps.DefaultCatalog(), catalog.DefaultName)
			if err != nil {
				return err
			}
			if len(args) == 0 {
				fmt.Fprintf(a.stdout, "%s: ok: %s\n", catalog.DefaultName, counts(base))
				return nil
			}
			for _, path := range args {
				data, err := catalog.ReadFile(path)
				if err != nil {
					return fmt.Errorf("read catalog: %w", err)
				}
				layer, err := catalog.ParseLayer(data, path)
				if err != nil {
					return err
				}
				if _, err := catalog.Layer(base, layer); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "%s: ok: %s\n", path, counts(layer))
			}
			return nil
		},
	}
}

func counts(c *catalog.Catalog) string {
	archives := 0
	for _, comp := range c.Components() {
		for _, r := range comp.Releases {
			archives += len(r.Archives)
		}
	}
	return fmt.Sprintf("%d components, %d archives, %d driver libraries", len(c.Components()), archives, len(c.Drivers()))
}

// --- import -----------------------------------------------------------------

func (a *app) catalogImportCommand() *cobra.Command {
	var (
		output     string
		tableFile  string
		scan       bool
		platforms  []string
		components []string
		mirror     string
		cacheDir   string
		allowHTTP  bool
	)
	cmd := &cobra.Command{
		Use:   "import MANIFEST.json|DIR...",
		Short: "Build a catalog from NVIDIA's redistrib manifests (redistrib_X.json)",
		Long: `import reads NVIDIA's redistrib manifests (files, or every *.json of a
directory) and writes a catalog: each Linux archive with its URL, sha256,
size and the sonames it provides. Those come from the curated soname table
built into cudadeps, or with --scan from the ELF files inside each archive,
which is downloaded (from --mirror when given), verified and unpacked.

Layer the result over the built-in catalog with --catalog FILE. The built-in
catalog itself is: cudadeps catalog import data/manifests -o catalog.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, p := range platforms {
				if !catalog.ValidPlatform(p) {
					return usageError("--platform %q: want one of %s", p, strings.Join(catalog.Platforms(), ", "))
				}
			}
			if mirror != "" {
				if _, err := catalog.NormalizeMirror(mirror); err != nil {
					return usageError("--mirror: %v", err)
				}
			}
			if !scan && (mirror != "" || cacheDir != "" || allowHTTP) {
				return usageError("--mirror, --cache and --allow-http only matter with --scan")
			}
			manifests, names, err := readManifests(args)
			if err != nil {
				return err
			}
			opts := catalog.ImportOptions{Platforms: platforms, Components: components, Mirror: mirror, Logger: a.logger}
			if tableFile != "" {
				data, err := catalog.ReadFile(tableFile)
				if err != nil {
					return fmt.Errorf("read soname table: %w", err)
				}
				if opts.Table, err = catalog.ParseTable(data, tableFile); err != nil {
					return err
				}
			}
			if scan {
				if opts.Extract, err = a.scanExtractor(cacheDir, allowHTTP); err != nil {
					return err
				}
			}
			c, err := catalog.Import(cmd.Context(), manifests, opts)
			if err != nil {
				return err
			}
			source := "the curated soname table"
			if scan {
				source = "the ELF files inside each archive (--scan)"
			}
			header := fmt.Sprintf("cudadeps catalog, generated by `cudadeps catalog import`; do not edit, regenerate.\n"+
				"Archives from NVIDIA's redistrib manifests: %s.\nSonames from %s.\nSchema: the catalog section of the README.",
				strings.Join(names, ", "), source)
			data, err := c.Encode(header)
			if err != nil {
				return err
			}
			if output == "" || output == "-" {
				_, err = a.stdout.Write(data)
				return err
			}
			return writeFileAtomic(output, data)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "write the catalog to `FILE` (default: stdout)")
	f.StringVar(&tableFile, "sonames", "", "use this soname table `FILE` instead of the built-in one")
	f.BoolVar(&scan, "scan", false, "download each archive and record the SONAMEs of the ELF files inside it")
	f.StringArrayVar(&platforms, "platform", nil, "only this `PLATFORM` (repeatable; default: linux-x86_64, linux-sbsa, linux-aarch64)")
	f.StringArrayVar(&components, "component", nil, "only this `COMPONENT` (repeatable; default: all)")
	f.StringVar(&mirror, "mirror", "", "with --scan, download from this `URL` + relative path instead of NVIDIA")
	f.StringVar(&cacheDir, "cache", "", "with --scan, keep downloaded archives in `DIR` (default: the user cache directory)")
	f.BoolVar(&allowHTTP, "allow-http", false, "with --scan, allow a plain http:// mirror")
	return cmd
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

// writeFileAtomic replaces path with data, never leaving half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// scanExtractor gives import --scan its way to bring archives in: the same
// verified, cached downloads and safe extraction as every install.
func (a *app) scanExtractor(cacheDir string, allowHTTP bool) (catalog.Extractor, error) {
	c, err := fetch.NewClient(fetch.Options{CacheDir: cacheDir, AllowHTTP: allowHTTP, Logger: a.logger, Progress: a.progressWriter()})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ref catalog.ArchiveRef, dir string) error {
		name := fmt.Sprintf("%s %s (%s %s)", ref.Component, ref.Version, ref.Platform, ref.CUDAVariant)
		return c.Unpack(ctx, fetch.Request{Name: strings.TrimSpace(name), URL: ref.URL, SHA256: ref.SHA256, Size: ref.Size}, dir)
	}, nil
}
