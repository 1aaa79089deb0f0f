package declared

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/python/pymeta"
)

// choose decides the version a distribution must come at, from every
// requirement that names it: an exact pin; else the installed version when
// it meets every requirement; else the version another distribution of the
// environment pins, when the requirements admit it; else the newest release
// of the CUDA major that a source offers and the requirements admit.
func (c *computer) choose(name string, reqs []pymeta.Requirement, installed string) choice {
	var set pymeta.SpecifierSet
	for _, r := range reqs {
		set = append(set, r.Specifier...)
	}
	if v := exactVersion(set); v != "" {
		return choice{version: v, how: Pinned, why: "pinned: " + name + set.String()}
	}
	if installed != "" && set.ContainsString(installed, true) {
		return choice{version: installed, how: Installed, why: fmt.Sprintf("installed %s meets %s", installed, orAny(set))}
	}
	for _, p := range c.envPins[name] {
		if set.ContainsString(p.version, true) {
			return choice{version: p.version, how: FromRange,
				why: fmt.Sprintf("chosen from a range (%s) because %s, in the same environment, pins %s", orAny(set), p.by, p.version)}
		}
	}
	cands, from := c.candidates(name)
	var fits []string
	for _, v := range cands {
		if set.ContainsString(v, false) && c.inCUDAMajor(name, v) {
			fits = append(fits, v)
		}
	}
	if len(fits) == 0 {
		why := fmt.Sprintf("no version meets %s", orAny(set))
		if len(cands) == 0 {
			why = "no source lists a version of it"
		} else if from != "" {
			why += fmt.Sprintf(" (%s: %s)", from, describeVersions(cands))
		}
		return choice{how: Unknown, why: why}
	}
	newestFirst(fits)
	major := ""
	if c.in.CUDAMajor > 0 {
		major = fmt.Sprintf(" of CUDA %d", c.in.CUDAMajor)
	}
	return choice{version: fits[0], how: FromRange,
		why: fmt.Sprintf("chosen from a range (%s): no distribution of the environment pins it; the newest release%s that %s offers", orAny(set), major, from)}
}

// candidates are the versions a source offers of name, and which source:
// the index when one answers, else NVIDIA's archives and the table of real
// wheels.
func (c *computer) candidates(name string) ([]string, string) {
	if c.in.Index != nil {
		if vs, err := c.in.Index.Versions(c.ctx, name); err == nil && len(vs) > 0 {
			return vs, "the package index"
		}
	}
	var vs []string
	if c.in.ArchiveVersions != nil {
		vs = append(vs, c.in.ArchiveVersions(name)...)
	}
	for _, v := range c.in.Records.Versions(name) {
		if !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	return vs, "NVIDIA's archives"
}

// inCUDAMajor says whether version v of name is built for the CUDA major
// ranges choose in: a distribution the table ties to a CUDA major must be
// of that one; the toolkit's metadata distribution's version is the CUDA
// version itself.
func (c *computer) inCUDAMajor(name, v string) bool {
	if c.in.CUDAMajor == 0 {
		return true
	}
	if name == c.in.Distributions.ToolkitName {
		return strings.HasPrefix(v, fmt.Sprint(c.in.CUDAMajor)+".")
	}
	if d, ok := c.in.Distributions.Lookup(name); ok && d.CUDA != 0 {
		return d.CUDA == c.in.CUDAMajor
	}
	return true
}

func orAny(set pymeta.SpecifierSet) string {
	if s := set.String(); s != "" {
		return s
	}
	return "any version"
}
