package main

import (
	"fmt"
	"io"

	"github.com/cudadeps/cudadeps/resolver"
)

// renderLayout prints what the Python metadata says beside the loader:
// incomplete distributions, wrong copies found first, and the cross-checks.
func renderLayout(w io.Writer, o *resolver.Outcome) {
	if len(o.Incomplete) > 0 {
		fmt.Fprintln(w, "\nDistributions with files missing:")
		for _, s := range o.Incomplete {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if len(o.Shadowed) > 0 {
		fmt.Fprintln(w, "\nWrong copies found first (the package was built for the owned copy):")
		for _, s := range o.Shadowed {
			fmt.Fprintf(w, "  %s\n", s.String())
			if !s.Fixable && s.Remedy != "" {
				fmt.Fprintf(w, "      %s\n", s.Remedy)
			}
		}
	}
	if len(o.Checks) > 0 {
		fmt.Fprintln(w, "\nChecks:")
		for _, c := range o.Checks {
			fmt.Fprintf(w, "  ! %s\n", c)
		}
	}
}
