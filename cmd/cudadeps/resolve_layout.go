package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/cudadeps/cudadeps/python/declared"
	"github.com/cudadeps/cudadeps/resolver"
)

// renderDistributions prints the NVIDIA distributions the target declares,
// first: the version each must come at, how it was decided, and its state.
func renderDistributions(w io.Writer, o *resolver.Outcome) {
	cl := o.Distributions
	if cl == nil || len(cl.Dists) == 0 {
		return
	}
	fmt.Fprintf(w, "\nDeclared by %s", cl.Target)
	if len(cl.Extras) > 0 {
		var xs []string
		for _, x := range cl.Extras {
			xs = append(xs, x.Name)
		}
		fmt.Fprintf(w, " (extras counted: %s)", strings.Join(xs, ", "))
	}
	fmt.Fprintln(w, ":")
	for _, d := range cl.Dists {
		v := d.Version
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(w, "  %-24s %-11s %-10s %-13s %s\n", d.Name, v, choiceWord(d.Choice), d.State, d.Detail)
		if d.Choice == declared.FromRange || d.Choice == declared.Unknown {
			fmt.Fprintf(w, "      %s\n", d.Why)
		}
		for _, c := range d.Conflicts {
			fmt.Fprintf(w, "      conflict: %s\n", c)
		}
	}
	for _, x := range cl.Extras {
		fmt.Fprintf(w, "  extra [%s] counted: %s\n", x.Name, x.Why)
	}
}

func choiceWord(c declared.Choice) string {
	switch c {
	case declared.FromRange:
		return "from range"
	case declared.Unknown:
		return "no version"
	}
	return string(c)
}

// renderLayout prints what the Python metadata says beside the loader:
// incomplete distributions, wrong copies found first, and the cross-checks.
func renderLayout(w io.Writer, o *resolver.Outcome) {
	if len(o.Incomplete) > 0 {
		fmt.Fprintln(w, "\nDistributions with files missing:")
		for _, s := range o.Incomplete {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	var wrong, exact []resolver.Shadow
	for _, sh := range o.Shadowed {
		if sh.SameBuild() {
			exact = append(exact, sh)
		} else {
			wrong = append(wrong, sh)
		}
	}
	if len(wrong) > 0 {
		fmt.Fprintln(w, "\nWrong copies found first (the package was built for the owned copy):")
		for _, s := range wrong {
			fmt.Fprintf(w, "  %s\n", s.String())
			if !s.Fixable && s.Remedy != "" {
				fmt.Fprintf(w, "      %s\n", s.Remedy)
			}
		}
	}
	if len(exact) > 0 {
		fmt.Fprintln(w, "\nTaken from elsewhere at exactly the required release (the same release as the package's own copy: no wrong copy):")
		for _, s := range exact {
			fmt.Fprintf(w, "  %s\n", s.String())
		}
	}
	if len(o.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range o.Notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	if len(o.Checks) > 0 {
		fmt.Fprintln(w, "\nChecks:")
		for _, c := range o.Checks {
			fmt.Fprintf(w, "  ! %s\n", c)
		}
	}
}
