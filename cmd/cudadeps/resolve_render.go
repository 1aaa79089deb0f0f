package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/cudadeps/cudadeps/internal/humansize"
	"github.com/cudadeps/cudadeps/resolver"
)

// renderResolve prints the short human report: what was missing, what was
// installed where, how it was activated, what remains and what to do.
// command writes a cudadeps command line that can be pasted.
func renderResolve(w io.Writer, o *resolver.Outcome, command func(...string) string) {
	t := o.Target
	fmt.Fprintf(w, "%s: %s", t.Kind, t.Describe())
	if o.Platform != "" {
		fmt.Fprintf(w, " — %s", o.Platform)
	}
	if o.CUDAMajor != 0 {
		fmt.Fprintf(w, ", CUDA %d", o.CUDAMajor)
	}
	fmt.Fprintln(w)
	renderLayout(w, o)
	for _, r := range o.Rounds {
		renderRound(w, r)
	}
	for _, v := range o.VersionErrors {
		if !v.Weak {
			fmt.Fprintf(w, "  ! %s\n", v.Message)
		}
	}
	fmt.Fprintln(w)
	renderConclusion(w, o, command)
}

func renderRound(w io.Writer, r *resolver.Round) {
	if len(r.Missing) == 0 && r.Verify == nil {
		return
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(w, "\nRound %d: %d librar%s missing\n", r.N, len(r.Missing), plural(len(r.Missing), "y", "ies"))
	}
	if r.Plan != nil {
		for _, s := range r.Plan.Steps {
			renderStep(w, r, s)
		}
		for _, u := range r.Plan.Unresolved {
			fmt.Fprintf(w, "  %s: %s\n", u.Soname, u.Reason)
			if u.Advice != "" {
				fmt.Fprintf(w, "      %s\n", u.Advice)
			}
		}
		if n := r.Plan.Bytes(); n > 0 {
			fmt.Fprintf(w, "  total download: %s\n", humansize.Bytes(n))
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

func renderStep(w io.Writer, r *resolver.Round, s *resolver.Step) {
	state := humansize.Bytes(s.Size) + " from " + s.URL
	if s.Installed {
		state = "already in the store"
	}
	variant := ""
	if s.CUDAVariant != "" {
		variant = ", " + s.CUDAVariant
	}
	if s.Source == resolver.SourcePyPI {
		fmt.Fprintf(w, "  %s\n      ← wheel %s (%s %s, index %s), %s\n", strings.Join(s.Provides, ", "), s.Filename, s.Project, s.Version, s.Index, state)
	} else {
		fmt.Fprintf(w, "  %s\n      ← %s %s (%s%s), %s\n", strings.Join(s.Provides, ", "), s.Component, s.Version, s.Platform, variant, state)
	}
	if s.Pin != "" {
		fmt.Fprintf(w, "        %s\n", s.Pin)
	}
	for _, d := range r.Decisions {
		if d.Step != s {
			continue
		}
		for _, p := range d.Placements {
			verb := "link into"
			if p.Create {
				verb = "create and link into"
			}
			fmt.Fprintf(w, "      → %s %s (%s)\n", verb, p.HostDir, strings.TrimSpace(string(p.Rule)+" "+p.Entry))
		}
		if d.Env != nil {
			fmt.Fprintf(w, "      → LD_LIBRARY_PATH via the activation script, for %s\n", strings.Join(shortList(d.Env.For, 2), ", "))
		}
	}
}

func renderConclusion(w io.Writer, o *resolver.Outcome, command func(...string) string) {
	t := o.Target
	switch {
	case o.OK && len(o.Rounds) == 1 && len(o.Rounds[0].Missing) == 0:
		fmt.Fprintln(w, "Nothing is missing: the loader finds everything.")
	case o.OK:
		fmt.Fprintln(w, "Done: the loader now finds everything.")
	case t.Kind == resolver.KindWheel:
		fmt.Fprintln(w, "A wheel is only planned: install it (pip install), then run 'cudadeps resolve' on the installed distribution.")
	case o.DryRun:
		fmt.Fprintln(w, "Dry run: nothing was changed. Run without --dry-run to apply the plan (after installing, another round may find more).")
	case o.Stopped == stoppedNotConfirmed:
		fmt.Fprintln(w, "Not confirmed: nothing was downloaded or placed.")
	default:
		fmt.Fprintf(w, "Not done (%s).\n", o.Stopped)
	}
	if o.Activation.Script != "" {
		fmt.Fprintf(w, "Some objects search no directory you may write: run '. %s' in shells that use them.\n", shellQuote(o.Activation.Script))
	}
	if len(o.Activation.InPlace) > 0 && !o.DryRun {
		fmt.Fprintf(w, "Libraries were linked into: %s\nUndo with: %s\n", strings.Join(o.Activation.InPlace, ", "), command("undo", t.Name))
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
