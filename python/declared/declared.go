// Package declared computes what a Python package declares it needs from NVIDIA: the closure of NVIDIA distributions its metadata requires, installed or not, the version each must come at, and the state of each in the environment.
//
// The package's own metadata is the truth. Requires-Dist is followed with
// markers evaluated for the environment's interpreter, through extras and
// through metadata-only distributions such as cuda-toolkit[cublas,...];
// a distribution that is not installed is followed through the metadata of
// the release it must come at (a table of real wheels, or the index).
// Installers do not record which extras of the package a user asked for, so
// an extra of the target counts when the distributions it brings own a
// library that the package's objects need or open at run time.
package declared

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// State is what an NVIDIA distribution of the closure is in the
// environment.
type State string

// The states.
const (
	// Intact: installed at a version the requirements admit, every RECORD
	// file present with its recorded size.
	Intact State = "intact"
	// Damaged: installed, but RECORD files are missing or changed (or a
	// supply of cudadeps' lost files).
	Damaged State = "damaged"
	// Absent: not installed, and not supplied by cudadeps.
	Absent State = "absent"
	// OtherVersion: installed at a version the requirements do not admit.
	OtherVersion State = "other-version"
	// Supplied: not installed as a distribution, but cudadeps placed its
	// files from an NVIDIA archive of the same release.
	Supplied State = "supplied"
)

// Choice says how a distribution's version was decided.
type Choice string

// The choices.
const (
	Pinned    Choice = "pinned"     // an exact requirement (==V, ==V.*) names it
	Installed Choice = "installed"  // no exact pin; the installed version meets every requirement
	FromRange Choice = "from-range" // no exact pin, not installed: chosen from the range, for a reason
	Unknown   Choice = "unknown"    // nothing to choose from
)

// Dist is one NVIDIA distribution of the closure.
type Dist struct {
	Name string `json:"name"` // PEP 503 normalized
	// Version is the version it must come at ("" when none could be
	// chosen); Choice and Why say how it was decided.
	Version    string   `json:"version"`
	Choice     Choice   `json:"version_choice"`
	Why        string   `json:"why"`
	RequiredBy []string `json:"required_by"` // "torch 2.11.0: nvidia-cudnn-cu13==9.19.0.56"
	State      State    `json:"state"`
	Detail     string   `json:"detail,omitempty"`
	// InstalledVersion and Installer describe the installed copy, if any
	// (Installer from INSTALLER: pip, uv, cudadeps).
	InstalledVersion string `json:"installed_version,omitempty"`
	Installer        string `json:"installer,omitempty"`
	// MetadataOnly is set for a distribution that installs no files of its
	// own (cuda-toolkit: its extras pin the toolkit's wheels).
	MetadataOnly bool `json:"metadata_only,omitempty"`
	// Files are where its files go, relative to site-packages (its own
	// RECORD when installed, else the wheel record Layout names); Layout
	// is "" when no record of it is known.
	Files  []catalog.WheelFile `json:"-"`
	Layout string              `json:"layout,omitempty"`
	// Conflicts name installed distributions that write one of its paths
	// with other content: restoring it would overwrite their files.
	Conflicts []string `json:"conflicts,omitempty"`
	// Extras of it that the closure requests.
	Extras []string `json:"extras,omitempty"`
	// ViaExtra is the target's extra that brings it, when its base
	// requirements do not: an extra counted because the package needs a
	// library it brings, so the distribution matters only as far as the
	// package uses its files.
	ViaExtra string `json:"via_extra,omitempty"`

	// Damage are the files (absolute paths) that make it Damaged: missing,
	// or of another size than its RECORD says and not placed by cudadeps.
	Damage []string `json:"-"`

	Installed *pyenv.Dist          `json:"-"`
	Record    *catalog.WheelRecord `json:"-"` // the table's record behind Files, when used
	// Supply is what cudadeps supplied, in state Supplied (or Damaged
	// after it).
	Supply *Supply `json:"-"`
}

// Libraries are the shared libraries among its files.
func (d *Dist) Libraries() []catalog.WheelFile { return catalog.SharedLibraries(d.Files) }

// Owns reports whether one of its files is a library named name.
func (d *Dist) Owns(name string) bool {
	return slices.ContainsFunc(d.Files, func(f catalog.WheelFile) bool { return path.Base(f.Path) == name })
}

// NeedsRestore says whether the distribution must be brought back: it is
// absent or damaged.
func (d *Dist) NeedsRestore() bool { return d.State == Absent || d.State == Damaged }

// Supply is a distribution cudadeps supplied from an NVIDIA archive: its
// files placed at the wheel's RECORD paths, no .dist-info written.
type Supply struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	From    string   `json:"from"`  // the archive: "cudnn 9.19.0.56 (linux-x86_64, cuda13)"
	Files   []string `json:"files"` // absolute paths placed
	Site    string   `json:"site"`  // the site-packages directory they are relative to
}

// Extra is an extra of the target that counts as requested, and why.
type Extra struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// Closure is the target's declared NVIDIA closure.
type Closure struct {
	Target string   `json:"target"` // "torch 2.11.0"
	Extras []Extra  `json:"extras"`
	Dists  []*Dist  `json:"distributions"` // by name
	Notes  []string `json:"notes,omitempty"`
}

// Find is the closure's distribution called name, or nil.
func (c *Closure) Find(name string) *Dist {
	if c == nil {
		return nil
	}
	n := pymeta.NormalizeName(name)
	for _, d := range c.Dists {
		if d.Name == n {
			return d
		}
	}
	return nil
}

// Owner is the closure's distribution whose files include a library named
// name, or nil.
func (c *Closure) Owner(name string) *Dist {
	if c == nil {
		return nil
	}
	for _, d := range c.Dists {
		if d.Owns(name) {
			return d
		}
	}
	return nil
}

// Index is a package index's answers about a distribution.
type Index interface {
	// Versions lists the versions it offers of name (wheels for this host
	// or not; the chooser filters).
	Versions(ctx context.Context, name string) ([]string, error)
	// Metadata is the METADATA of name at version.
	Metadata(ctx context.Context, name, version string) (*pymeta.Metadata, error)
}

// Input is what Compute reads.
type Input struct {
	Env    *pyenv.Env
	Target *pyenv.Dist
	// Installed are the environment's distributions by normalized name
	// (Env.Installed()); nil reads them.
	Installed     map[string]*pyenv.Dist
	Distributions *catalog.Distributions
	Records       *catalog.WheelRecords
	// Index, when set, is asked for versions and metadata the table lacks.
	Index Index
	// ArchiveVersions, when set, lists the versions of a distribution that
	// NVIDIA's archives offer, in the wheel's numbering.
	ArchiveVersions func(name string) []string
	// Needs says whether the package's objects need or open a library
	// (by soname); nil: an extra counts when a distribution it names is
	// installed.
	Needs func(soname string) bool
	// Supplied are the distributions cudadeps supplied from archives.
	Supplied []Supply
	// Placed are the files cudadeps placed (absolute paths): one at an
	// installed distribution's RECORD path is its file whatever its size
	// (a library from NVIDIA's archive of the release, built apart from
	// the wheel).
	Placed map[string]bool
	// CUDAMajor is the CUDA major a range chooses in (the driver's, else
	// the package's); 0: any.
	CUDAMajor int
}

// Compute reads the target's declared closure and the state of each of its
// NVIDIA distributions.
func Compute(ctx context.Context, in Input) (*Closure, error) {
	if in.Installed == nil {
		in.Installed, _ = in.Env.Installed()
	}
	c := &computer{in: in, ctx: ctx, metas: map[string]*pymeta.Metadata{}, chosen: map[string]choice{}}
	for n, d := range in.Installed {
		c.metas[n] = d.Metadata
	}
	c.envPins = c.pinsOfEnvironment()
	target := pymeta.NormalizeName(in.Target.Name)
	extras := c.requestedExtras(target)
	spec := target
	var names []string
	for _, x := range extras {
		names = append(names, x.Name)
	}
	if len(names) > 0 {
		spec += "[" + strings.Join(names, ",") + "]"
	}
	res, err := pymeta.ResolveWith(c.metas, c.known, spec, in.Env.Markers)
	if err != nil {
		return nil, err
	}
	out := &Closure{Target: in.Target.Name + " " + in.Target.Version, Extras: extras, Dists: []*Dist{}}
	base := c.nvidiaClosure(target)
	for _, dep := range res.Dependencies {
		if !c.isNVIDIA(dep.Name) {
			continue
		}
		d, err := c.dist(dep)
		if err != nil {
			return nil, err
		}
		if _, ok := base[d.Name]; !ok {
			for _, x := range extras {
				if _, ok := c.nvidiaClosure(target + "[" + x.Name + "]")[d.Name]; ok {
					d.ViaExtra = x.Name
					break
				}
			}
		}
		out.Dists = append(out.Dists, d)
	}
	sort.Slice(out.Dists, func(i, j int) bool { return out.Dists[i].Name < out.Dists[j].Name })
	c.conflicts(out)
	out.Notes = c.notes
	return out, nil
}

// computer carries one computation's lookups.
type computer struct {
	in    Input
	ctx   context.Context
	metas map[string]*pymeta.Metadata
	// envPins are the exact pins other distributions of the environment
	// put on each name; chosen the versions known() decided.
	envPins map[string][]envPin
	chosen  map[string]choice
	notes   []string
}

type envPin struct{ version, by string }

type choice struct {
	version string
	how     Choice
	why     string
	record  *catalog.WheelRecord
}

// isNVIDIA tells NVIDIA's distributions (nvidia-*, the table's, the
// toolkit's metadata distribution, those with real wheel records) from the
// rest.
func (c *computer) isNVIDIA(name string) bool {
	if _, ok := c.in.Distributions.Lookup(name); ok || name == c.in.Distributions.ToolkitName || strings.HasPrefix(name, "nvidia-") {
		return true
	}
	return len(c.in.Records.Versions(name)) > 0
}

// pinsOfEnvironment collects, for every NVIDIA distribution, the exact
// pins that the environment's installed distributions put on it through
// their own closures (torch pins nvidia-cublas==13.1.0.3.* through
// cuda-toolkit[cublas]==13.0.2).
func (c *computer) pinsOfEnvironment() map[string][]envPin {
	out := map[string][]envPin{}
	names := slices.Sorted(maps.Keys(c.in.Installed))
	// An installed cuda-toolkit names the version of every toolkit wheel of
	// its release, whichever extras anyone requested: the environment's
	// toolkit release.
	if tk := c.in.Installed[c.in.Distributions.ToolkitName]; tk != nil && tk.Metadata != nil {
		for _, r := range tk.Metadata.RequiresDist {
			if v := exactVersion(r.Specifier); v != "" {
				name := pymeta.NormalizeName(r.Name)
				if !slices.ContainsFunc(out[name], func(p envPin) bool { return p.version == v }) {
					out[name] = append(out[name], envPin{v, tk.Name + " " + tk.Version + " (the environment's toolkit release)"})
				}
			}
		}
	}
	for _, n := range names {
		d := c.in.Installed[n]
		if d.Metadata == nil || !slices.ContainsFunc(d.Metadata.RequiresDist, func(r pymeta.Requirement) bool { return c.isNVIDIA(pymeta.NormalizeName(r.Name)) }) {
			continue
		}
		res, err := pymeta.ResolveWith(c.metas, c.exactKnown, n, c.in.Env.Markers)
		if err != nil {
			continue
		}
		for _, dep := range res.Dependencies {
			for _, e := range dep.RequiredBy {
				if v := exactVersion(e.Requirement.Specifier); v != "" && c.isNVIDIA(dep.Name) {
					out[dep.Name] = append(out[dep.Name], envPin{v, e.By + " " + e.ByVersion})
				}
			}
		}
	}
	return out
}

// exactKnown gives the metadata of an absent distribution that a
// requirement pins exactly, from the table only.
func (c *computer) exactKnown(name string, req pymeta.Requirement) *pymeta.Metadata {
	v := exactVersion(req.Specifier)
	if v == "" || !c.isNVIDIA(name) {
		return nil
	}
	if r, ok := c.in.Records.Exact(name, v); ok {
		m, _ := r.Metadata()
		return m
	}
	return nil
}

// exactVersion is the version an exact specifier names: "==9.19.0.56" and
// "==13.1.0.3.*" give 9.19.0.56 and 13.1.0.3; "" when none does. A
// wildcard pins a release only when it names at least major, minor and
// patch: "==13.*" and "==13.0.*" are ranges of releases.
func exactVersion(set pymeta.SpecifierSet) string {
	for _, sp := range set {
		if sp.Op != "==" && sp.Op != "===" {
			continue
		}
		v, wild := strings.CutSuffix(sp.Version, ".*")
		if !wild || strings.Count(v, ".") >= 2 {
			return v
		}
	}
	return ""
}

// known decides the version of an absent NVIDIA distribution from the
// first requirement naming it, and gives its metadata there.
func (c *computer) known(name string, req pymeta.Requirement) *pymeta.Metadata {
	if !c.isNVIDIA(name) {
		return nil
	}
	ch := c.choose(name, []pymeta.Requirement{req}, "")
	c.chosen[name] = ch
	if ch.version == "" {
		return nil
	}
	m, rec := c.metadataAt(name, ch.version)
	if rec != nil && c.chosen[name].record == nil {
		ch.record = rec
		c.chosen[name] = ch
	}
	return m
}

// metadataAt is the metadata of name at version: the table's record of
// that release, else the index's, else the record of the nearest release
// of the same major (its requirements rarely change within one).
func (c *computer) metadataAt(name, version string) (*pymeta.Metadata, *catalog.WheelRecord) {
	if r, ok := c.in.Records.Exact(name, version); ok {
		if m, err := r.Metadata(); err == nil {
			return m, r
		}
	}
	if c.in.Index != nil {
		if m, err := c.in.Index.Metadata(c.ctx, name, version); err == nil {
			return m, nil
		}
	}
	if r, ok := c.in.Records.Nearest(name, version); ok {
		if m, err := r.Metadata(); err == nil {
			return m, r
		}
	}
	return nil, nil
}

// requirementsOf lists the requirements of a dependency, as written, with
// who wrote them.
func requirementsOf(dep pymeta.Dependency) []string {
	var out []string
	for _, e := range dep.RequiredBy {
		by := e.By + " " + e.ByVersion
		if e.Extra != "" {
			by = fmt.Sprintf("%s[%s] %s", e.By, e.Extra, e.ByVersion)
		}
		out = append(out, by+": "+e.Requirement.Name+e.Requirement.Specifier.String())
	}
	return out
}

func describeVersions(vs []string) string {
	if len(vs) > 8 {
		vs = append(slices.Clone(vs[len(vs)-8:]), "…")
	}
	return strings.Join(vs, ", ")
}

// newestFirst sorts versions newest first, PEP 440 where they parse.
func newestFirst(vs []string) {
	slices.SortFunc(vs, func(a, b string) int {
		va, ea := pymeta.ParseVersion(a)
		vb, eb := pymeta.ParseVersion(b)
		if ea != nil || eb != nil {
			return dotted.Compare(b, a)
		}
		return vb.Compare(va)
	})
}
