package pyenv

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/cudadeps/cudadeps/internal/memo"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

//go:embed imports.yaml
var importsYAML []byte

// undeclaredImport is a package that imports other distributions' packages
// its METADATA does not name.
type undeclaredImport struct {
	Distribution string   `yaml:"distribution"`
	Imports      []string `yaml:"imports"`
	Source       string   `yaml:"source"`
}

// undeclaredImports is the built-in table, by normalized name, read once:
// an import order is asked for each distribution of an environment. Its
// callers do not change what it returns.
var undeclaredImports = sync.OnceValues(readUndeclaredImports)

// readUndeclaredImports reads the built-in table, by normalized name.
func readUndeclaredImports() (map[string][]string, error) {
	var list []undeclaredImport
	if err := yaml.Unmarshal(importsYAML, &list); err != nil {
		return nil, fmt.Errorf("imports table: %w", err)
	}
	out := map[string][]string{}
	for i, u := range list {
		if u.Distribution == "" || len(u.Imports) == 0 || len(strings.TrimSpace(u.Source)) < 20 {
			return nil, fmt.Errorf("imports table, entry %d (%s): needs distribution, imports and a source", i+1, u.Distribution)
		}
		n := pymeta.NormalizeName(u.Distribution)
		for _, x := range u.Imports {
			out[n] = append(out[n], pymeta.NormalizeName(x))
		}
	}
	return out, nil
}

// InstalledExtras are the extras of d whose requirements name an installed
// distribution. Installers do not record which extras a user asked for
// (jax-cuda13-plugin[with-cuda]): an extra counts when what it brings is
// there.
func (e *Env) InstalledExtras(d *Dist) []string {
	// One listing of the site directories serves every name asked about.
	dirs := e.distInfoDirs()
	return e.installedExtras(d, func(name string) bool {
		want := pymeta.NormalizeName(name)
		for _, di := range dirs {
			if di.name == want {
				_, err := e.cachedDist(di)
				return err == nil
			}
		}
		return false
	})
}

// installedExtras are the extras of d whose requirements name a
// distribution installed says is there.
func (e *Env) installedExtras(d *Dist, installed func(name string) bool) []string {
	if d.Metadata == nil {
		return nil
	}
	var out []string
	for _, x := range d.Metadata.ProvidesExtra {
		for _, req := range d.Metadata.RequiresDist {
			if ok, _ := req.Applies(e.Markers, nil); ok {
				continue // not an extra's requirement
			}
			if ok, _ := req.Applies(e.Markers, []string{x}); !ok {
				continue
			}
			if installed(req.Name) {
				out = append(out, x)
				break
			}
		}
	}
	return out
}

// Spec is the requirement string that names d with its installed extras:
// "jax-cuda13-plugin[with-cuda]".
func (e *Env) Spec(d *Dist) string {
	if extras := e.InstalledExtras(d); len(extras) > 0 {
		return d.Name + "[" + strings.Join(extras, ",") + "]"
	}
	return d.Name
}

// ImportOrder lists the installed distributions that d requires,
// transitively and through its installed extras, each after the ones it
// requires itself: the order in which their packages are imported before
// d's (torch before torchvision, both before a package requiring
// torchvision). Packages known to import another distribution's package
// that their METADATA does not name (imports.yaml: torchaudio imports
// torch) count as requiring it. Ties go by name, so the order does not
// depend on map order.
func (e *Env) ImportOrder(d *Dist) ([]*Dist, error) {
	// One reading of the environment serves every distribution of the
	// order.
	dists, _ := e.Installed()
	orders, err := e.ImportOrders(dists)
	if err != nil {
		return nil, err
	}
	return orders.Of(d)
}

// ImportOrders gives the import orders (ImportOrder) of the distributions
// of one reading of an environment. Each distribution's requirements are
// resolved once however many orders it is part of: the scan of an
// environment asks for the order of every distribution with a shared
// object, and torch's requirements are in most of them. It is safe for
// concurrent use.
type ImportOrders struct {
	e          *Env
	dists      map[string]*Dist
	metas      map[string]*pymeta.Metadata
	undeclared map[string][]string
	resolved   memo.Map[*Dist, resolvedDeps]
}

// resolvedDeps are the names of what a distribution requires,
// transitively, with the extras installed (pymeta.Resolve).
type resolvedDeps struct {
	names []string
	err   error
}

// ImportOrders prepares the import orders among dists (by normalized
// name, as Installed gives them).
func (e *Env) ImportOrders(dists map[string]*Dist) (*ImportOrders, error) {
	undeclared, err := undeclaredImports()
	if err != nil {
		return nil, err
	}
	metas := make(map[string]*pymeta.Metadata, len(dists))
	for n, x := range dists {
		metas[n] = x.Metadata
	}
	return &ImportOrders{e: e, dists: dists, metas: metas, undeclared: undeclared}, nil
}

// requirements resolves (once) what x requires, through the extras of it
// that name an installed distribution.
func (o *ImportOrders) requirements(x *Dist) ([]string, error) {
	r := o.resolved.Get(x, func() resolvedDeps {
		installed := func(name string) bool { return o.dists[pymeta.NormalizeName(name)] != nil }
		spec := x.Name
		if extras := o.e.installedExtras(x, installed); len(extras) > 0 {
			spec += "[" + strings.Join(extras, ",") + "]"
		}
		res, err := pymeta.Resolve(o.metas, spec, o.e.Markers)
		if err != nil {
			return resolvedDeps{err: fmt.Errorf("%w in %s", err, strings.Join(o.e.SiteDirs, ", "))}
		}
		names := make([]string, len(res.Dependencies))
		for i, dep := range res.Dependencies {
			names[i] = dep.Name
		}
		return resolvedDeps{names: names}
	})
	return r.names, r.err
}

// Of is ImportOrder(d).
func (o *ImportOrders) Of(d *Dist) ([]*Dist, error) {
	dists, undeclared := o.dists, o.undeclared
	self := pymeta.NormalizeName(d.Name)
	in := map[string]*Dist{}
	var add func(x *Dist) error
	add = func(x *Dist) error {
		deps, err := o.requirements(x)
		if err != nil {
			return err
		}
		more := slices.Clone(undeclared[pymeta.NormalizeName(x.Name)])
		for _, dep := range deps {
			if y := dists[pymeta.NormalizeName(dep)]; y != nil && dep != self && in[dep] == nil {
				in[dep] = y
				more = append(more, undeclared[dep]...)
			}
		}
		for _, n := range more {
			if y := dists[n]; y != nil && n != self && in[n] == nil {
				in[n] = y
				if err := add(y); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := add(d); err != nil {
		return nil, err
	}
	requires := func(x *Dist) []string {
		reqs := append(slices.Clone(x.Requires), undeclared[pymeta.NormalizeName(x.Name)]...)
		slices.Sort(reqs)
		return reqs
	}
	names := make([]string, 0, len(in))
	for n := range in {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []*Dist
	state := map[string]int{} // 1: being visited, 2: done
	var visit func(n string)
	visit = func(n string) {
		if state[n] != 0 {
			return // done, or a requirement cycle: the first visit places it
		}
		state[n] = 1
		for _, r := range requires(in[n]) {
			if rn := pymeta.NormalizeName(r); in[rn] != nil {
				visit(rn)
			}
		}
		state[n] = 2
		out = append(out, in[n])
	}
	for _, n := range names {
		visit(n)
	}
	return out, nil
}
