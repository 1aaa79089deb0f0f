package catalog

import (
	"fmt"
	"slices"
)

// ArchiveID names one archive as a plan's step does: the component, its
// version, the platform and CUDA variant, and the sha256 it must have.
type ArchiveID struct {
	Component   string
	Version     string
	Platform    string
	CUDAVariant string
	SHA256      string
}

func (id ArchiveID) String() string {
	s := id.Component + " " + id.Version + " (" + id.Platform
	if id.CUDAVariant != "" {
		s += ", " + id.CUDAVariant
	}
	return s + ")"
}

// Find is the archive id names, with its component and release. It fails
// when the catalog has no such archive, or has it with another sha256.
func (c *Catalog) Find(id ArchiveID) (*Component, *Release, *Archive, error) {
	if comp, ok := c.Component(id.Component); ok {
		for _, r := range comp.Releases {
			if r.Version != id.Version {
				continue
			}
			for _, a := range r.Archives {
				if a.Platform != id.Platform || a.CUDAVariant != id.CUDAVariant {
					continue
				}
				if a.SHA256 != id.SHA256 {
					return nil, nil, nil, fmt.Errorf("%s: the plan's sha256 is %s, the catalog's %s: use the catalog the plan was made with", id, id.SHA256, a.SHA256)
				}
				return comp, r, a, nil
			}
		}
	}
	return nil, nil, nil, fmt.Errorf("%s: no catalog here lists this archive: add the catalog the plan was made with (--catalog or CUDADEPS_CATALOG)", id)
}

// Excerpt is a catalog layer that holds the releases of the archives ids
// name, each whole (every platform's archives, since a layer's release
// replaces the release of the same version below it), with their
// components and products. Layered over any catalog it makes those
// archives known as c knows them. It fails as Find does.
func (c *Catalog) Excerpt(ids []ArchiveID) (*Catalog, error) {
	out := &Catalog{products: map[string]*Product{}, drivers: map[string]*Driver{}, components: map[string]*Component{}}
	for _, id := range ids {
		comp, rel, _, err := c.Find(id)
		if err != nil {
			return nil, err
		}
		if p, ok := c.products[comp.Product]; ok {
			out.products[p.Name] = p
		}
		have, ok := out.components[comp.Name]
		if !ok {
			cp := *comp
			cp.Sonames = slices.Clone(comp.Sonames)
			cp.Releases = nil
			have = &cp
			out.components[comp.Name] = have
		}
		if !slices.Contains(have.Releases, rel) {
			have.Releases = append(have.Releases, rel)
			sortReleases(have.Releases)
		}
	}
	return out, out.check()
}
