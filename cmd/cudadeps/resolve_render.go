package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/internal/humansize"
	"github.com/cudadeps/cudadeps/internal/plural"
	"github.com/cudadeps/cudadeps/internal/shquote"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/resolver"
)

// renderResolve prints the short human report: what was missing, what was
// installed where, how it was activated, what remains and what to do.
// command writes a cudadeps command line that can be pasted. The rounds in
// planShown had their plan printed on this screen already: they are
// summed up, not listed again.
func renderResolve(w io.Writer, o *resolver.Outcome, command func(...string) string, planShown map[int]bool) {
	t := o.Target
	fmt.Fprintf(w, "%s: %s", t.Kind, t.Describe())
	if o.Platform != "" {
		fmt.Fprintf(w, " — %s", o.Platform)
	}
	if o.CUDAMajor != 0 {
		fmt.Fprintf(w, ", CUDA %d", o.CUDAMajor)
	}
	fmt.Fprintln(w)
	if o.Host != nil {
		fmt.Fprintf(w, "host: %s\n", o.Host.Brief())
	}
	if o.PlatformOverride != "" {
		fmt.Fprintf(w, "platform: %s\n", o.PlatformOverride)
	}
	renderDistributions(w, o)
	renderLayout(w, o)
	explained := map[string]int{} // soname → the round that said why it is unresolved
	for _, r := range o.Rounds {
		renderRound(w, r, planShown[r.N], explained)
	}
	for _, v := range o.VersionErrors {
		if !v.Weak {
			fmt.Fprintf(w, "  ! %s\n", v.Message)
		}
	}
	for i, u := range o.UndefinedSymbols {
		if i == 5 {
			fmt.Fprintf(w, "  ! %d more undefined symbols\n", len(o.UndefinedSymbols)-i)
			break
		}
		fmt.Fprintf(w, "  ! %s\n", u.Message())
	}
	renderOptional(w, o.Optional)
	renderStillShadowed(w, o.Unresolved)
	renderLeftToPip(w, o.Unresolved, explained)
	fmt.Fprintln(w)
	renderConclusion(w, o, command)
}

// renderStillShadowed lists the wrong copies the loader still takes first
// once the loop is over: what placement could not fix, with the remedy,
// given once for the copies that share it (a cuDNN's sub-libraries on
// LD_LIBRARY_PATH all go with one entry removed).
func renderStillShadowed(w io.Writer, list []resolver.Unresolved) {
	var advice []string
	byAdvice := map[string][]string{}
	for _, u := range list {
		if u.Kind != resolver.UnresolvedShadowed {
			continue
		}
		if _, ok := byAdvice[u.Advice]; !ok {
			advice = append(advice, u.Advice)
		}
		// The reason (a Shadow's String) names the soname itself.
		byAdvice[u.Advice] = append(byAdvice[u.Advice], u.Reason)
	}
	if len(advice) == 0 {
		return
	}
	fmt.Fprintln(w, "\nStill found first (placement cannot win):")
	for _, a := range advice {
		for _, r := range byAdvice[a] {
			fmt.Fprintf(w, "  %s\n", r)
		}
		if a != "" {
			fmt.Fprintf(w, "      %s\n", a)
		}
	}
}

// renderLeftToPip lists the distributions cudadeps changes no file of
// (declared ones at another version, in conflict, damaged beyond what it
// places; a pinned companion not installed) that no round's plan named:
// what to do, and why.
func renderLeftToPip(w io.Writer, list []resolver.Unresolved, explained map[string]int) {
	header := false
	for _, u := range list {
		if _, ok := explained[u.Soname]; ok || u.Kind != resolver.UnresolvedDistribution {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nNot made whole by cudadeps (it changes none of their files):")
			header = true
		}
		fmt.Fprintf(w, "  %s: %s\n", u.Soname, u.Reason)
		if u.Advice != "" {
			fmt.Fprintf(w, "      %s\n", u.Advice)
		}
	}
}

// renderOptional lists what the package works without: each optional
// module's library with the package that enables it, then the optional
// run-time opens on one line.
func renderOptional(w io.Writer, opt []resolver.OptionalLib) {
	if len(opt) == 0 {
		return
	}
	fmt.Fprintln(w)
	var opens []string
	for _, o := range opt {
		if o.RunTime {
			opens = append(opens, o.Soname)
			continue
		}
		fmt.Fprintf(w, "optional: %s\n", o)
	}
	if len(opens) > 0 {
		fmt.Fprintf(w, "optional, opened at run time when present: %s\n", strings.Join(opens, ", "))
	}
}

// renderRound prints what one round found missing and did about it; with
// planShown, its steps are those of the plan shown above, not repeated.
// What no archive provides is explained once, in the first round it comes
// up (explained records where); a later round only names it.
func renderRound(w io.Writer, r *resolver.Round, planShown bool, explained map[string]int) {
	if len(r.Missing) == 0 && r.Verify == nil {
		return
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(w, "\nRound %d: %d librar%s missing\n", r.N, len(r.Missing), plural.Of(len(r.Missing), "y", "ies"))
	}
	if r.Plan != nil && planShown && len(r.Plan.Steps) > 0 {
		fmt.Fprintf(w, "  %d archive(s) as planned above\n", len(r.Plan.Steps))
	}
	if r.Plan != nil {
		for _, j := range r.Plan.JetPack {
			fmt.Fprintf(w, "  %s\n", j)
		}
		for _, u := range r.Plan.Undeclared {
			fmt.Fprintf(w, "  %s\n", u)
		}
		for _, s := range r.Plan.Steps {
			if !planShown {
				renderStep(w, r, s)
			}
		}
		for _, ref := range r.Refused {
			fmt.Fprintf(w, "  ! %s\n", ref)
		}
		renderUnresolved(w, r.N, r.Plan.Unresolved, explained)
		if n := r.Plan.Bytes(); n > 0 {
			fmt.Fprintf(w, "  total download: %s\n", humansize.Bytes(n))
		}
	}
	if len(r.Placed) > 0 {
		fmt.Fprintf(w, "  placed %d file(s)\n", len(r.Placed))
	}
	if v := r.Verify; v != nil {
		renderVerify(w, v)
	}
}

// renderUnresolved explains what a round's plan could not provide, each
// soname once per report: the reason, then the advice where it says more
// than the reason (advice often restates it).
func renderUnresolved(w io.Writer, round int, list []resolver.Unresolved, explained map[string]int) {
	var again []string
	where := ""
	for _, u := range list {
		if n, ok := explained[u.Soname]; ok {
			again = append(again, u.Soname)
			if w := fmt.Sprintf("see round %d", n); where == "" || where == w {
				where = w
			} else {
				where = "see above"
			}
			continue
		}
		explained[u.Soname] = round
		advice := u.Advice
		if rest, ok := strings.CutPrefix(advice, u.Soname+" "); ok && !strings.HasPrefix(advice, u.Reason) {
			// The advice restates the reason in its own words: it alone.
			fmt.Fprintf(w, "  %s: %s\n", u.Soname, rest)
			continue
		}
		fmt.Fprintf(w, "  %s: %s\n", u.Soname, u.Reason)
		advice = strings.TrimLeft(strings.TrimPrefix(advice, u.Reason), ":;, ")
		if advice != "" {
			fmt.Fprintf(w, "      %s\n", advice)
		}
	}
	if len(again) > 0 {
		fmt.Fprintf(w, "  %s: still missing (%s)\n", strings.Join(again, ", "), where)
	}
}

// renderVerify prints the import check and the probes or check command.
func renderVerify(w io.Writer, v *resolver.Verification) {
	fmt.Fprintln(w)
	if len(v.Command) > 0 {
		fmt.Fprintf(w, "Import check: %s → %s\n", strings.Join(v.Command, " "), okWord(v.ImportOK))
		if !v.ImportOK && v.Output != "" {
			fmt.Fprintf(w, "%s\n", indent(lastLines(v.Output, 8), "    "))
		}
	}
	for _, p := range v.Probes {
		renderProbe(w, &p)
	}
}

func renderProbe(w io.Writer, p *resolver.Probe) {
	what := "Probe (" + p.Name + ")"
	if p.Name == "check" {
		what = "Check"
	}
	counts := map[string]int{}
	var skipped []string
	for _, st := range p.Steps {
		counts[st.Status]++
		if st.Status == resolver.StepSkipped {
			skipped = append(skipped, st.Name)
		}
	}
	shown := strings.Join(p.Command, " ")
	if p.Name == "check" && len(p.Command) == 3 {
		shown = p.Command[2] // sh -c CMD
	}
	fmt.Fprintf(w, "%s: %s → %s", what, shown, okWord(p.OK))
	if len(p.Steps) > 0 {
		fmt.Fprintf(w, " (%d ok, %d failed, %d skipped)", counts[resolver.StepOK], counts[resolver.StepFailed], counts[resolver.StepSkipped])
	}
	fmt.Fprintln(w)
	if len(skipped) > 0 {
		fmt.Fprintf(w, "    no GPU: skipped %s\n", strings.Join(skipped, ", "))
	}
	for _, st := range p.Steps {
		if st.Status == resolver.StepFailed {
			fmt.Fprintf(w, "    FAILED %s: %s\n", st.Name, st.Detail)
		}
	}
	if p.OK {
		return
	}
	if p.Error != "" {
		fmt.Fprintf(w, "    %s\n", p.Error)
	}
	for _, f := range p.Failures {
		fmt.Fprintf(w, "    blames %s (%s)\n", f.Library, strings.ReplaceAll(f.Kind, "_", " "))
	}
	if counts[resolver.StepFailed] == 0 && p.Output != "" {
		fmt.Fprintf(w, "%s\n", indent(lastLines(p.Output, 8), "    "))
	}
	if len(p.Failures) == 0 {
		fmt.Fprintf(w, "    rerun it with: %s\n", p.Reproduce)
	}
}

func okWord(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAILED"
}

func renderStep(w io.Writer, r *resolver.Round, s *resolver.Step) {
	state := humansize.Bytes(s.Size) + " from " + s.URL
	switch {
	case s.Installed:
		state = "already in the store"
	case s.Cached:
		state = humansize.Bytes(s.Size) + " in the download cache (from " + s.URL + ")"
	}
	variant := ""
	if s.CUDAVariant != "" {
		variant = ", " + s.CUDAVariant
	}
	if rs := s.Restore; rs != nil {
		renderRestore(w, s, rs, state)
		return
	}
	if s.Source == resolver.SourcePyPI {
		fmt.Fprintf(w, "  %s\n      ← wheel %s (%s %s, index %s), %s\n", strings.Join(s.Provides, ", "), s.Filename, s.Project, s.Version, s.Index, state)
	} else {
		fmt.Fprintf(w, "  %s\n      ← %s %s (%s%s), %s\n", strings.Join(s.Provides, ", "), s.Component, s.Version, s.Platform, variant, state)
	}
	if s.Pin != "" {
		fmt.Fprintf(w, "        %s\n", s.Pin)
	}
	for _, line := range placementLines(r, s, "the activation script") {
		fmt.Fprintf(w, "      → %s\n", line)
	}
	if n := len(s.Repairs); n > 0 {
		fmt.Fprintf(w, "      → and %d other %s of %s its RECORD lists, at their paths (%s)\n", n, plural.Of(n, "file", "files"), s.Project, pyenv.NameFiles(s.Repairs))
	}
}

// renderRestore says how a declared distribution comes back.
func renderRestore(w io.Writer, s *resolver.Step, rs *resolver.Restore, state string) {
	switch {
	case rs.Site == "":
		from := "NVIDIA's " + s.Component + " " + s.Version
		if s.Filename != "" && s.Source == resolver.SourcePyPI {
			from = "the wheel " + s.Filename + " (index " + s.Index + ")"
		}
		fmt.Fprintf(w, "  %s %s: its libraries from %s, kept in cudadeps' store and found through the activation script, %s\n", rs.Dist, rs.Version, from, state)
	case rs.Mode == resolver.RestoreInstall:
		fmt.Fprintf(w, "  %s %s: install the wheel %s into %s (index %s), %s\n", rs.Dist, rs.Version, s.Filename, rs.Site, s.Index, state)
	default:
		variant := ""
		if s.CUDAVariant != "" {
			variant = ", " + s.CUDAVariant
		}
		fmt.Fprintf(w, "  %s %s: its libraries from NVIDIA's %s %s (%s%s) at its wheel's RECORD paths under %s, %s\n", rs.Dist, rs.Version, s.Component, s.Version, s.Platform, variant, rs.Site, state)
		fmt.Fprintf(w, "      no .dist-info is written: pip check will still list %s as missing\n", rs.Dist)
	}
	if s.Pin != "" {
		fmt.Fprintf(w, "        %s\n", s.Pin)
	}
	if rs.Note != "" {
		fmt.Fprintf(w, "        %s\n", rs.Note)
	}
}

// placementLines say where a step's libraries go: each directory they are
// linked (or copied) into, with the search rule that reaches it, or the
// activation script that puts them on LD_LIBRARY_PATH.
func placementLines(r *resolver.Round, s *resolver.Step, script string) []string {
	var out []string
	for _, d := range r.Decisions {
		if d.Step != s {
			continue
		}
		for _, p := range d.Placements {
			verb := "link into"
			if p.Create {
				verb = "create and link into"
			}
			out = append(out, fmt.Sprintf("%s %s (%s)", verb, p.HostDir, strings.TrimSpace(string(p.Rule)+" "+p.Entry)))
		}
		if d.Script != nil {
			out = append(out, fmt.Sprintf("%s, for %s", script, strings.Join(shortList(d.Script.For, 2), ", ")))
		}
	}
	return out
}

func renderConclusion(w io.Writer, o *resolver.Outcome, command func(...string) string) {
	t := o.Target
	script := o.Activation.Script
	switch {
	case o.OK && len(o.Rounds) == 1 && len(o.Rounds[0].Missing) == 0:
		fmt.Fprintln(w, "Nothing is missing: the loader finds everything.")
	case o.OK && script != "":
		// Until the script is sourced, the objects it serves find nothing new.
		fmt.Fprintf(w, "Done once the activation script is sourced: run '. %s' in each shell that uses %s\n", shquote.Quote(cmp.Or(o.Activation.ScriptInRoot, script)), t.Name)
		fmt.Fprintln(w, "(it sets LD_LIBRARY_PATH for objects that search no directory you may write); the loader then finds everything.")
		script = ""
	case o.OK:
		fmt.Fprintln(w, "Done: the loader now finds everything.")
	case t.Kind == resolver.KindWheel:
		fmt.Fprintln(w, "A wheel is only planned: install it (pip install), then run 'cudadeps resolve' on the installed distribution.")
	case o.DryRun && !planned(o):
		fmt.Fprintln(w, "Dry run: nothing was changed, and there is nothing cudadeps would change (what is wrong is listed above).")
	case o.DryRun:
		fmt.Fprintln(w, "Dry run: nothing was changed. Run without --dry-run to apply the plan (after installing, another round may find more).")
	case o.Stopped == resolver.StopNotConfirmed:
		fmt.Fprintln(w, "Not confirmed: nothing was downloaded or placed.")
	case o.Stopped == resolver.StopNothingMissing && distributionsLeft(o):
		fmt.Fprintln(w, "Not done: the loader finds everything, but the declared distributions listed above are not as the package requires.")
	case o.Stopped == resolver.StopRoundLimit:
		// The loop stops at the round past the limit, before acting on it.
		fmt.Fprintf(w, "Not done (still missing libraries after %d rounds).\n", len(o.Rounds)-1)
	default:
		fmt.Fprintf(w, "Not done (%s).\n", o.Stopped)
	}
	if script != "" {
		fmt.Fprintf(w, "Some objects search no directory you may write: run '. %s' in shells that use them.\n", shquote.Quote(cmp.Or(o.Activation.ScriptInRoot, script)))
	}
	for _, n := range o.Activation.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	if o.DryRun {
		return
	}
	if len(o.Activation.Distributions) > 0 {
		fmt.Fprintf(w, "Distributions restored: %s\n", strings.Join(o.Activation.Distributions, "; "))
	}
	if len(o.Activation.InPlace) > 0 {
		fmt.Fprintf(w, "Libraries were linked into: %s\n", strings.Join(o.Activation.InPlace, ", "))
	}
	if o.Activation.LdConf != "" {
		fmt.Fprintf(w, "The root's ld.so.cache, rebuilt by its own ldconfig, lists %s (from %s): every program there finds them.\n", strings.Join(o.Activation.LdConfDirs, ", "), o.Activation.LdConf)
	}
	if len(o.Activation.InPlace) > 0 || len(o.Activation.Distributions) > 0 || o.Activation.Script != "" || o.Activation.LdConf != "" {
		fmt.Fprintf(w, "Undo with: %s\n", command("undo", t.Name))
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

// planned says whether a round planned a step.
func planned(o *resolver.Outcome) bool {
	for _, r := range o.Rounds {
		if r.Plan != nil && len(r.Plan.Steps) > 0 {
			return true
		}
	}
	return false
}

// distributionsLeft says whether declared distributions are left as they
// are (renderLeftToPip).
func distributionsLeft(o *resolver.Outcome) bool {
	return slices.ContainsFunc(o.Unresolved, func(u resolver.Unresolved) bool { return u.Kind == resolver.UnresolvedDistribution })
}
