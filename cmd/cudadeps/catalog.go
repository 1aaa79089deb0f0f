package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/humansize"
	"github.com/cudadeps/cudadeps/platform"
)

func (a *app) catalogCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "catalog",
		Short: "Which NVIDIA archive provides which shared library",
		Long: `The catalog maps sonames to NVIDIA's redistributable archives, per platform
(linux-x86_64, linux-sbsa, linux-aarch64) and CUDA major, with URL, sha256 and
size. The default catalog is built into cudadeps; --catalog layers more files
on top and --mirror fetches archives from another place.`,
		Example: `  cudadeps catalog list --platform linux-sbsa --cuda 13
  cudadeps catalog which libcudss.so.0 --cuda 13
  cudadeps catalog validate my-catalog.yaml`,
	})
	cmd.AddCommand(a.catalogListCommand(), a.catalogShowCommand(), a.catalogWhichCommand(),
		a.catalogValidateCommand(), a.catalogImportCommand(), a.catalogUpdateCommand())
	return cmd
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
		Example: `  cudadeps catalog list
  cudadeps catalog list --platform linux-sbsa --cuda 13 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.loadCatalog(cmd.Context())
			if err != nil {
				return err
			}
			var comps []componentSummary
			for _, comp := range c.Components() {
				s := summarize(comp, string(a.opts.platform), int(a.opts.cuda))
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
				return writeJSON(a.stdout, schemaCatalogList, struct {
					Components []componentSummary `json:"components"`
					Drivers    []driverSummary    `json:"drivers"`
				}{comps, drivers})
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

// summarize describes a component, counting only archives on plat and
// for CUDA major cuda when those are given.
func summarize(comp *catalog.Component, plat string, cuda int) componentSummary {
	s := componentSummary{Component: comp.Name, Product: comp.Product, Title: comp.Title, Sonames: comp.Sonames,
		Versions: []string{}, Platforms: []string{}, CUDA: []int{}}
	for _, r := range comp.Releases {
		kept := false
		for _, ar := range r.Archives {
			if !ar.Fits(r, plat, cuda) {
				continue
			}
			m := ar.CUDAMajor(r)
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
	slices.SortFunc(s.Platforms, func(x, y string) int { return platform.Rank(x) - platform.Rank(y) })
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
		Example: `  cudadeps catalog show libcudss
  cudadeps catalog show libcublas --platform linux-sbsa --cuda 13 --json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeComponents,
		RunE: func(cmd *cobra.Command, args []string) error {
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
					if !ar.Fits(r, string(a.opts.platform), int(a.opts.cuda)) {
						continue
					}
					rj.Archives = append(rj.Archives, archiveJSON{ar.Platform, ar.CUDAVariant, ar.CUDAMajor(r), c.URL(comp, ar),
						ar.RelativePath, ar.SHA256, ar.Size, ar.Sonames})
				}
				if len(rj.Archives) > 0 {
					out.Releases = append(out.Releases, rj)
				}
			}
			if a.opts.json {
				return writeJSON(a.stdout, schemaCatalogShow, out)
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
			fmt.Fprintf(w, "    %-14s %-9s sha256 %s, %s (%d bytes)\n", "", "", ar.SHA256, humansize.Bytes(ar.Size), ar.Size)
			fmt.Fprintf(w, "    %-14s %-9s provides %s\n", "", "", strings.Join(ar.Sonames, " "))
		}
	}
	return nil
}
