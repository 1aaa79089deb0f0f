package catalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/platform"
)

// Fits reports whether archive a of release r runs on platform ("" for
// any) and suits CUDA major cuda (0 for any; an archive tied to no CUDA
// major suits every one).
func (a *Archive) Fits(r *Release, platform string, cuda int) bool {
	return (platform == "" || a.Platform == platform) && cudaFits(a.CUDAMajor(r), cuda)
}

// Choice is the archive chosen for a component by name.
type Choice struct {
	Component *Component
	Release   *Release
	Archive   *Archive
	URL       string
}

// Choose picks the archive of component name for platform and CUDA major
// cuda (0: any): from the release labelled or versioned version, or else
// the newest release that has one. A release with archives for several CUDA
// majors on the platform is ambiguous when cuda is 0. Failures are
// *NotFoundError, with CUDAMajors set when the choice is ambiguous.
func (c *Catalog) Choose(name, version, platform string, cuda int) (Choice, error) {
	comp, ok := c.Component(name)
	if !ok {
		return Choice{}, &NotFoundError{Component: name, Reason: fmt.Sprintf("%s: no such component in the catalog", name)}
	}
	releases := comp.Releases
	if version != "" {
		i := slices.IndexFunc(releases, func(r *Release) bool { return r.Version == version || r.Label == version })
		if i < 0 {
			return Choice{}, c.chooseErr(comp, fmt.Sprintf("%s has no release %s (it has: %s)", name, version, strings.Join(releaseVersions(comp), ", ")))
		}
		releases = releases[i : i+1]
	}
	for _, r := range releases {
		var fits []*Archive
		for _, a := range r.Archives {
			if a.Fits(r, platform, cuda) {
				fits = append(fits, a)
			}
		}
		switch len(fits) {
		case 0:
			continue
		case 1:
			return Choice{Component: comp, Release: r, Archive: fits[0], URL: c.URL(comp, fits[0])}, nil
		}
		var majors []int
		for _, a := range fits {
			if m := a.CUDAMajor(r); m != 0 && !slices.Contains(majors, m) {
				majors = append(majors, m)
			}
		}
		slices.Sort(majors)
		e := c.chooseErr(comp, fmt.Sprintf("%s %s is ambiguous: it has %s archives for %s; pass --cuda", name, r.Version, platform, joinMajors(majors, "and")))
		e.CUDAMajors = majors
		return Choice{}, e
	}
	return Choice{}, c.chooseErr(comp, noArchiveReason(comp, releases, version, platform, cuda))
}

func (c *Catalog) chooseErr(comp *Component, reason string) *NotFoundError {
	return &NotFoundError{Component: comp.Name, Product: comp.Product, Reason: reason}
}

// noArchiveReason says what the releases do have when none fits.
func noArchiveReason(comp *Component, releases []*Release, version, plat string, cuda int) string {
	what := comp.Name
	if version != "" {
		what += " " + version
	}
	var plats []string
	var majors []int
	for _, r := range releases {
		for _, a := range r.Archives {
			if !slices.Contains(plats, a.Platform) {
				plats = append(plats, a.Platform)
			}
			if m := a.CUDAMajor(r); a.Platform == plat && m != 0 && !slices.Contains(majors, m) {
				majors = append(majors, m)
			}
		}
	}
	switch {
	case len(plats) == 0:
		return fmt.Sprintf("%s has no archive in the catalog", what)
	case !slices.Contains(plats, plat):
		slices.SortFunc(plats, func(x, y string) int { return platform.Rank(x) - platform.Rank(y) })
		return fmt.Sprintf("%s has no archive for %s (it has: %s)", what, plat, strings.Join(plats, ", "))
	default:
		slices.Sort(majors)
		return fmt.Sprintf("%s has no archive for %s and CUDA %d (its %s archives are for %s)", what, plat, cuda, plat, joinMajors(majors, "and"))
	}
}

func releaseVersions(comp *Component) []string {
	out := make([]string, len(comp.Releases))
	for i, r := range comp.Releases {
		out[i] = r.Version
	}
	return out
}
