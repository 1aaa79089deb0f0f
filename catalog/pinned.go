package catalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/internal/dotted"
)

// Pin asks for the version of a library that a Python distribution pins:
// torch 2.11 requires nvidia-cudnn-cu13==9.19.0.56, so libcudnn.so.9 must
// come from cuDNN 9.19.0.56, or failing that a newer 9.x.
type Pin struct {
	// Version is the component version the pin corresponds to. NVIDIA's
	// wheels carry the component's version, sometimes shortened
	// (nvidia-cusparselt-cu13 0.8.0 is libcusparse_lt 0.8.0.4): a pin
	// matches every version it is a prefix of, field by field.
	Version string
	// By names who pins it, for messages: "nvidia-cudnn-cu13 9.19.0.56".
	By string
}

// PinError says that no archive satisfies a pin, with what the catalog has.
type PinError struct {
	Soname    string
	Component string
	Pin       Pin
	Query     Query
	// Available are the versions the catalog has for the platform and CUDA
	// major, newest first.
	Available []string
}

func (e *PinError) Error() string {
	have := "none"
	if len(e.Available) > 0 {
		have = strings.Join(e.Available, ", ")
	}
	return fmt.Sprintf("%s is pinned to %s %s (by %s), and the catalog has no %s release of it at that version or a newer %s.x for %s (it has: %s)",
		e.Soname, e.Component, e.Pin.Version, e.Pin.By, e.Component, dotted.Major(e.Pin.Version), e.Query.Platform, have)
}

// WhichPinned is Which for a pinned library: the pinned version when the
// catalog has it; else the oldest release newer than the pin with the same
// major version (NVIDIA's libraries keep compatibility within a major);
// never an older one, never another major. Match.Pin says which was taken.
// When nothing qualifies the error is a *PinError listing what exists.
func (c *Catalog) WhichPinned(soname string, q Query, pin Pin) (*Match, error) {
	if pin.Version == "" {
		return c.Which(soname, q)
	}
	if _, ok := c.drivers[soname]; ok {
		return c.Which(soname, q)
	}
	fits, err := c.fitting(soname, q)
	if err != nil {
		return nil, err
	}
	if q.CUDAMajor == 0 {
		if _, err := c.Which(soname, q); err != nil {
			return nil, err // ambiguous CUDA major: say so, as Which does
		}
	}
	exact := filter(fits, func(x candidate) bool { return pinMatches(x.rel.Version, pin.Version) })
	if len(exact) > 0 {
		best := slices.MaxFunc(exact, func(a, b candidate) int { return better(a, b, q.CUDAMajor) })
		m := c.match(soname, best)
		m.Pin = fmt.Sprintf("pinned %s (by %s): the catalog has it", pin.Version, pin.By)
		return m, nil
	}
	newer := filter(fits, func(x candidate) bool {
		return dotted.Major(x.rel.Version) == dotted.Major(pin.Version) && dotted.Compare(x.rel.Version, pin.Version) > 0
	})
	if len(newer) == 0 {
		e := &PinError{Soname: soname, Component: fits[0].comp.Name, Pin: pin, Query: q}
		for _, x := range fits {
			if !slices.Contains(e.Available, x.rel.Version) {
				e.Available = append(e.Available, x.rel.Version)
			}
		}
		slices.SortFunc(e.Available, func(a, b string) int { return dotted.Compare(b, a) })
		return nil, e
	}
	// The oldest newer release is the closest to what the package was built
	// and tested with.
	best := slices.MinFunc(newer, func(a, b candidate) int {
		if c := dotted.Compare(a.rel.Version, b.rel.Version); c != 0 {
			return c
		}
		return -better(a, b, q.CUDAMajor)
	})
	m := c.match(soname, best)
	m.Pin = fmt.Sprintf("pinned %s (by %s); the catalog has %s: using it", pin.Version, pin.By, best.rel.Version)
	return m, nil
}

// pinMatches reports whether version is the pinned one: pin's fields are a
// prefix of version's (0.8.0 matches 0.8.0.4, 9.19.0.56 only itself).
func pinMatches(version, pin string) bool {
	v, p := strings.Split(version, "."), strings.Split(pin, ".")
	if len(p) > len(v) {
		return false
	}
	for i := range p {
		if dotted.Compare(v[i], p[i]) != 0 {
			return false
		}
	}
	return true
}
