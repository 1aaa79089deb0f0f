package resolver

import (
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/python/declared"
)

// A declared distribution that is not installed, where no site-packages
// directory may be written (the target's is not this user's, and its
// interpreter enables no user site: a plain virtual environment), comes
// back into cudadeps' store alone: its wheel (or NVIDIA's archive of the
// same release) stays there, the activation script puts its library
// directory on LD_LIBRARY_PATH, and it is recorded as supplied by cudadeps,
// at the store's paths, so that the next resolve counts those copies as
// the distribution's own.

// storeOnly makes a restore step one that keeps the distribution in the
// store: no .dist-info is written, since there is no site to write it in.
func storeOnly(st *Step) {
	rs := st.Restore
	rs.Mode = RestoreSupply
	note := "no site-packages directory this user may write, and no user site: its libraries stay in cudadeps' store, found through the activation script; pip check will still list " + rs.Dist
	rs.Note = strings.TrimPrefix(rs.Note+"; "+note, "; ")
}

// decideStore serves a store-only restore through the activation script,
// for every object that needs its libraries.
func decideStore(st *Step) Decision {
	d := Decision{Step: st, Script: &ScriptActivation{For: []string{}}}
	for _, n := range st.needs {
		for _, by := range n.NeededBy {
			d.Script.For = uniq.Append(d.Script.For, by)
		}
	}
	if len(d.Script.For) == 0 {
		d.Script.For = append(d.Script.For, st.Restore.Dist+" "+st.Restore.Version)
	}
	return d
}

// storeFiles are the libraries of a store entry that the activation script
// serves, where they lie in the store.
func storeFiles(e fetch.Entry, st *Step) ([]string, error) {
	dir, names, err := libraries(e, st)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, filepath.Join(e.Dir, filepath.FromSlash(dir), n))
	}
	return out, nil
}

// supplied owns the libraries of a distribution supplied into the store
// alone where the store holds them (Supply.Files); one the store lacks is
// owned nowhere, restored through the activation script again.
func (l *Layout) supplied(d *declared.Dist) {
	for _, f := range d.Libraries() {
		name := path.Base(f.Path)
		if slices.ContainsFunc(l.libs[name], func(o *OwnedLib) bool { return o.Present }) {
			continue // an installed distribution has it: that one counts
		}
		p := ""
		for _, s := range d.Supply.Files {
			if filepath.Base(s) == name {
				p = s
			}
		}
		l.own(name, p, d.Name, d.Version, p != "" && fileExists(p))
	}
}
