package pyenv

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

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
	return e.ImportOrderAmong(dists, d)
}

// ImportOrderAmong is ImportOrder with the environment's distributions as
// Installed gave them (by normalized name): a caller that asks for the
// order of each of them reads the environment once.
func (e *Env) ImportOrderAmong(dists map[string]*Dist, d *Dist) ([]*Dist, error) {
	undeclared, err := undeclaredImports()
	if err != nil {
		return nil, err
	}
	self := pymeta.NormalizeName(d.Name)
	metas := make(map[string]*pymeta.Metadata, len(dists))
	for n, x := range dists {
		metas[n] = x.Metadata
	}
	installed := func(name string) bool { return dists[pymeta.NormalizeName(name)] != nil }
	in := map[string]*Dist{}
	var add func(x *Dist) error
	add = func(x *Dist) error {
		spec := x.Name
		if extras := e.installedExtras(x, installed); len(extras) > 0 {
			spec += "[" + strings.Join(extras, ",") + "]"
		}
		res, err := pymeta.Resolve(metas, spec, e.Markers)
		if err != nil {
			return fmt.Errorf("%w in %s", err, strings.Join(e.SiteDirs, ", "))
		}
		more := slices.Clone(undeclared[pymeta.NormalizeName(x.Name)])
		for _, dep := range res.Dependencies {
			if y := dists[pymeta.NormalizeName(dep.Name)]; y != nil && dep.Name != self && in[dep.Name] == nil {
				in[dep.Name] = y
				more = append(more, undeclared[dep.Name]...)
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
