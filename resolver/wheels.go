package resolver

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/internal/filehash"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/internal/urlpolicy"
	"github.com/cudadeps/cudadeps/platform"
	"github.com/cudadeps/cudadeps/python/declared"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
	"github.com/cudadeps/cudadeps/python/pypi"
)

// Source is where libraries come from: what a resolve may take
// (Options.Source) and where a step's file comes from (Step.Source, and a
// plan's steps). A step's is SourceNVIDIA or SourcePyPI.
type Source string

// The sources.
const (
	// SourceAuto takes the exact wheel a required distribution pins from
	// the package index when one is configured, and NVIDIA's archives for
	// everything else and for what the index lacks.
	SourceAuto Source = "auto"
	// SourceNVIDIA takes NVIDIA's redistributable archives only.
	SourceNVIDIA Source = "nvidia"
	// SourcePyPI takes wheels from the package index only: a pinned
	// distribution's exact wheel, and for other libraries the wheel the
	// curated distribution table names for their component.
	SourcePyPI Source = "pypi"
)

// Sources are the values Options.Source takes, for flags and messages.
func Sources() []Source { return []Source{SourceAuto, SourceNVIDIA, SourcePyPI} }

// ParseSource reads a source as the command line names it.
func ParseSource(s string) (Source, error) {
	for _, src := range Sources() {
		if string(src) == s {
			return src, nil
		}
	}
	return "", fmt.Errorf("source %q: want %s, %s or %s", s, SourceAuto, SourceNVIDIA, SourcePyPI)
}

// ErrNoIndex is returned when SourcePyPI is asked for with no index.
var ErrNoIndex = errors.New("wheels were asked for (source pypi), and no package index is configured")

// wheels plans wheels from a package index for one resolve.
type wheels struct {
	client *pypi.Client
	dists  *catalog.Distributions
	// only is set for SourcePyPI: no archive is planned.
	only bool
	// pages caches each project's files (or the failure) for the session.
	pages map[string]indexPage
}

type indexPage struct {
	files []pypi.File
	err   error
}

// newWheels checks the source and, when wheels may be used, prepares them;
// nil means archives only.
func newWheels(opts Options) (*wheels, error) {
	switch opts.Source {
	case "", SourceAuto:
		if opts.Index == nil {
			return nil, nil
		}
	case SourceNVIDIA:
		return nil, nil
	case SourcePyPI:
		if opts.Index == nil {
			return nil, ErrNoIndex
		}
	default:
		_, err := ParseSource(string(opts.Source))
		return nil, err
	}
	dists, err := catalog.EmbeddedDistributions()
	if err != nil {
		return nil, err
	}
	return &wheels{client: opts.Index, dists: dists, only: opts.Source == SourcePyPI, pages: map[string]indexPage{}}, nil
}

// files lists a project's files on the index, once per session.
func (w *wheels) files(ctx context.Context, project string) ([]pypi.File, error) {
	key := pymeta.NormalizeName(project)
	if p, ok := w.pages[key]; ok {
		return p.files, p.err
	}
	files, err := w.client.Files(ctx, project)
	w.pages[key] = indexPage{files, err}
	return files, err
}

// planWithWheels plans the needs with wheels first: each library a
// required distribution owns comes as that distribution's wheel at its
// pinned (else installed) version. With SourceAuto the rest, and what the
// index lacks, go to NVIDIA's archives; with SourcePyPI the rest map to
// wheels through the distribution table, and what the index lacks stays
// unresolved.
func (s *session) planWithWheels(needs []*Need) *Plan {
	w := s.wheels
	host := s.wheelHost()
	p := &Plan{Platform: s.out.Platform, CUDAMajor: s.out.CUDAMajor, Steps: []*Step{}, Unresolved: []Unresolved{}}
	byKey := map[fetch.Key]*Step{}
	add := func(st *Step, n *Need) {
		if old, ok := byKey[st.Key()]; ok {
			st = old
		} else {
			byKey[st.Key()] = st
			p.Steps = append(p.Steps, st)
		}
		st.Provides = uniq.Append(st.Provides, n.Soname)
		st.needs = append(st.needs, n)
	}
	var rest []*Need
	for _, n := range needs {
		d := s.requiredDist(n)
		if d == nil {
			rest = append(rest, n)
			continue
		}
		st, err := s.pinnedWheel(n, d, host)
		switch {
		case err == nil:
			add(st, n)
		case w.only:
			p.Unresolved = append(p.Unresolved, Unresolved{Soname: n.Soname, NeededBy: n.NeededBy, Kind: UnresolvedNoWheel, Reason: err.Error(),
				Advice: "serve that wheel from the package index, or use --source auto to take NVIDIA's archive at the pinned version"})
		default:
			s.opts.Logger.Info("no wheel at the pin on the index; NVIDIA's archives are asked instead", "soname", n.Soname, "reason", err)
			rest = append(rest, n)
		}
	}
	s.restoreSiblings(p.Steps)
	archives := MakePlan(rest, s.opts.Catalog, p.Platform, p.CUDAMajor)
	p.Unresolved = append(p.Unresolved, archives.Unresolved...)
	if !w.only {
		p.Steps = append(p.Steps, archives.Steps...)
		return p
	}
	for _, a := range archives.Steps {
		st, err := s.tableWheel(a, host)
		if err != nil {
			for _, n := range a.needs {
				p.Unresolved = append(p.Unresolved, Unresolved{Soname: n.Soname, NeededBy: n.NeededBy, Kind: UnresolvedNoWheel, Reason: err.Error(),
					Advice: "use --source auto or nvidia to take NVIDIA's archive " + a.Component + " " + a.Version})
			}
			continue
		}
		for _, n := range a.needs {
			add(st, n)
		}
	}
	return p
}

// requiredDist is the installed distribution, required by the target,
// whose RECORD lists the need's library; nil when none does.
func (s *session) requiredDist(n *Need) *pyenv.Dist {
	if n.Owner == nil || n.Pin.Version == "" {
		return nil
	}
	for _, d := range s.t.Requires {
		if pymeta.NormalizeName(d.Name) == pymeta.NormalizeName(n.Owner.Dist) {
			return d
		}
	}
	return nil
}

// pinnedWheel is the step for the wheel of d at the need's pinned version.
func (s *session) pinnedWheel(n *Need, d *pyenv.Dist, host pypi.Host) (*Step, error) {
	version := n.Pin.Version
	files, err := s.wheels.files(s.ctx, d.Name)
	if err != nil {
		return nil, err
	}
	f, wh, err := pypi.Choose(files, d.Name, version, host)
	if err != nil {
		if have := indexVersions(files, d.Name, false); !slices.ContainsFunc(have, func(v string) bool { return strings.EqualFold(v, version) }) {
			return nil, fmt.Errorf("%s is pinned to %s %s (by %s), and the index has no wheel of that version (it has: %s)",
				n.Soname, d.Name, version, n.Pin.By, orNone(have))
		}
		return nil, err
	}
	st, err := s.wheelStep(f, wh)
	if err != nil {
		return nil, err
	}
	st.Project = d.Name
	if dd, ok := s.wheels.dists.Lookup(d.Name); ok {
		st.Component = dd.Components[0]
	}
	if c, ok := s.opts.Catalog.Component(st.Component); ok {
		st.Product = c.Product
	}
	st.Pin = fmt.Sprintf("pinned %s (by %s): the index has this wheel", version, n.Pin.By)
	st.members = map[string]wheelMember{}
	for i, f := range d.Files {
		name := filepath.Base(f)
		if i >= len(d.Record) || !isSharedLibrary(name) {
			continue
		}
		st.Sonames = uniq.Append(st.Sonames, name)
		r := d.Record[i]
		m := wheelMember{path: r.Path}
		if r.HashAlgo == "sha256" && len(r.Hash) == sha256.Size {
			m.sha256 = r.Hash
		}
		st.members[name] = m
	}
	if strings.EqualFold(wh.Version, d.Version) {
		s.addRepairs(st, d)
	}
	return st, nil
}

// addRepairs gives the step for a wheel of d's installed release the other
// files of d that its RECORD lists and the disk lacks (declared.Dist's
// Damage): the same verified file holds them, at the same paths.
func (s *session) addRepairs(st *Step, d *pyenv.Dist) {
	if s.closure == nil {
		return
	}
	dd := s.closure.Find(pymeta.NormalizeName(d.Name))
	if dd == nil || dd.State != declared.Damaged || len(dd.Damage) == 0 {
		return
	}
	gone := map[string]bool{}
	for _, p := range dd.Damage {
		if _, err := os.Lstat(p); err != nil {
			gone[p] = true // missing; a file of another size stays pip's
		}
	}
	for i, f := range d.Files {
		if i >= len(d.Record) || !gone[f] || isSharedLibrary(filepath.Base(f)) {
			continue
		}
		r := d.Record[i]
		if first, _, _ := strings.Cut(r.Path, "/"); strings.HasSuffix(first, ".dist-info") || !safeRecordPath(r.Path) {
			continue
		}
		m := wheelMember{path: r.Path}
		if r.HashAlgo == "sha256" && len(r.Hash) == sha256.Size {
			m.sha256 = r.Hash
		}
		st.repairs = append(st.repairs, m)
		st.Repairs = append(st.Repairs, r.Path)
	}
	st.repairSite = d.SiteDir
}

// wheelMember is where a library lies in a wheel, as the installed RECORD
// says (the same path relative to site-packages), and its sha256 there.
type wheelMember struct {
	path   string
	sha256 []byte
}

// restoreSiblings adds to each pinned wheel's step the other libraries of
// its distribution that RECORD lists and the disk lacks: they come in the
// same verified file, and a library opened only at run time is among them.
func (s *session) restoreSiblings(steps []*Step) {
	for _, st := range steps {
		if st.members == nil || len(st.needs) == 0 {
			continue
		}
		dist := st.needs[0].Owner.Dist
		for _, o := range s.layout.MissingLibraries() {
			if o.Dist != dist || slices.Contains(st.Provides, o.Name) {
				continue
			}
			if _, done := s.handled[o.Name]; done {
				continue
			}
			st.Provides = append(st.Provides, o.Name)
			st.needs = append(st.needs, &Need{Soname: o.Name, NeededBy: []string{o.Describe()}, Restore: true, Owner: o, Pin: st.needs[0].Pin})
		}
	}
}

// tableWheel is the wheel that the distribution table names for an
// archive's component: the version the catalog chose when the index has
// it, else the index's newest of the same major version.
func (s *session) tableWheel(a *Step, host pypi.Host) (*Step, error) {
	names := s.wheels.dists.ForComponent(a.Component, s.out.CUDAMajor)
	if len(names) == 0 {
		return nil, fmt.Errorf("no Python distribution that cudadeps knows carries %s (for %s)", a.Component, strings.Join(a.Provides, ", "))
	}
	var why []string
	for _, name := range names {
		d, _ := s.wheels.dists.Lookup(name)
		files, err := s.wheels.files(s.ctx, name)
		if errors.Is(err, pypi.ErrNoProject) {
			why = append(why, name+": not on the index")
			continue
		}
		if err != nil {
			return nil, err
		}
		versions := indexVersions(files, name, true)
		slices.SortStableFunc(versions, func(x, y string) int {
			// The catalog's own release first, then newest first.
			mx, my := d.MatchesVersion(x, a.Version), d.MatchesVersion(y, a.Version)
			if mx != my {
				if mx {
					return -1
				}
				return 1
			}
			return compareWheelVersions(y, x)
		})
		var live []pypi.File
		for _, f := range files {
			if !f.Yanked {
				live = append(live, f)
			}
		}
		for _, v := range versions {
			if dotted.Major(v) != dotted.Major(a.Version) {
				continue
			}
			f, wh, err := pypi.Choose(live, name, v, host)
			if err != nil {
				continue
			}
			st, err := s.wheelStep(f, wh)
			if err != nil {
				return nil, err
			}
			st.Project, st.Component, st.Product, st.Sonames = name, a.Component, a.Product, a.Sonames
			return st, nil
		}
		why = append(why, fmt.Sprintf("%s: no wheel of a %s.x version for %s (the index has: %s)", name, dotted.Major(a.Version), host, orNone(versions)))
	}
	return nil, errors.New(strings.Join(why, "; "))
}

// wheelStep is a step for one file of the index, ready to download.
func (s *session) wheelStep(f pypi.File, wh pypi.Wheel) (*Step, error) {
	f, err := s.wheels.client.Complete(s.ctx, f)
	if err != nil {
		return nil, err
	}
	return &Step{Source: SourcePyPI, Component: pymeta.NormalizeName(wh.Name), Version: wh.Version, Platform: s.out.Platform,
		URL: urlpolicy.Redact(f.URL), SHA256: f.SHA256, Size: f.Size, Filename: f.Filename, Index: urlpolicy.Redact(f.Index),
		Provides: []string{}, Sonames: []string{}, fetchURL: f.URL}, nil
}

// indexVersions are the versions of project's wheels on the index, newest
// first; live leaves out yanked files.
func indexVersions(files []pypi.File, project string, live bool) []string {
	var out []string
	for _, f := range files {
		w, err := pypi.ParseWheel(f.Filename)
		if err != nil || pymeta.NormalizeName(w.Name) != pymeta.NormalizeName(project) || live && f.Yanked {
			continue
		}
		if !slices.Contains(out, w.Version) {
			out = append(out, w.Version)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return compareWheelVersions(b, a) })
	return out
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	if len(list) > 12 {
		list = append(slices.Clone(list[:12]), fmt.Sprintf("and %d more", len(list)-12))
	}
	return strings.Join(list, ", ")
}

// wheelHost is what wheel tags are matched against: the machine of the
// scanned objects, the glibc of their loader, the environment's Python.
func (s *session) wheelHost() pypi.Host {
	var h pypi.Host
	if s.last != nil {
		for _, r := range s.last.Roots {
			if r.Result != nil && r.Result.Arch != nil {
				h.Machine = platform.MachineName(r.Result.Arch.Machine)
				h.Glibc = r.Result.Arch.GlibcVersion
				break
			}
		}
	}
	if h.Machine == "" {
		if m := platform.Machine(s.out.Platform); m != elf.EM_NONE {
			h.Machine = platform.MachineName(m)
		}
	}
	if s.t.Python != nil {
		if f := strings.SplitN(s.t.Python.Version, ".", 3); len(f) >= 2 {
			h.Python = f[0] + "." + f[1]
		}
	}
	h.JetsonL4T = jetsonL4T(s.out.Host, s.out.CUDAMajor)
	return h
}

// repair puts back the step's Repairs from its wheel, each at its RECORD
// path with the content the RECORD's sha256 names.
func (s *session) repair(r *Round, e fetch.Entry, st *Step) error {
	var files []activation.File
	for _, m := range st.repairs {
		if !slices.Contains(e.Files, m.path) {
			return fmt.Errorf("%s: the wheel has no %s, which %s's RECORD lists", st.Filename, m.path, st.Project)
		}
		from := filepath.Join(e.Dir, filepath.FromSlash(m.path))
		if m.sha256 != nil {
			sum, err := filehash.SHA256(from)
			if err != nil {
				return fmt.Errorf("%s: %w", from, err)
			}
			if sum != hex.EncodeToString(m.sha256) {
				return fmt.Errorf("%s: %s in the wheel is not the file the installed RECORD lists (its sha256 differs)", st.Filename, m.path)
			}
		}
		files = append(files, activation.File{Path: filepath.Join(st.repairSite, filepath.FromSlash(m.path)), From: from, Component: st.Component, Dist: st.Project})
	}
	if len(files) == 0 {
		return nil
	}
	placed, err := s.change.Place(e.Key, files, s.opts.Copy)
	r.Placed = append(r.Placed, placed...)
	return err
}

// memberFile is a wheel's file for a library a RECORD lists: at the path
// RECORD gives, with the content RECORD's sha256 says, or "" when the
// wheel lays it out elsewhere.
func memberFile(e fetch.Entry, s *Step, name string) (string, error) {
	m, ok := s.members[name]
	if !ok || !slices.Contains(e.Files, m.path) {
		return "", nil
	}
	if m.sha256 != nil {
		p := filepath.Join(e.Dir, filepath.FromSlash(m.path))
		sum, err := filehash.SHA256(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		if sum != hex.EncodeToString(m.sha256) {
			return "", fmt.Errorf("%s: %s in the wheel is not the file the installed RECORD lists (its sha256 differs): the index serves another build of %s %s", s.Filename, m.path, s.Project, s.Version)
		}
	}
	return m.path, nil
}

// compareWheelVersions orders a project's versions on an index as pip
// does (PEP 440); a version that is not PEP 440 compares as dotted numbers.
func compareWheelVersions(a, b string) int {
	va, ea := pymeta.ParseVersion(a)
	vb, eb := pymeta.ParseVersion(b)
	if ea != nil || eb != nil {
		return dotted.Compare(a, b)
	}
	return va.Compare(vb)
}
