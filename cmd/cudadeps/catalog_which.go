package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/humansize"
	"github.com/cudadeps/cudadeps/platform"
)

type notFoundJSON struct {
	Soname     string `json:"soname"`
	Found      bool   `json:"found"`
	Ambiguous  bool   `json:"ambiguous"`
	CUDAMajors []int  `json:"cuda_majors"`
	Component  string `json:"component,omitempty"`
	Product    string `json:"product,omitempty"`
	Reason     string `json:"reason"`
}

func (a *app) catalogWhichCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "which SONAME",
		Short: "Which archive provides SONAME for a platform and CUDA major (exit 3 when none does)",
		Long: `which names the newest archive that provides SONAME for the platform (default:
this host's) and CUDA major (--cuda; needed when archives for several CUDA
majors provide it). A driver library is reported with advice instead: it is
never downloaded.

Exit status: 0 when an archive fits, 3 when none does (it says why), 2 when
archives for several CUDA majors fit and --cuda names none (it lists them).`,
		Example: `  cudadeps catalog which libcudss.so.0 --cuda 13
  cudadeps catalog which libnvpl_lapack_lp64_gomp.so.0 --platform linux-sbsa --json
  cudadeps catalog which libcuda.so.1`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeSonames,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.loadCatalog(cmd.Context())
			if err != nil {
				return err
			}
			soname := args[0]
			q := catalog.Query{Platform: string(a.opts.platform), CUDAMajor: int(a.opts.cuda)}
			if _, driver := c.Driver(soname); !driver && q.Platform == "" {
				if q.Platform, err = platform.HostPlatform(q.CUDAMajor); err != nil {
					return usageError("%v", err)
				}
			}
			m, err := c.Which(soname, q)
			var nf *catalog.NotFoundError
			if errors.As(err, &nf) {
				return a.whichNotFound(soname, q.Platform, nf)
			}
			if err != nil {
				return err
			}
			if a.opts.json {
				return writeJSON(a.stdout, schemaCatalogWhich, m)
			}
			return renderMatch(a.stdout, m)
		},
	}
	a.opts.addCatalogFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

// whichNotFound reports a miss (exit 3) or an ambiguous CUDA major (exit 2).
func (a *app) whichNotFound(soname, plat string, nf *catalog.NotFoundError) error {
	ambiguous := len(nf.CUDAMajors) > 1
	code := exitMissing
	if ambiguous {
		code = exitUsage
	}
	if a.opts.json {
		if err := writeJSON(a.stdout, schemaCatalogUnknown, notFoundJSON{soname, false, ambiguous, nf.CUDAMajors, nf.Component, nf.Product, nf.Reason}); err != nil {
			return err
		}
		return exitWith(code)
	}
	if ambiguous {
		var opts []string
		for _, m := range nf.CUDAMajors {
			opts = append(opts, fmt.Sprintf("--cuda %d", m))
		}
		fmt.Fprintf(a.stdout, "%s: ambiguous: %s has %s archives for CUDA %s; pass %s\n", soname, nf.Component, plat,
			majorsText(nf.CUDAMajors), strings.Join(opts, " or "))
	} else {
		fmt.Fprintf(a.stdout, "%s: %s: %s\n", soname, newPainter(a.stdout).bad("NOT FOUND"), nf.Reason)
	}
	return exitWith(code)
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
	fmt.Fprintf(w, "  size:     %s (%d bytes)\n", humansize.Bytes(m.Size), m.Size)
	_, err := fmt.Fprintf(w, "  provides: %s\n", strings.Join(m.Sonames, " "))
	return err
}

// completeSonames completes the sonames the catalog knows.
func (a *app) completeSonames(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	cat, err := a.loadCatalog(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, c := range cat.Components() {
		names = append(names, c.Sonames...)
	}
	for _, d := range cat.Drivers() {
		names = append(names, d.Soname)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
