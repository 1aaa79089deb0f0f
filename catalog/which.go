package catalog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/platform"
)

// Query says for which host an archive is wanted.
type Query struct {
	Platform  string // linux-x86_64, linux-sbsa or linux-aarch64
	CUDAMajor int    // 0: unknown
	// Toolkit is the CUDA toolkit release (a release label of product
	// cuda: 13.0.2) the package's other CUDA libraries come from: a
	// component of the toolkit takes its version in that release when the
	// catalog has the release's minor, not the newest, so that NVRTC and
	// its builtins, or cuSOLVER and the cuBLAS it calls, are one release
	// and no newer than the rest (a newer NVRTC writes PTX an older driver
	// cannot load).
	Toolkit string
}

// Match is the archive that provides a soname, or the advice for a driver library.
type Match struct {
	Soname string

	// Driver is set for a library that comes with the NVIDIA driver; only
	// Advice is meaningful then.
	Driver bool
	Advice string

	Component    string // libcudss
	Product      string // cudss
	Version      string // the component's version: 0.8.0.10
	Release      string // the manifest's release label: 0.8.0
	Platform     string
	CUDAVariant  string // cuda13, or "" for archives without variants
	CUDAMajor    int    // the CUDA major the archive is built for, 0 if not tied to one
	URL          string // with the mirror applied
	RelativePath string
	SHA256       string
	Size         int64
	Sonames      []string // everything the archive provides
	License      string
	// Pin says how a pinned version was honoured (WhichPinned); empty otherwise.
	Pin string
}

// MarshalJSON writes {"soname","driver":true,"advice"} for a driver library
// and the archive's fields otherwise.
func (m *Match) MarshalJSON() ([]byte, error) {
	if m.Driver {
		return json.Marshal(struct {
			Soname string `json:"soname"`
			Driver bool   `json:"driver"`
			Advice string `json:"advice"`
		}{m.Soname, true, m.Advice})
	}
	return json.Marshal(struct {
		Soname       string   `json:"soname"`
		Component    string   `json:"component"`
		Product      string   `json:"product"`
		Version      string   `json:"version"`
		Release      string   `json:"release,omitempty"`
		Platform     string   `json:"platform"`
		CUDAVariant  string   `json:"cuda_variant"`
		CUDAMajor    int      `json:"cuda"`
		URL          string   `json:"url"`
		RelativePath string   `json:"relative_path"`
		SHA256       string   `json:"sha256"`
		Size         int64    `json:"size"`
		Sonames      []string `json:"sonames"`
		License      string   `json:"license,omitempty"`
		Pin          string   `json:"pin,omitempty"`
	}{m.Soname, m.Component, m.Product, m.Version, m.Release, m.Platform, m.CUDAVariant,
		m.CUDAMajor, m.URL, m.RelativePath, m.SHA256, m.Size, m.Sonames, m.License, m.Pin})
}

// NotFoundError says why no archive provides a soname for a query.
type NotFoundError struct {
	Soname    string
	Component string // the component known to provide it, "" when none is
	Product   string
	// Reason is one sentence a user can act on.
	Reason string
	// CUDAMajors is set when archives for several CUDA majors fit and the
	// query named none: the answer is ambiguous rather than absent.
	CUDAMajors []int
}

func (e *NotFoundError) Error() string { return e.Reason }

// Provider says that a component provides a soname, whatever the platform
// or CUDA major.
type Provider struct {
	Component  string
	Product    string
	Platforms  []string // platforms with an archive that provides it; empty when the catalog has none
	CUDAMajors []int    // CUDA majors of those archives (0: not tied to one)
}

// Providers lists the components that provide soname at all, sorted by
// name: those with an archive of it, and those that only know it.
func (c *Catalog) Providers(soname string) []Provider {
	var out []Provider
	for _, comp := range c.sortedComponents() {
		known := slices.Contains(comp.Sonames, soname)
		p := Provider{Component: comp.Name, Product: comp.Product}
		for _, r := range comp.Releases {
			for _, a := range r.Archives {
				if !slices.Contains(a.Sonames, soname) {
					continue
				}
				known = true
				if !slices.Contains(p.Platforms, a.Platform) {
					p.Platforms = append(p.Platforms, a.Platform)
				}
				if n := a.CUDAMajor(r); !slices.Contains(p.CUDAMajors, n) {
					p.CUDAMajors = append(p.CUDAMajors, n)
				}
			}
		}
		if known {
			slices.SortFunc(p.Platforms, func(a, b string) int { return cmp.Compare(platform.Rank(a), platform.Rank(b)) })
			slices.Sort(p.CUDAMajors)
			out = append(out, p)
		}
	}
	return out
}

// candidate is one archive that provides the soname asked for.
type candidate struct {
	comp *Component
	rel  *Release
	arc  *Archive
	cuda int
}

// Which finds the archive that provides soname for q: the newest version
// on q.Platform built for q.CUDAMajor (or not tied to a CUDA major). A
// driver library gives a Match with Driver set. When nothing fits, the
// error is a *NotFoundError that says why.
func (c *Catalog) Which(soname string, q Query) (*Match, error) {
	if d, ok := c.drivers[soname]; ok {
		return &Match{Soname: soname, Driver: true, Advice: d.Advice}, nil
	}
	if !platform.Valid(q.Platform) {
		return nil, fmt.Errorf("unknown platform %q (want one of %s)", q.Platform, strings.Join(platform.All(), ", "))
	}
	if q.CUDAMajor < 0 {
		return nil, fmt.Errorf("CUDA major %d is not valid", q.CUDAMajor)
	}
	fits, err := c.fitting(soname, q)
	if err != nil {
		return nil, err
	}
	if q.CUDAMajor == 0 {
		if majors := cudaMajors(fits); len(majors) > 1 {
			return nil, &NotFoundError{
				Soname: soname, Component: fits[0].comp.Name, Product: fits[0].comp.Product,
				Reason: fmt.Sprintf("%s has %s archives for %s: say which CUDA major the program uses (--cuda N)",
					soname, q.Platform, joinMajors(majors, "and")),
				CUDAMajors: majors,
			}
		}
	}
	if x, ok := inToolkit(fits, q); ok {
		m := c.match(soname, x)
		m.Pin = "CUDA " + q.Toolkit + ", the release the package's other CUDA libraries come from"
		return m, nil
	}
	best := slices.MaxFunc(fits, func(a, b candidate) int { return better(a, b, q.CUDAMajor) })
	return c.match(soname, best), nil
}

// inToolkit picks, for a toolkit component, the archive of toolkit release
// q.Toolkit. A catalog release carries the label of the last toolkit
// release that shipped its version (cuda_nvrtc 13.0.88 was in 13.0.1 to
// 13.0.3 and is labelled 13.0.3), so the version in release L is the one
// of L's minor whose label is the first at or after L; past the last label
// of that minor, its newest.
func inToolkit(fits []candidate, q Query) (candidate, bool) {
	if q.Toolkit == "" {
		return candidate{}, false
	}
	minor := func(v string) string {
		parts := strings.SplitN(v, ".", 3)
		if len(parts) < 2 {
			return v
		}
		return parts[0] + "." + parts[1]
	}
	same := filter(fits, func(x candidate) bool {
		return x.comp.Product == toolkitProduct && minor(x.rel.Label) == minor(q.Toolkit)
	})
	if len(same) == 0 {
		return candidate{}, false
	}
	atOrAfter := filter(same, func(x candidate) bool { return dotted.Compare(x.rel.Label, q.Toolkit) >= 0 })
	if len(atOrAfter) == 0 {
		return slices.MaxFunc(same, func(a, b candidate) int { return better(a, b, q.CUDAMajor) }), true
	}
	first := slices.MinFunc(atOrAfter, func(a, b candidate) int { return dotted.Compare(a.rel.Label, b.rel.Label) })
	exact := filter(atOrAfter, func(x candidate) bool { return x.rel.Label == first.rel.Label })
	return slices.MaxFunc(exact, func(a, b candidate) int { return better(a, b, q.CUDAMajor) }), true
}

// toolkitProduct is the product of the CUDA toolkit's own components.
const toolkitProduct = "cuda"

// fitting lists the archives that provide soname on q.Platform for
// q.CUDAMajor, or says why there are none.
func (c *Catalog) fitting(soname string, q Query) ([]candidate, error) {
	var all []candidate
	for _, comp := range c.sortedComponents() {
		for _, r := range comp.Releases {
			for _, a := range r.Archives {
				if slices.Contains(a.Sonames, soname) {
					all = append(all, candidate{comp, r, a, a.CUDAMajor(r)})
				}
			}
		}
	}
	if len(all) == 0 {
		return nil, c.unknown(soname)
	}
	onPlatform := filter(all, func(x candidate) bool { return x.arc.Platform == q.Platform })
	fits := filter(onPlatform, func(x candidate) bool { return cudaFits(x.cuda, q.CUDAMajor) })
	if len(fits) == 0 {
		return nil, c.noFit(soname, q, all, onPlatform)
	}
	return fits, nil
}

func (c *Catalog) match(soname string, x candidate) *Match {
	return &Match{
		Soname:       soname,
		Component:    x.comp.Name,
		Product:      x.comp.Product,
		Version:      x.rel.Version,
		Release:      x.rel.Label,
		Platform:     x.arc.Platform,
		CUDAVariant:  x.arc.CUDAVariant,
		CUDAMajor:    x.cuda,
		URL:          c.URL(x.comp, x.arc),
		RelativePath: x.arc.RelativePath,
		SHA256:       x.arc.SHA256,
		Size:         x.arc.Size,
		Sonames:      slices.Clone(x.arc.Sonames),
		License:      x.comp.License,
	}
}

// better orders candidates: within a component the newer version wins, and
// at one version an archive built for exactly the CUDA major asked for wins
// over one not tied to any; across components the newer release date wins.
func better(a, b candidate, major int) int {
	if a.comp != b.comp {
		if c := strings.Compare(a.rel.Date, b.rel.Date); c != 0 {
			return c
		}
		return strings.Compare(b.comp.Name, a.comp.Name)
	}
	if c := dotted.Compare(a.rel.Version, b.rel.Version); c != 0 {
		return c
	}
	exact := func(x candidate) int {
		if major != 0 && x.cuda == major {
			return 1
		}
		return 0
	}
	if c := cmp.Compare(exact(a), exact(b)); c != 0 {
		return c
	}
	return cmp.Compare(a.cuda, b.cuda)
}

// cudaFits: an archive not tied to a CUDA major fits any; an unknown major
// accepts any archive (ambiguity is reported by the caller).
func cudaFits(archive, want int) bool {
	return archive == 0 || want == 0 || archive == want
}

func filter(xs []candidate, keep func(candidate) bool) []candidate {
	var out []candidate
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

// cudaMajors lists the distinct non-zero CUDA majors of xs, ascending.
func cudaMajors(xs []candidate) []int {
	var out []int
	for _, x := range xs {
		if x.cuda != 0 && !slices.Contains(out, x.cuda) {
			out = append(out, x.cuda)
		}
	}
	slices.Sort(out)
	return out
}

func joinMajors(ms []int, conj string) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = strconv.Itoa(m)
	}
	return "CUDA " + joinWords(s, conj)
}

func joinWords(s []string, conj string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " " + conj + " " + s[len(s)-1]
}

// unknown explains a soname that no archive provides.
func (c *Catalog) unknown(soname string) error {
	if ps := c.Providers(soname); len(ps) > 0 {
		p := ps[0]
		return &NotFoundError{
			Soname: soname, Component: p.Component, Product: p.Product,
			Reason: fmt.Sprintf("%s is part of %s (%s), but no catalog has an archive that provides it",
				soname, p.Component, c.productTitle(p.Product)),
		}
	}
	return &NotFoundError{Soname: soname, Reason: "no catalog knows " + soname}
}

func (c *Catalog) productTitle(name string) string {
	if p, ok := c.products[name]; ok {
		return p.DisplayName()
	}
	return name
}

// noFit explains why archives that provide soname exist, but none for q.
func (c *Catalog) noFit(soname string, q Query, all, onPlatform []candidate) error {
	comp := all[0].comp
	title := c.productTitle(comp.Product)
	e := &NotFoundError{Soname: soname, Component: comp.Name, Product: comp.Product}
	prefix := fmt.Sprintf("%s is part of %s, but ", soname, comp.Name)

	major := q.CUDAMajor
	if major == 0 {
		if ms := cudaMajors(all); len(ms) == 1 {
			major = ms[0]
		}
	}
	// A whole toolkit generation may skip a platform: CUDA 13 has no
	// linux-aarch64 archives, Jetson Thor uses linux-sbsa.
	tied := slices.ContainsFunc(all, func(x candidate) bool { return x.rel.CUDA != 0 })
	if major != 0 && tied {
		if labels, missing := c.generationLacks(comp.Product, major, q.Platform); missing {
			e.Reason = prefix + fmt.Sprintf("%s %s has no %s archives", title, labelSpan(labels), q.Platform)
			if q.Platform == platform.LinuxAarch64 && major >= 13 {
				e.Reason += " (from CUDA 13 on, Jetson Thor uses " + platform.LinuxSBSA + ")"
			}
			return e
		}
	}
	if len(onPlatform) == 0 {
		if plats := c.productPlatforms(comp.Product); !slices.Contains(plats, q.Platform) {
			e.Reason = prefix + fmt.Sprintf("%s is published for %s only", title, joinWords(plats, "and"))
			return e
		}
		e.Reason = prefix + fmt.Sprintf("no %s archive provides it; archives that do are for %s",
			q.Platform, joinWords(platformsOf(all), "and"))
		return e
	}
	e.Reason = prefix + fmt.Sprintf("its %s archives are built for %s only, not CUDA %d",
		q.Platform, joinMajors(cudaMajors(onPlatform), "and"), q.CUDAMajor)
	return e
}

// generationLacks reports whether the product has releases tied to CUDA
// major, none of which has an archive for platform, with their labels.
func (c *Catalog) generationLacks(product string, major int, platform string) ([]string, bool) {
	var labels []string
	for _, comp := range c.sortedComponents() {
		if comp.Product != product {
			continue
		}
		for _, r := range comp.Releases {
			if r.CUDA != major {
				continue
			}
			for _, a := range r.Archives {
				if a.Platform == platform {
					return nil, false
				}
			}
			label := r.Label
			if label == "" {
				label = r.Version
			}
			if !slices.Contains(labels, label) {
				labels = append(labels, label)
			}
		}
	}
	slices.SortFunc(labels, dotted.Compare)
	return labels, len(labels) > 0
}

// labelSpan names sorted release labels briefly: "13.0.0, 13.0.1" or
// "13.0.0 to 13.4.2" when there are more.
func labelSpan(labels []string) string {
	if len(labels) <= 2 {
		return strings.Join(labels, ", ")
	}
	return labels[0] + " to " + labels[len(labels)-1]
}

func (c *Catalog) productPlatforms(product string) []string {
	var out []string
	for _, comp := range c.components {
		if comp.Product != product {
			continue
		}
		for _, p := range comp.platforms() {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(platform.Rank(a), platform.Rank(b)) })
	return out
}

func platformsOf(xs []candidate) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x.arc.Platform) {
			out = append(out, x.arc.Platform)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(platform.Rank(a), platform.Rank(b)) })
	return out
}
