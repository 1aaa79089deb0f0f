package resolver

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/python/declared"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
	"github.com/cudadeps/cudadeps/python/pypi"
)

// RestoreMode says how a declared distribution that is not installed
// comes back.
type RestoreMode string

// The modes.
const (
	// RestoreInstall: its wheel, installed as an installer does: every file
	// at its RECORD path and a .dist-info whose INSTALLER names cudadeps.
	RestoreInstall RestoreMode = "install"
	// RestoreSupply: its libraries from NVIDIA's archive of the same
	// release, at the paths its wheel's RECORD gives; no .dist-info is
	// written, so pip check still lists it as missing.
	RestoreSupply RestoreMode = "supply"
)

// Restore is the declared distribution a step brings back.
type Restore struct {
	Dist    string      `json:"distribution"`
	Version string      `json:"version"`
	Mode    RestoreMode `json:"mode"`
	// Site is the site-packages directory it goes into.
	Site string `json:"site"`
	// Note says what the user should know: a newer release taken because
	// no source has the pinned one, files the release lacks.
	Note string `json:"note,omitempty"`

	dist *declared.Dist
}

// planRestores plans, for each declared distribution that is absent, the
// step that brings it back whole into site: the exact wheel from the index
// (SourceAuto with an index, SourcePyPI), else NVIDIA's archive of the same
// release (SourceAuto, SourceNVIDIA), else, only when no source has the
// pinned release, the nearest newer one of the same major, said in the
// note. What cannot come back is unresolved, naming every source tried.
// The needs the restored libraries meet are attached to their steps and
// returned apart from the rest. With no site ("": none this user may
// write), they come back into the store alone (storeOnly).
func (s *session) planRestores(needs []*Need, site string) ([]*Step, []Unresolved, []*Need) {
	if s.closure == nil || s.t.Kind != KindPython {
		return nil, nil, needs
	}
	var steps []*Step
	var un []Unresolved
	absent := map[string]bool{}
	for _, d := range s.closure.Dists {
		if d.State != declared.Absent {
			if leftAsIs(d) && !inferredOnly(d, s.met) {
				un = append(un, s.distProblem(d))
			}
			continue
		}
		// Its libraries come back with it, or not at all: never one by
		// one from other releases.
		absent[d.Name] = true
		if len(d.Conflicts) > 0 {
			un = append(un, s.distProblem(d))
			continue
		}
		if s.accepted[d.Name] {
			continue
		}
		if d.ViaExtra != "" && !s.declaredNeeded(d) {
			s.out.Notes = uniq.Append(s.out.Notes, fmt.Sprintf("%s %s is declared through the extra [%s] and not installed; nothing the package loads needs its files: not restored", d.Name, d.Version, d.ViaExtra))
			continue
		}
		st, u := s.restoreStep(d, site)
		if exact := s.exact[d.Name]; exact != "" && (u != nil || st == nil) {
			// No source has it; the copy the loader finds is the release.
			s.accepted[d.Name] = true
			s.out.Notes = uniq.Append(s.out.Notes, exact)
			continue
		}
		if u != nil {
			un = append(un, *u)
			continue
		}
		if st == nil {
			continue
		}
		if site == "" {
			storeOnly(st)
		}
		steps = append(steps, st)
	}
	var rest []*Need
	for _, n := range needs {
		if n.Owner == nil || !absent[pymeta.NormalizeName(n.Owner.Dist)] {
			rest = append(rest, n)
			continue
		}
		for _, st := range steps {
			if st.Restore.Dist == pymeta.NormalizeName(n.Owner.Dist) {
				st.Provides = uniq.Append(st.Provides, n.Soname)
				st.needs = append(st.needs, n)
			}
		}
	}
	return steps, un, rest
}

// findExact notes, for each absent declared distribution, whether the
// copies the loader finds elsewhere are exactly the required release: they
// are no wrong copies then, and when no source has the distribution they
// are accepted in its place.
func (s *session) findExact() {
	s.exact = map[string]string{}
	if s.closure == nil {
		return
	}
	for _, d := range s.closure.Dists {
		if d.State == declared.Absent {
			if note := s.systemCopyExact(d); note != "" {
				s.exact[d.Name] = note
			}
		}
	}
}

// systemCopyExact accepts copies the loader finds elsewhere (a system
// toolkit, ld.so.cache, LD_LIBRARY_PATH) for an absent distribution when
// each library of it the package uses is found at exactly the required
// version, by its file name; it says so, or returns "".
func (s *session) systemCopyExact(d *declared.Dist) string {
	if s.last == nil || d.Version == "" {
		return ""
	}
	met := s.met
	found := map[string]Shadow{}
	for _, sh := range s.layout.Shadows(s.last) {
		if pymeta.NormalizeName(sh.Owner.Dist) == d.Name {
			found[sh.Soname] = sh
		}
	}
	var seen []string
	for _, lib := range d.Libraries() {
		name := path.Base(lib.Path)
		if !met[name] {
			continue
		}
		sh, ok := found[name]
		if !ok || sh.FoundVersion == "" || !sameRelease(sh.FoundVersion, d.Version) {
			return ""
		}
		seen = append(seen, fmt.Sprintf("%s %s at %s", name, sh.FoundVersion, sh.Found))
	}
	if len(seen) == 0 {
		return ""
	}
	return fmt.Sprintf("%s is not installed and no source has it; the copies the loader finds are exactly the required %s (%s): accepted; pip check will still list %s as missing",
		d.Name, d.Version, strings.Join(seen, "; "), d.Name)
}

// sameRelease says whether two versions name one release, one possibly
// shortened (a file libcudnn.so.9.19.0 is cuDNN 9.19.0.56).
func sameRelease(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

// refuseDistributions reports, after the last round, every declared
// distribution that cudadeps will not restore (at another version, or in
// conflict) that no plan reported: when nothing is missing no plan is
// made, yet the package's metadata still says what it needs, and a cuDNN
// older than the pin loads and fails at run time. A dry run reports them
// too: they are no step of its plan. So is a distribution still damaged
// (files its RECORD lists missing or changed) once the plan's libraries
// are counted: check reports it, and resolve does not call it whole.
func (s *session) refuseDistributions() {
	if s.out.DistributionsAfter == nil {
		return
	}
	for _, d := range s.out.DistributionsAfter.Dists {
		var u Unresolved
		switch {
		case inferredOnly(d, s.met):
			continue
		case leftAsIs(d):
			u = s.distProblem(d)
		case d.State == declared.Damaged:
			left := s.damageLeft(d)
			if len(left) == 0 {
				continue
			}
			u = s.damageProblem(d, left)
		default:
			continue
		}
		if s.out.unresolvedDist(d.Name) >= 0 {
			continue
		}
		s.out.Unresolved = append(s.out.Unresolved, u)
		s.out.OK = false
	}
}

// refuseRequirements reports, after the last round, each distribution the
// target's requirements pin to one release (==V) that is not installed and
// is not NVIDIA's (those are declared and restored): a companion built in
// lockstep with the package, its native half. jax-cuda13-plugin without
// jax-cuda13-pjrt==0.11.2 (pip install --no-deps) loads whole, and JAX
// runs on the CPU. cudadeps brings only NVIDIA's distributions: pip is the
// one to install it. A range (sympy>=1.13.3) names no such companion, and
// requirements that only an extra brings are left out.
func (s *session) refuseRequirements() {
	res := s.t.baseRequirements()
	if res == nil {
		return
	}
	for _, dep := range res.Dependencies {
		name := pymeta.NormalizeName(dep.Name)
		if dep.Installed != nil || (s.out.DistributionsAfter != nil && s.out.DistributionsAfter.Find(name) != nil) || s.out.unresolvedDist(name) >= 0 ||
			!slices.ContainsFunc(dep.RequiredBy, func(e pymeta.Edge) bool { return pinsOne(e.Requirement.Specifier) }) {
			continue
		}
		var by, specs, said []string
		for _, e := range dep.RequiredBy {
			by = uniq.Append(by, e.By+" "+e.ByVersion)
			specs = uniq.Append(specs, e.Requirement.Specifier.String())
			said = uniq.Append(said, fmt.Sprintf("%s %s requires %s", e.By, e.ByVersion, e.Requirement.String()))
		}
		req := name
		if len(specs) == 1 {
			req += specs[0]
		}
		s.out.Unresolved = append(s.out.Unresolved, Unresolved{Soname: name, NeededBy: by, Kind: UnresolvedDistribution,
			// The reason follows the name where it is shown: "jax-cuda13-pjrt: not installed; ...".
			Reason: "not installed; " + strings.Join(said, "; "),
			Advice: fmt.Sprintf("install it: pip install '%s'", req)})
		s.out.OK = false
	}
}

// unresolvedDist is the index in o.Unresolved of the entry for the
// distribution name (kind distribution), or -1.
func (o *Outcome) unresolvedDist(name string) int {
	return slices.IndexFunc(o.Unresolved, func(u Unresolved) bool { return u.Kind == UnresolvedDistribution && u.Soname == name })
}

// pinsOne says that a specifier admits one release only: ==V (not V.*),
// or ===V.
func pinsOne(set pymeta.SpecifierSet) bool {
	return slices.ContainsFunc(set, func(sp pymeta.Specifier) bool {
		return sp.Op == "===" || (sp.Op == "==" && !strings.HasSuffix(sp.Version, "*"))
	})
}

// damageLeft are the files of a damaged distribution (declared.Dist.Damage)
// that no step of a dry run's plan brings back; in a real run, the last
// round's scan saw what was placed.
func (s *session) damageLeft(d *declared.Dist) []string {
	if !s.out.DryRun {
		return d.Damage
	}
	var planned []string
	repaired := map[string]bool{}
	for _, r := range s.out.Rounds {
		if r.Plan != nil {
			for _, st := range r.Plan.Steps {
				planned = append(planned, st.Provides...)
				for _, rel := range st.Repairs {
					repaired[filepath.Join(st.repairSite, filepath.FromSlash(rel))] = true
				}
			}
		}
	}
	return slices.DeleteFunc(slices.Clone(d.Damage), func(p string) bool {
		return repaired[p] || slices.Contains(planned, filepath.Base(p)) && d.Owns(filepath.Base(p))
	})
}

// damageProblem is the unresolved entry of a distribution left damaged:
// the files, and how to make it whole.
func (s *session) damageProblem(d *declared.Dist, left []string) Unresolved {
	u := Unresolved{Soname: d.Name, NeededBy: d.RequiredBy, Kind: UnresolvedDistribution,
		Reason: fmt.Sprintf("%s %s is damaged: %d of its files missing or changed that cudadeps does not bring back (%s)", d.Name, d.InstalledVersion, len(left), pyenv.NameFiles(left)),
		Advice: cmp.Or(s.undoAdvice(d), fmt.Sprintf("reinstall it: pip install --force-reinstall --no-deps '%s==%s'", d.Name, d.Version))}
	return u
}

// undoAdvice is the way back for a distribution cudadeps placed (its wheel
// installed, or its libraries supplied): undo takes back whole what the
// record names, the distribution is then absent, and the next resolve
// restores it at the pin. "" for one cudadeps did not place.
func (s *session) undoAdvice(d *declared.Dist) string {
	if d.Installer != Installer && d.Supply == nil {
		return ""
	}
	by := s.placedFor(d.Name)
	if by == "" {
		return ""
	}
	return fmt.Sprintf("cudadeps placed it for %s: run 'cudadeps undo %s', then resolve again to restore %s %s", by, by, d.Name, d.Version)
}

// placedPaths are the files cudadeps placed: this resolve's rounds, and
// every target's record in the prefix.
func (s *session) placedPaths() map[string]bool {
	out := map[string]bool{}
	for _, r := range s.out.Rounds {
		for _, p := range r.Placed {
			out[p.Path] = true
		}
	}
	for _, r := range s.records() {
		for _, p := range r.Placed {
			out[p.Path] = true
		}
	}
	return out
}

// leftAsIs says that cudadeps changes none of an installed declared
// distribution's files: it is at another version, or restoring it would
// overwrite another distribution's files. pip is the one to change it.
func leftAsIs(d *declared.Dist) bool {
	return d.State == declared.OtherVersion || len(d.Conflicts) > 0
}

// leftToPip names the declared distribution that owns the library
// soname, installed, when cudadeps leaves it to pip (refuseDistributions);
// "" otherwise.
func (s *session) leftToPip(soname string) string {
	o := s.layout.Owner(soname)
	if o == nil || !o.Present || s.out.DistributionsAfter == nil {
		return ""
	}
	if d := s.out.DistributionsAfter.Find(o.Dist); d != nil && leftAsIs(d) {
		return d.Name
	}
	return ""
}

// foundOwnedCopy says that a run failure blamed on soname is no round's
// to fix: the run found the library (it failed on its release, a symbol
// or a symbol version, never on its absence), a required distribution that
// is installed owns it, and no copy placed where the package searches
// could be the one that loads instead: its own copy loads, or the copy
// found first is one placement cannot win (finish reports that with its
// remedy). torch failing on the system's cuDNN 9.14 sub-libraries on
// LD_LIBRARY_PATH blames libcudnn.so.9: another cuDNN beside pip's would
// change nothing.
func (s *session) foundOwnedCopy(v *Verification, soname string, shadows []Shadow) bool {
	if slices.Contains(v.Missing, soname) {
		return false
	}
	for _, p := range v.Probes {
		for _, f := range p.Failures {
			if f.Library == soname && f.Kind == "not_found" {
				return false
			}
		}
	}
	o := s.layout.Owner(soname)
	if o == nil || !o.Present {
		return false
	}
	return !slices.ContainsFunc(shadows, func(sh Shadow) bool { return sh.Soname == soname && sh.Fixable })
}

// distProblem is the unresolved entry of a declared distribution that
// cudadeps will not restore: at another version, or in conflict.
func (s *session) distProblem(d *declared.Dist) Unresolved {
	u := Unresolved{Soname: d.Name, NeededBy: d.RequiredBy, Kind: UnresolvedDistribution}
	if len(d.Conflicts) > 0 {
		u.Reason = fmt.Sprintf("%s %s would overwrite another distribution's files: %s", d.Name, d.Version, strings.Join(d.Conflicts, "; "))
		u.Advice = "uninstall the other distribution (pip uninstall), then resolve again"
		return u
	}
	u.Reason = d.Detail
	u.Advice = cmp.Or(s.undoAdvice(d), fmt.Sprintf("install the required version: pip install '%s==%s'", d.Name, d.Version))
	return u
}

// placedFor names the target whose resolve placed the files of the
// distribution name (installed its wheel, or supplied it from an
// archive), as its record says; "" when no record does.
func (s *session) placedFor(name string) string {
	for _, r := range s.records() {
		if slices.ContainsFunc(r.Placed, func(p activation.Placed) bool { return p.Dist == name }) ||
			slices.ContainsFunc(r.Supplied, func(sp declared.Supply) bool { return sp.Name == name }) {
			return r.Name
		}
	}
	return ""
}

// restoreStep is the step that restores d, or why none can.
func (s *session) restoreStep(d *declared.Dist, site string) (*Step, *Unresolved) {
	if d.Version == "" {
		if !s.declaredNeeded(d) {
			s.out.Notes = append(s.out.Notes, fmt.Sprintf("%s is declared (%s) and not installed; %s, and nothing the package loads needs its files: not restored", d.Name, strings.Join(d.RequiredBy, "; "), d.Why))
			return nil, nil
		}
		return nil, &Unresolved{Soname: d.Name, NeededBy: d.RequiredBy, Kind: UnresolvedDistribution,
			Reason: fmt.Sprintf("%s is declared and not installed, and no version of it can be chosen: %s", d.Name, d.Why)}
	}
	var tried []string
	for _, newer := range []bool{false, true} {
		if s.wheels != nil {
			st, err := s.restoreWheel(d, site, newer)
			if err == nil {
				return st, nil
			}
			if !newer {
				tried = append(tried, "the package index: "+err.Error())
			}
		}
		if s.wheels == nil || !s.wheels.only {
			st, err := s.restoreArchive(d, site, newer)
			if err == nil {
				return st, nil
			}
			if !newer {
				tried = append(tried, "NVIDIA's archives: "+err.Error())
			}
		}
	}
	if d.MetadataOnly {
		s.out.Notes = append(s.out.Notes, fmt.Sprintf("%s %s installs no files (its extras only pin the toolkit's wheels): nothing to place; pip check will list it until it is installed (%s)", d.Name, d.Version, strings.Join(tried, "; ")))
		return nil, nil
	}
	u := &Unresolved{Soname: d.Name, NeededBy: d.RequiredBy, Kind: UnresolvedDistribution,
		Reason: fmt.Sprintf("%s %s (%s) is not installed, and no source has it: %s", d.Name, d.Version, d.Why, strings.Join(tried, "; "))}
	switch {
	case s.wheels == nil:
		u.Advice = fmt.Sprintf("give a package index that has it (--index-url), or install it with pip install '%s==%s'", d.Name, d.Version)
	default:
		u.Advice = fmt.Sprintf("serve %s %s from the index or the mirror, or install it with pip install '%s==%s'", d.Name, d.Version, d.Name, d.Version)
	}
	if !s.declaredNeeded(d) {
		s.out.Notes = append(s.out.Notes, u.Reason+"; nothing the package loads needs its files")
		return nil, nil
	}
	return nil, u
}

// unneededExtra reports an absent distribution declared only through an
// extra that the package's objects do not need (planRestores leaves it
// out, with a note): its RECORD's libraries are no need of their own.
func (s *session) unneededExtra(d *declared.Dist) bool { return unneededExtra(d, s.met) }

// unneededExtra is the rule of session.unneededExtra for the sonames met
// (metSonames of the last scan): check's analysis applies it too.
func unneededExtra(d *declared.Dist, met map[string]bool) bool {
	return d != nil && d.State == declared.Absent && inferredOnly(d, met)
}

// inferredOnly says that only an inferred extra brings d (installers do
// not record the extras asked for) and nothing the package loads is
// among its files: whatever its state, it is no need of the package's.
func inferredOnly(d *declared.Dist, met map[string]bool) bool {
	return d.ViaExtra != "" && !usesFiles(d, met)
}

// declaredNeeded says whether the package loads or opens a library of d;
// false too when d's files are not known.
func (s *session) declaredNeeded(d *declared.Dist) bool { return usesFiles(d, s.met) }

// usesFiles says whether one of d's libraries is among the sonames met.
func usesFiles(d *declared.Dist, met map[string]bool) bool {
	if len(d.Files) == 0 {
		return false
	}
	return slices.ContainsFunc(d.Libraries(), func(f catalog.WheelFile) bool { return met[path.Base(f.Path)] })
}

// restoreWheel is the step that installs d's exact wheel from the index,
// or with newer the nearest newer release of the same major it has.
func (s *session) restoreWheel(d *declared.Dist, site string, newer bool) (*Step, error) {
	files, err := s.wheels.files(s.ctx, d.Name)
	if err != nil {
		return nil, err
	}
	host := s.wheelHost()
	version, note := d.Version, ""
	if newer {
		version = newerSameMajor(indexVersions(files, d.Name, true), d.Version)
		if version == "" {
			return nil, fmt.Errorf("no newer %s release of %s", dotted.Major(d.Version), d.Name)
		}
		note = fmt.Sprintf("no source has %s %s: the index's %s, the nearest newer release of the same major, is installed instead", d.Name, d.Version, version)
	}
	f, wh, err := pypi.Choose(files, d.Name, version, host)
	if err != nil {
		return nil, fmt.Errorf("no wheel of %s %s for %s (it has: %s)", d.Name, version, host, orNone(indexVersions(files, d.Name, true)))
	}
	st, err := s.wheelStep(f, wh)
	if err != nil {
		return nil, err
	}
	st.Project, st.Pin = d.Name, d.Why
	if dd, ok := s.wheels.dists.Lookup(d.Name); ok {
		st.Component = dd.Components[0]
	}
	if c, ok := s.opts.Catalog.Component(st.Component); ok {
		st.Product = c.Product
	}
	st.Restore = &Restore{Dist: d.Name, Version: wh.Version, Mode: RestoreInstall, Site: site, Note: note, dist: d}
	for _, lib := range d.Libraries() {
		st.Sonames = uniq.Append(st.Sonames, path.Base(lib.Path))
	}
	return st, nil
}

// restoreArchive is the step that supplies d's libraries from NVIDIA's
// archive of the same release (with newer: of the nearest newer release of
// the same major): one archive, so that a library family (cuDNN's
// sub-libraries, NVRTC and its builtins) is never mixed across releases.
func (s *session) restoreArchive(d *declared.Dist, site string, newer bool) (*Step, error) {
	dists, err := catalog.EmbeddedDistributions()
	if err != nil {
		return nil, err
	}
	dd, ok := dists.Lookup(d.Name)
	if !ok {
		return nil, fmt.Errorf("cudadeps knows no NVIDIA component that %s carries", d.Name)
	}
	var have []string
	var best *Step
	for _, compName := range dd.Components {
		comp, ok := s.opts.Catalog.Component(compName)
		if !ok {
			continue
		}
		// Releases are newest first: the last newer one seen is the nearest.
		for _, r := range comp.Releases {
			for _, a := range r.Archives {
				if !a.Fits(r, s.out.Platform, s.out.CUDAMajor) {
					continue
				}
				have = uniq.Append(have, r.Version)
				switch {
				case !newer && dd.MatchesVersion(d.Version, r.Version):
					return s.archiveStep(d, comp, r, a, site), nil
				case newer && dotted.Major(r.Version) == dotted.Major(d.Version) && dotted.Compare(r.Version, d.Version) > 0 && !dd.MatchesVersion(d.Version, r.Version):
					best = s.archiveStep(d, comp, r, a, site)
					best.Restore.Note = strings.TrimPrefix(best.Restore.Note+"; ", "; ") + fmt.Sprintf("no source has %s %s: NVIDIA's %s %s, the nearest newer release of the same major, is supplied instead", d.Name, d.Version, comp.Name, r.Version)
				}
			}
		}
	}
	if best != nil {
		return best, nil
	}
	if len(have) == 0 {
		return nil, fmt.Errorf("NVIDIA publishes no archive of %s for %s (CUDA %d): take the wheel %s==%s from a package index (--source auto or pypi with --index-url)",
			strings.Join(dd.Components, ", "), s.out.Platform, s.out.CUDAMajor, d.Name, d.Version)
	}
	return nil, fmt.Errorf("no archive of %s %s for %s (the catalogs have: %s)", strings.Join(dd.Components, ", "), d.Version, s.out.Platform, orNone(have))
}

// archiveStep is the step for one archive that restores d.
func (s *session) archiveStep(d *declared.Dist, comp *catalog.Component, r *catalog.Release, a *catalog.Archive, site string) *Step {
	st := &Step{Source: SourceNVIDIA, Component: comp.Name, Product: comp.Product, Version: r.Version, Platform: a.Platform, CUDAVariant: a.CUDAVariant,
		URL: s.opts.Catalog.URL(comp, a), SHA256: a.SHA256, Size: a.Size, Sonames: a.Sonames, Provides: []string{}, Pin: d.Why}
	st.Restore = &Restore{Dist: d.Name, Version: d.Version, Mode: RestoreSupply, Site: site, dist: d}
	var lacking []string
	for _, lib := range d.Libraries() {
		if name := path.Base(lib.Path); len(a.Sonames) > 0 && !slices.Contains(a.Sonames, name) {
			lacking = append(lacking, name)
		}
	}
	if len(lacking) > 0 {
		st.Restore.Note = fmt.Sprintf("%s %s's archive lacks %s, which the wheel has: not placed (no other release is mixed in)", comp.Name, r.Version, strings.Join(lacking, ", "))
	}
	return st
}

// newerSameMajor is the oldest version in have newer than v with v's major,
// or "".
func newerSameMajor(have []string, v string) string {
	best := ""
	for _, h := range have {
		if dotted.Major(h) == dotted.Major(v) && compareWheelVersions(h, v) > 0 && (best == "" || compareWheelVersions(h, best) < 0) {
			best = h
		}
	}
	return best
}

// decideRestore places a restored distribution's libraries at its wheel's
// RECORD paths under its site; a wheel's other files and .dist-info are
// written when it is installed.
func decideRestore(st *Step) Decision {
	if st.Restore.Site == "" {
		return decideStore(st)
	}
	d := Decision{Step: st}
	byDir := map[string]*Placement{}
	var dirs []string
	for _, lib := range st.Restore.dist.Libraries() {
		name := path.Base(lib.Path)
		if st.Restore.Mode == RestoreSupply && len(st.Sonames) > 0 && !slices.Contains(st.Sonames, name) {
			continue
		}
		dir := filepath.Join(st.Restore.Site, filepath.FromSlash(path.Dir(lib.Path)))
		p, ok := byDir[dir]
		if !ok {
			_, err := os.Stat(dir)
			p = &Placement{Dir: dir, HostDir: dir, Entry: "RECORD of " + st.Restore.Dist + " " + st.Restore.Version, Create: errors.Is(err, os.ErrNotExist), Owner: st.Restore.Dist}
			byDir[dir] = p
			dirs = append(dirs, dir)
		}
		p.Names = uniq.Append(p.Names, name)
		for _, n := range st.needs {
			if n.Soname == name {
				for _, by := range n.NeededBy {
					p.For = uniq.Append(p.For, by)
				}
			}
		}
	}
	for _, dir := range dirs {
		d.Placements = append(d.Placements, *byDir[dir])
	}
	return d
}
