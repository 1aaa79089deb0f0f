package resolver

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/python/pypi"
)

// Need is one soname the loader would not find, with who needs it and where
// the loader looked.
type Need struct {
	Soname   string   `json:"soname"`
	NeededBy []string `json:"needed_by"`
	// Requests are the failed searches, each with the directories searched
	// (where a library can be placed for the loader to find it).
	Requests []Request `json:"-"`
	// Runtime is set for a name found missing only when the package was
	// imported (a library it dlopen's).
	Runtime bool `json:"runtime,omitempty"`
	// Restore is set for a library that no object misses but that a
	// required distribution's RECORD lists and the disk lacks (the loader
	// may be taking another copy, or it is opened at run time).
	Restore bool `json:"restore,omitempty"`
	// Owner is the distribution file it belongs at, when one does; Pin is
	// the version it must come at.
	Owner *OwnedLib   `json:"owner,omitempty"`
	Pin   catalog.Pin `json:"-"`
	// Undeclared is set, for a Python target, when no distribution the
	// package declares owns it (see UndeclaredLib).
	Undeclared bool `json:"undeclared,omitempty"`
}

// Request is one object's failed search.
type Request struct {
	Object   string           // the needing object, as the loader names it
	Searched []ldso.SearchDir // RPATH, LD_LIBRARY_PATH and RUNPATH directories, in order
}

// Step is a plan item: one archive (an NVIDIA redist archive, or a wheel
// from a package index) that provides one or more needs.
type Step struct {
	// Source is where the file comes from: SourceNVIDIA or SourcePyPI.
	Source Source `json:"source"`
	// Project, Filename and Index name a wheel (SourcePyPI): the
	// distribution, the file, and the index that lists it (credentials
	// redacted). URL, SHA256 and Size are then the file's, as the index
	// gives them.
	Project  string `json:"project,omitempty"`
	Filename string `json:"filename,omitempty"`
	Index    string `json:"index,omitempty"`

	Component   string   `json:"component"`
	Product     string   `json:"product"`
	Version     string   `json:"version"`
	Platform    string   `json:"platform"`
	CUDAVariant string   `json:"cuda_variant,omitempty"`
	URL         string   `json:"url"`
	SHA256      string   `json:"sha256"`
	Size        int64    `json:"size"`
	Provides    []string `json:"provides"` // the needed sonames it satisfies
	Sonames     []string `json:"sonames"`  // everything the archive provides
	// Installed is true when the store already holds it (nothing to download).
	Installed bool `json:"installed"`
	// Cached is true when the download cache holds its verified bytes:
	// nothing is downloaded, only extracted.
	Cached bool `json:"cached,omitempty"`
	// Pin says how a pinned version was honoured, when one was.
	Pin string `json:"pin,omitempty"`
	// Restore is set when the step brings back a declared distribution
	// that is not installed, whole.
	Restore *Restore `json:"restore,omitempty"`
	// Repairs are the other files (headers, Python files) that the
	// installed distribution's RECORD lists and the disk lacks, paths
	// relative to its site-packages directory: a wheel of the installed
	// release puts them back with its libraries, each checked against the
	// RECORD's sha256.
	Repairs []string `json:"repairs,omitempty"`

	needs []*Need
	// For a wheel: the URL to download it from, credentials included,
	// when URL has them redacted; and the path in the wheel of each
	// library a RECORD lists, by file name.
	fetchURL string
	members  map[string]wheelMember
	// repairs are Repairs with their sha256, under repairSite.
	repairs    []wheelMember
	repairSite string
}

// Key is the store key of the step's archive; a wheel's names the file
// (project, version, build and tags).
func (s *Step) Key() fetch.Key {
	if s.Source == SourcePyPI {
		if w, err := pypi.ParseWheel(s.Filename); err == nil {
			return w.Key()
		}
	}
	return fetch.Key{Component: s.Component, Version: s.Version, Platform: s.Platform, Variant: s.CUDAVariant}
}

// Unresolved is a need no archive can satisfy, with what to do about it.
type Unresolved struct {
	Soname   string         `json:"soname"`
	NeededBy []string       `json:"needed_by"`
	Kind     UnresolvedKind `json:"kind"`
	// Reason says why, in a sentence; for UnresolvedShadowed it is the
	// Shadow's account, which names the soname.
	Reason string `json:"reason"`
	Advice string `json:"advice,omitempty"`
}

// UnresolvedKind says which way a need stays unresolved; its JSON form is
// its value.
type UnresolvedKind string

// The kinds of unresolved needs.
const (
	// UnresolvedMissing: no catalog has an archive for it on the platform
	// and CUDA major (or knows it at all).
	UnresolvedMissing UnresolvedKind = "missing"
	// UnresolvedDriver: it comes with the NVIDIA driver, never fetched.
	UnresolvedDriver UnresolvedKind = "driver"
	// UnresolvedPinRefused: the catalogs lack the version a required
	// distribution pins, and an older one would fail at run time.
	UnresolvedPinRefused UnresolvedKind = "pin_refused"
	// UnresolvedNoWheel: wheels only (SourcePyPI), and the package index
	// has no wheel for it.
	UnresolvedNoWheel UnresolvedKind = "no_wheel"
	// UnresolvedPlacedNotFound: an earlier round placed it, and the loader
	// still does not find it.
	UnresolvedPlacedNotFound UnresolvedKind = "placed_not_found"
	// UnresolvedShadowed: the loader finds it, but not the copy the
	// package was built for, and placement cannot win.
	UnresolvedShadowed UnresolvedKind = "shadowed"
	// UnresolvedDistribution: a declared distribution cudadeps does not
	// restore: no source has it, it is installed at another version, it
	// would overwrite another distribution's files, or files of it that
	// cudadeps does not place are missing or changed. Soname is then the
	// distribution's name.
	UnresolvedDistribution UnresolvedKind = "distribution"
)

// Plan is what one round will do.
type Plan struct {
	// Host names the kind of host the plan is for and its evidence, in
	// brief (platform.Host.Brief).
	Host       string       `json:"host,omitempty"`
	Platform   string       `json:"platform"`
	CUDAMajor  int          `json:"cuda_major"`
	Steps      []*Step      `json:"steps"`
	Unresolved []Unresolved `json:"unresolved"`
	// JetPack are the missing libraries a Jetson's JetPack provides: taken
	// from there (the activation script adds their directory), never
	// downloaded.
	JetPack []JetPackLib `json:"jetpack,omitempty"`
	// Undeclared are the libraries of the steps that no distribution the
	// package declares owns.
	Undeclared []UndeclaredLib `json:"undeclared,omitempty"`
}

// Bytes is the download size of the steps neither in the store nor in the
// download cache.
func (p *Plan) Bytes() int64 {
	_, n := p.Downloads()
	return n
}

// Downloads counts the steps that will fetch bytes, and their size.
func (p *Plan) Downloads() (n int, bytes int64) {
	for _, s := range p.Steps {
		if !s.Installed && !s.Cached {
			n++
			bytes += s.Size
		}
	}
	return n, bytes
}

// needsFrom turns a scan's misses into needs.
func needsFrom(rep *scan.Report) []*Need {
	byName := map[string]*Need{}
	var out []*Need
	for _, root := range rep.Roots {
		// What the objects open at run time and is not found counts as
		// missing before anything runs.
		misses := append(append([]ldso.Miss(nil), root.Result.Missing...), root.RuntimeMisses...)
		for _, m := range misses {
			n, ok := byName[m.Name]
			if !ok {
				n = &Need{Soname: m.Name}
				byName[m.Name] = n
				out = append(out, n)
			}
			for _, req := range m.Requests {
				for _, by := range root.Result.NeededBy(req) {
					n.NeededBy = uniq.Append(n.NeededBy, by.Path)
					n.Requests = append(n.Requests, Request{Object: by.Path, Searched: req.Searched})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Soname < out[j].Soname })
	return out
}

// Lookup is the part of the catalog the planner needs.
type Lookup interface {
	Which(soname string, q catalog.Query) (*catalog.Match, error)
	WhichPinned(soname string, q catalog.Query, pin catalog.Pin) (*catalog.Match, error)
}

// MakePlan matches each need against the catalog: one step per archive,
// the rest unresolved with a reason. It decides; it changes nothing.
func MakePlan(needs []*Need, cat Lookup, platform string, cudaMajor int) *Plan {
	p := &Plan{Platform: platform, CUDAMajor: cudaMajor, Steps: []*Step{}, Unresolved: []Unresolved{}}
	byArchive := map[string]*Step{}
	answers := oneReleasePerFamily(needs, matchNeeds(needs, cat, catalog.Query{Platform: platform, CUDAMajor: cudaMajor}))
	for i, ans := range answers {
		n, m, err := needs[i], ans.m, ans.err
		if err != nil {
			u := Unresolved{Soname: n.Soname, NeededBy: n.NeededBy, Kind: UnresolvedMissing, Reason: err.Error()}
			var nf *catalog.NotFoundError
			var pe *catalog.PinError
			var fe *familyError
			switch {
			case errors.As(err, &fe):
				u.Kind = UnresolvedPinRefused
				u.Advice = "add a catalog whose archive of the pinned release has it, or reinstall the distribution (pip install --force-reinstall)"
			case errors.As(err, &nf):
				u.Reason = nf.Reason
				u.Advice = adviceFor(nf, cudaMajor)
			case errors.As(err, &pe):
				u.Kind = UnresolvedPinRefused
				u.Advice = fmt.Sprintf("add a catalog that has %s %s or a newer %s.x (cudadeps catalog update, catalog import, or --catalog); an older release would load and then fail at run time", pe.Component, pe.Pin.Version, strings.SplitN(pe.Pin.Version, ".", 2)[0])
			}
			p.Unresolved = append(p.Unresolved, u)
			continue
		}
		if m.Driver {
			p.Unresolved = append(p.Unresolved, Unresolved{Soname: n.Soname, NeededBy: n.NeededBy, Kind: UnresolvedDriver,
				Reason: "comes with the NVIDIA driver, which cudadeps never installs", Advice: m.Advice})
			continue
		}
		key := m.Component + "\x00" + m.Version + "\x00" + m.Platform + "\x00" + m.CUDAVariant
		s, ok := byArchive[key]
		if !ok {
			s = &Step{Source: SourceNVIDIA, Component: m.Component, Product: m.Product, Version: m.Version, Platform: m.Platform, CUDAVariant: m.CUDAVariant,
				URL: m.URL, SHA256: m.SHA256, Size: m.Size, Sonames: m.Sonames, Pin: m.Pin}
			byArchive[key] = s
			p.Steps = append(p.Steps, s)
		}
		s.Provides = append(s.Provides, n.Soname)
		s.needs = append(s.needs, n)
	}
	return p
}

// oneReleasePerFamily keeps the libraries of one distribution in one
// release: when the pinned release lacks some of them and the catalog
// answered those from a newer one, they are refused rather than mixed
// (cuDNN 9.27 engines beside a 9.19 core fail at run time).
func oneReleasePerFamily(needs []*Need, answers []catalogAnswer) []catalogAnswer {
	chosen := map[string]string{} // distribution → component and version of its pinned answers
	for i, ans := range answers {
		n := needs[i]
		if ans.err != nil || ans.m == nil || ans.m.Driver || n.Owner == nil || n.Pin.Version == "" || !pinMatchesVersion(ans.m.Version, n.Pin.Version) {
			continue
		}
		chosen[n.Owner.Dist] = ans.m.Component + " " + ans.m.Version
	}
	for i, ans := range answers {
		n := needs[i]
		if ans.err != nil || ans.m == nil || n.Owner == nil {
			continue
		}
		if want, ok := chosen[n.Owner.Dist]; ok && want != ans.m.Component+" "+ans.m.Version {
			answers[i] = catalogAnswer{err: &familyError{fmt.Sprintf("%s is pinned to %s (by %s), whose archive lacks %s; %s %s has it, but one library family is never mixed across releases",
				n.Soname, want, n.Pin.By, n.Soname, ans.m.Component, ans.m.Version)}}
		}
	}
	return answers
}

// familyError refuses a library from another release than its family's.
type familyError struct{ msg string }

func (e *familyError) Error() string { return e.msg }

// pinMatchesVersion says whether a component version is the one a pin
// names (the pin may shorten it: 0.8.0 names 0.8.0.4).
func pinMatchesVersion(version, pin string) bool {
	return version == pin || strings.HasPrefix(version, pin+".")
}

// catalogAnswer is what the catalog answered for one need.
type catalogAnswer struct {
	m   *catalog.Match
	err error
}

// matchNeeds asks the catalog for each need: the pinned ones first, then
// the others from the CUDA toolkit release that most pinned toolkit
// components come from ("" when none is pinned), so that libraries no pin
// names join their release rather than the newest.
func matchNeeds(needs []*Need, cat Lookup, q catalog.Query) []catalogAnswer {
	out := make([]catalogAnswer, len(needs))
	count := map[string]int{}
	for i, n := range needs {
		if n.Pin.Version == "" {
			continue
		}
		m, err := cat.WhichPinned(n.Soname, q, n.Pin)
		out[i] = catalogAnswer{m, err}
		if err != nil || m.Driver || m.Product != "cuda" || m.Release == "" {
			continue
		}
		count[m.Release]++
		if c := count[m.Release]; c > count[q.Toolkit] || (c == count[q.Toolkit] && dotted.Less(q.Toolkit, m.Release)) {
			q.Toolkit = m.Release
		}
	}
	for i, n := range needs {
		if n.Pin.Version == "" {
			m, err := cat.WhichPinned(n.Soname, q, n.Pin)
			out[i] = catalogAnswer{m, err}
		}
	}
	return out
}

func adviceFor(nf *catalog.NotFoundError, cudaMajor int) string {
	switch {
	case nf.Component == "":
		return fmt.Sprintf("no catalog knows %s: install the library that provides it (a system package, or a wheel) or add an entry with --catalog", nf.Soname)
	case cudaMajor == 0 && strings.Contains(nf.Reason, "--cuda"):
		return "pass --cuda N to say which CUDA major the package is built for"
	default:
		return fmt.Sprintf("%s is provided by %s; %s", nf.Soname, nf.Component, "install it by other means (pip, the system's package manager), or name an archive for it with --catalog")
	}
}
