package resolver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/internal/workers"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/python/declared"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// Analysis is what a dry run finds out about a target, without the
// network: the outcome resolve --dry-run reports, with the scan behind it.
type Analysis struct {
	Outcome *Outcome
	Report  *scan.Report
	loaders []*ldso.Loader
	prefix  *activation.Prefix
}

// Analyze runs Resolve as a dry run that uses no network: the same scan,
// needs, declared distributions, placement and checks as `resolve
// --dry-run`, planned from the catalog alone (no package index, no
// download client, no import check).
func Analyze(ctx context.Context, t *Target, opts Options) (*Analysis, error) {
	opts.DryRun, opts.Verify, opts.Check = true, false, ""
	opts.Source, opts.Index, opts.Client, opts.Confirm = SourceNVIDIA, nil, nil, nil
	a := Watch(&opts)
	out, err := Resolve(ctx, t, opts)
	if err != nil {
		return nil, err
	}
	a.Done(out)
	return a, nil
}

// Watch makes the resolve opts are for one whose Analysis can list its
// inputs: Done gives it the outcome.
func Watch(opts *Options) *Analysis {
	a := &Analysis{prefix: opts.Prefix}
	prev := opts.Loader.OnNew
	opts.Loader.OnNew = func(l *ldso.Loader) {
		if prev != nil {
			prev(l)
		}
		a.loaders = append(a.loaders, l)
	}
	return a
}

// Done records the outcome of the resolve Watch watched.
func (a *Analysis) Done(out *Outcome) { a.Outcome, a.Report = out, out.FinalScan }

// ProblemKind says what is wrong.
type ProblemKind string

// The kinds of problem a target can have.
const (
	ProblemMissing   ProblemKind = "missing"          // a library the loader (or a run-time open) does not find
	ProblemDriver    ProblemKind = "driver"           // the GPU driver's library is not found
	ProblemWrongCopy ProblemKind = "wrong_copy"       // another copy than the package's is found first
	ProblemFiles     ProblemKind = "missing_files"    // a required distribution lacks files its RECORD lists
	ProblemDist      ProblemKind = "distribution"     // a declared NVIDIA distribution is absent, damaged or at another version; another required one is not installed
	ProblemVersion   ProblemKind = "version"          // a symbol version the provider lacks
	ProblemSymbol    ProblemKind = "undefined_symbol" // a reference nothing in scope defines
	ProblemCheck     ProblemKind = "check"            // a check the loader does not make but the package fails
)

// Problem is one reason a target is not whole.
type Problem struct {
	Kind ProblemKind `json:"kind"`
	// Subject is what it is about: a soname, a distribution, an object.
	Subject string `json:"subject"`
	Detail  string `json:"detail"`
	// Advice is what makes it right when resolve will not (a declared
	// distribution at another version, or damaged in files cudadeps does
	// not place): the command to run. "" when resolve does it.
	Advice string `json:"advice,omitempty"`
}

// String is the problem on one line.
func (p Problem) String() string {
	return fmt.Sprintf("%s %s: %s", p.Kind, p.Subject, p.Detail)
}

// Notes are what the analysis found that keeps nothing from loading whole
// but a user should know: libraries the loader takes from elsewhere at
// exactly the release the package requires (a toolkit on LD_LIBRARY_PATH),
// one line each.
func (a *Analysis) Notes() []string {
	out := []string{}
	for _, sh := range a.Outcome.Shadowed {
		if sh.SameBuild() {
			out = append(out, sh.String()+": the same release, no wrong copy")
		}
	}
	return out
}

// Problems lists what keeps the target from loading whole, in a stable
// order: missing libraries, wrong copies, declared distributions not in
// place, distributions missing files, version errors, undefined symbols,
// then the checks. None means whole.
func (a *Analysis) Problems() []Problem {
	o := a.Outcome
	// What the package declares comes first: a missing library is most
	// often a declared distribution gone.
	var out []Problem
	stated := map[string]bool{}
	var met map[string]bool
	if a.Report != nil {
		met = metSonames(a.Report)
	}
	if cl := o.Distributions; cl != nil {
		for _, d := range cl.Dists {
			stated[d.Name] = true
			if inferredOnly(d, met) {
				// Only an inferred extra brings it and nothing loads its
				// files: the plan notes it and leaves it out.
				continue
			}
			if d.NeedsRestore() || d.State == declared.OtherVersion {
				p := Problem{Kind: ProblemDist, Subject: d.Name, Detail: distDetail(d)}
				if i := o.unresolvedDist(d.Name); i >= 0 {
					p.Advice = o.Unresolved[i].Advice
				}
				out = append(out, p)
			}
		}
	}
	// A required distribution that is not NVIDIA's and not installed:
	// pip's to install (refuseRequirements).
	for _, u := range o.Unresolved {
		if u.Kind == UnresolvedDistribution && !stated[u.Soname] {
			out = append(out, Problem{Kind: ProblemDist, Subject: u.Soname, Detail: u.Reason, Advice: u.Advice})
		}
	}
	out = append(out, a.missing()...)
	for _, u := range o.Unresolved {
		if u.Kind == UnresolvedShadowed {
			out = append(out, Problem{Kind: ProblemWrongCopy, Subject: u.Soname, Detail: strings.TrimPrefix(u.Reason, u.Soname+": ")})
		}
	}
	base := baseRequired(o.Target)
	for _, line := range o.Incomplete {
		name, rest, _ := strings.Cut(line, " ")
		n := pymeta.NormalizeName(name)
		if !stated[n] && (base == nil || base[n]) {
			out = append(out, Problem{Kind: ProblemFiles, Subject: name, Detail: rest})
		}
	}
	for _, v := range o.VersionErrors {
		if !v.Weak {
			out = append(out, Problem{Kind: ProblemVersion, Subject: v.Version, Detail: v.Message})
		}
	}
	out = append(out, a.undefined()...)
	for _, c := range o.Checks {
		out = append(out, Problem{Kind: ProblemCheck, Subject: o.Target.Name, Detail: c})
	}
	return out
}

// baseRequired are a Python target's distribution and those it requires
// without the extras counted because their distributions are installed
// (triton[tutorials] brings pandas): files missing from one of those are
// the target's problem, from the others theirs alone. nil when it cannot
// be told.
func baseRequired(t *Target) map[string]bool {
	if t == nil {
		return nil
	}
	res := t.baseRequirements()
	if res == nil {
		return nil
	}
	out := map[string]bool{pymeta.NormalizeName(t.Dist.Name): true}
	for _, dep := range res.Dependencies {
		out[pymeta.NormalizeName(dep.Name)] = true
	}
	return out
}

// distDetail says what is wrong with a declared distribution.
func distDetail(d *declared.Dist) string {
	s := string(d.State)
	if d.Version != "" && (d.State == declared.Absent || d.State == declared.OtherVersion) {
		s += ", wanted at " + d.Version
	}
	if d.Detail != "" {
		s += "; " + d.Detail
	}
	return s
}

// missing are the round's needs, each with who needs it.
func (a *Analysis) missing() []Problem {
	var out []Problem
	if len(a.Outcome.Rounds) == 0 {
		return nil
	}
	driver := map[string]bool{}
	for _, u := range a.Outcome.Unresolved {
		driver[u.Soname] = u.Kind == UnresolvedDriver
	}
	for _, n := range a.Outcome.Rounds[0].Missing {
		kind := ProblemMissing
		if driver[n.Soname] {
			kind = ProblemDriver
		}
		detail := "needed by " + firstOf(n.NeededBy)
		switch {
		case n.Restore:
			detail = "its file is gone from " + firstOf(n.NeededBy)
		case n.Runtime:
			detail = "opened at run time by " + firstOf(n.NeededBy)
		}
		out = append(out, Problem{Kind: kind, Subject: n.Soname, Detail: detail})
	}
	return out
}

// undefined are the strong references that would not bind, once each, as
// the resolve counted them: an optional module's references to its absent
// library (CuPy's cuTENSOR module without cuTENSOR) are not among them.
func (a *Analysis) undefined() []Problem {
	var out []Problem
	for _, u := range a.Outcome.UndefinedSymbols {
		out = append(out, Problem{Kind: ProblemSymbol, Subject: u.Symbol, Detail: u.Message()})
	}
	return out
}

// firstOf names the first of list and how many more there are.
func firstOf(list []string) string {
	switch len(list) {
	case 0:
		return "(unknown)"
	case 1:
		return list[0]
	}
	return fmt.Sprintf("%s and %d more", list[0], len(list)-1)
}

// Inputs lists the files and directories whose state the analysis
// depends on: what the loader model read and searched; for a Python
// target, the site directories, every distribution's metadata, the
// directories of every file the target's and its requirements' RECORDs
// list (whose presence decides what is missing), up to their site
// directory, and every file of the declared NVIDIA distributions (whose
// sizes decide whether they are damaged); the prefix's activation records.
func (a *Analysis) Inputs() []string {
	var out []string
	for _, l := range a.loaders {
		out = append(out, l.Inputs()...)
	}
	t := a.Outcome.Target
	if t.Path != "" {
		out = append(out, t.Path)
	}
	if t.Python != nil {
		for _, site := range t.Python.SiteDirs {
			out = append(out, metadataInputs(site)...)
		}
		for _, d := range append([]*pyenv.Dist{t.Dist}, t.Requires...) {
			out = append(out, fileDirs(d)...)
		}
	}
	if cl := a.Outcome.Distributions; cl != nil {
		for _, d := range cl.Dists {
			if d.Installed != nil {
				out = append(out, d.Installed.InfoDir)
				out = append(out, d.Installed.Files...)
			}
		}
	}
	if a.prefix != nil {
		dir := a.prefix.RecordsDir()
		out = append(out, a.prefix.Dir(), dir)
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	return out
}

// metadataInputs are a site directory, its files (.pth files change what
// is importable) and every *.dist-info directory in it with its files.
func metadataInputs(site string) []string {
	out := []string{site}
	ents, err := os.ReadDir(site)
	if err != nil {
		return out
	}
	// Hundreds of dist-info directories, listed side by side.
	lists := make([][]string, len(ents))
	workers.Each(len(ents), 0, func(i int) {
		e := ents[i]
		p := filepath.Join(site, e.Name())
		switch {
		case e.Type().IsRegular():
			lists[i] = []string{p}
		case e.IsDir() && strings.HasSuffix(e.Name(), ".dist-info"):
			lists[i] = []string{p}
			if files, err := os.ReadDir(p); err == nil {
				for _, f := range files {
					lists[i] = append(lists[i], filepath.Join(p, f.Name()))
				}
			}
		}
	})
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// fileDirs are the directories of a distribution's files, each with its
// parents up to the site directory: a file removed, or a directory
// replaced by a link elsewhere, changes one of them. A file outside the
// site directory (a script in bin/) counts by its own directory only.
func fileDirs(d *pyenv.Dist) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range d.Files {
		dir := filepath.Dir(f)
		if !strings.HasPrefix(dir+"/", d.SiteDir+"/") {
			if !seen[dir] {
				seen[dir] = true
				out = append(out, dir)
			}
			continue
		}
		for ; !seen[dir]; dir = filepath.Dir(dir) {
			seen[dir] = true
			out = append(out, dir)
			if dir == d.SiteDir {
				break
			}
		}
	}
	return out
}
