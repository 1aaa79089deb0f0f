package resolver

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/bind"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// A package may need libraries that no distribution it declares provides:
// torch's aarch64 CUDA wheels link libnvpl_lapack_lp64_gomp.so.0,
// libnvpl_blas_lp64_gomp.so.0 and libcudss.so.0 and require no wheel that
// holds them. The plan names such a library as undeclared by the package,
// and as no requirement pins its version, it comes at the newest release
// of the CUDA major whose symbols bind against what the package needs.
//
// The catalog lists sonames, not symbols, so the binding is checked once
// the archive is in the store, before anything is placed: each object that
// needs the library is bound, as `ldd -r` binds it, in a loader model that
// also finds the round's new libraries. A release is refused when a
// reference of such an object stays unbound and is the release's to
// define: a reference to a version of the library's soname (NVIDIA's CUDA
// libraries version every symbol), a version of it the object needs, or
// an unversioned reference of an object that misses no other library this
// round (an extension module's unversioned references are the
// interpreter's too, and are not charged). The refused entry leaves the
// store and the next older release of the component for the platform and
// CUDA major is tried, up to maxBindingTries releases.
//
// The same rule holds for every library of a target that declares
// nothing (a directory, a system package): what no requirement pins is
// checked the same way.

// maxBindingTries bounds the releases tried for one library.
const maxBindingTries = 4

// UndeclaredLib is a library the package needs that no distribution it
// declares owns: it comes from NVIDIA's archives, at the newest release of
// the CUDA major whose symbols bind against what the package needs.
type UndeclaredLib struct {
	Soname   string   `json:"soname"`
	NeededBy []string `json:"needed_by"`
	// Component and Version are the release planned (after the binding
	// check, the one placed).
	Component string `json:"component"`
	Version   string `json:"version"`
}

// String says it on one line.
func (u UndeclaredLib) String() string {
	return fmt.Sprintf("%s: undeclared by the package (no distribution it requires holds it); %s %s, the newest release whose symbols bind against what the package needs", u.Soname, u.Component, u.Version)
}

// Refusal is a release downloaded for a library that no requirement pins
// and not placed: references of the objects that need it stay unbound.
type Refusal struct {
	Soname    string `json:"soname"`
	Component string `json:"component"`
	Version   string `json:"version"`
	// Unbound are those references (the first few), in the loader's
	// words: "OBJECT: undefined symbol: NAME, version V".
	Unbound []string `json:"unbound"`
	// Instead is the version taken in its place; "" when no older
	// release was left to try.
	Instead string `json:"instead,omitempty"`
}

// String says it on one line.
func (r Refusal) String() string {
	s := fmt.Sprintf("%s %s refused for %s: %s", r.Component, r.Version, r.Soname, strings.Join(r.Unbound, "; "))
	if r.Instead != "" {
		s += "; " + r.Instead + " taken instead"
	}
	return s
}

// markUndeclared names, for a Python target, the libraries of the plan's
// steps that no distribution the package declares owns.
func (s *session) markUndeclared(plan *Plan) {
	if s.t.Kind != KindPython || s.layout == nil {
		return
	}
	for _, st := range plan.Steps {
		if st.Restore != nil {
			continue
		}
		for _, n := range st.needs {
			if n.Owner != nil || s.layout.Owner(n.Soname) != nil {
				continue
			}
			n.Undeclared = true
			plan.Undeclared = append(plan.Undeclared, UndeclaredLib{Soname: n.Soname, NeededBy: n.NeededBy, Component: st.Component, Version: st.Version})
		}
	}
}

// judgedByBinding says whether a step's release is chosen by the binding
// rule: an NVIDIA archive for needs that no requirement pins.
func judgedByBinding(st *Step) bool {
	if st.Source != SourceNVIDIA || st.Restore != nil {
		return false
	}
	for _, n := range st.needs {
		if n.Owner != nil || n.Pin.Version != "" {
			return false
		}
	}
	return true
}

// checkBinding refuses the round's releases whose symbols do not bind, and
// installs the next older release in the place of each, until every
// release binds or none is left; a library no release serves is
// unresolved, its step and placement dropped.
func (s *session) checkBinding(r *Round, plan *Plan, entries map[fetch.Key]fetch.Entry) error {
	refused := map[string][]string{} // component → versions refused
	for try := 0; try < maxBindingTries; try++ {
		charged, err := s.unbound(r, plan, entries)
		if err != nil || len(charged) == 0 {
			return err
		}
		var drop []*Step
		for _, st := range plan.Steps {
			lines := charged[st]
			if len(lines) == 0 {
				continue
			}
			ref := Refusal{Soname: strings.Join(st.Provides, ", "), Component: st.Component, Version: st.Version, Unbound: firstN(lines, 3)}
			refused[st.Component] = append(refused[st.Component], st.Version)
			if err := s.change.Discard(s.ctx, st.Key()); err != nil {
				return err
			}
			delete(entries, st.Key())
			older := s.olderRelease(st, refused[st.Component])
			why := ""
			if older != nil && try < maxBindingTries-1 {
				older(st)
				e, err := s.installOlder(r, st)
				if err == nil {
					ref.Instead = st.Version
					r.Refused = append(r.Refused, ref)
					for i := range plan.Undeclared {
						if slices.Contains(st.Provides, plan.Undeclared[i].Soname) {
							plan.Undeclared[i].Version = st.Version
						}
					}
					entries[st.Key()] = e
					continue
				}
				if s.ctx.Err() != nil {
					return err
				}
				// The older release cannot be had (a mirror without it):
				// the library is named as no release served it.
				why = fmt.Sprintf("; %s %s could not be fetched: %v", st.Component, st.Version, err)
			}
			r.Refused = append(r.Refused, ref)
			drop = append(drop, st)
			for _, n := range st.needs {
				u := Unresolved{Soname: n.Soname, NeededBy: n.NeededBy, Kind: UnresolvedMissing,
					Reason: fmt.Sprintf("no release of %s for %s and CUDA %d binds against what the package needs: %s", st.Component, s.out.Platform, s.out.CUDAMajor, strings.Join(refused[st.Component], ", ")+" refused ("+strings.Join(ref.Unbound, "; ")+")"+why),
					Advice: "name a release that has these symbols with --catalog, or install the library the package was built against"}
				plan.Unresolved = append(plan.Unresolved, u)
				s.unbindable[n.Soname] = u
			}
			s.out.Unresolved = plan.Unresolved
		}
		if len(drop) > 0 {
			plan.Steps = slices.DeleteFunc(plan.Steps, func(st *Step) bool { return slices.Contains(drop, st) })
			r.Decisions = slices.DeleteFunc(r.Decisions, func(d Decision) bool { return slices.Contains(drop, d.Step) })
		}
	}
	return nil
}

// installOlder brings the release st now names into the store.
func (s *session) installOlder(r *Round, st *Step) (fetch.Entry, error) {
	installed, err := s.change.Install(s.ctx, s.opts.Client, []fetch.Item{{Key: st.Key(), Request: fetch.Request{
		Name: fmt.Sprintf("%s %s (%s)", st.Component, st.Version, st.Platform), URL: st.URL, SHA256: st.SHA256, Size: st.Size}}})
	r.Installed = append(r.Installed, installed...)
	if err != nil {
		return fetch.Entry{}, err
	}
	e, ok, err := s.opts.Prefix.Store().Lookup(st.Key())
	if err != nil || !ok {
		return fetch.Entry{}, fmt.Errorf("%s: not in the store after install: %v", st.Key(), err)
	}
	return e, nil
}

// unbound binds the objects that need the judged steps' libraries with the
// round's new libraries found, and returns, by step, the references that
// stay unbound and are the step's release's to define.
func (s *session) unbound(r *Round, plan *Plan, entries map[fetch.Key]fetch.Entry) (map[*Step][]string, error) {
	j, seen := judgedSteps(s, plan, entries)
	if !seen || len(j.objects) == 0 {
		return nil, nil // the root cannot see the store, or nothing to judge
	}
	bySoname, dirs, objects := j.bySoname, j.dirs, j.objects
	// What each object misses this round, every library counted.
	missing := map[string][]string{}
	for _, n := range r.Missing {
		for _, req := range n.Requests {
			missing[req.Object] = uniq.Append(missing[req.Object], n.Soname)
		}
	}
	env, err := s.envDirs()
	if err != nil {
		return nil, err
	}
	l, err := newLoader(s.ctx, s.opts.Loader, append(dirs, env...))
	if err != nil {
		return nil, err
	}
	defer l.Close()
	b := bind.New()
	out := map[*Step][]string{}
	charge := func(soname, line string) {
		if st := bySoname[soname]; st != nil && !slices.Contains(out[st], line) {
			out[st] = append(out[st], line)
		}
	}
	names := make([]string, 0, len(objects))
	for o := range objects {
		names = append(names, o)
	}
	sort.Strings(names)
	for _, obj := range names {
		res, err := l.Closure(s.ctx, l.HostPath(obj))
		if err != nil {
			s.opts.Logger.Warn("binding not checked", "object", obj, "error", err)
			continue
		}
		for _, ve := range res.VersionErrors {
			if ve.Object == res.Main && !ve.Weak {
				charge(ve.File, fmt.Sprintf("%s: version `%s' not found (required by %s)", ve.File, ve.Version, obj))
			}
		}
		undef, err := b.Check(s.ctx, res.Objects, []*ldso.Object{res.Main})
		if err != nil {
			s.opts.Logger.Warn("binding not checked", "object", obj, "error", err)
			continue
		}
		only := ""
		if m := missing[obj]; len(m) == 1 && !isExtensionModule(path.Base(obj)) {
			only = m[0]
		}
		for _, u := range undef {
			line := obj + ": " + u.Message()
			switch {
			case u.File != "":
				charge(u.File, line)
			case only != "":
				charge(only, line)
			}
		}
	}
	return out, nil
}

// judged is what unbound binds: the objects that need the judged steps'
// libraries, the step owning each soname, and the steps' library
// directories as the loader model names them.
type judged struct {
	bySoname map[string]*Step
	dirs     []string
	objects  map[string]bool
}

// judgedSteps collects what unbound binds; false when the root cannot see
// the store.
func judgedSteps(s *session, plan *Plan, entries map[fetch.Key]fetch.Entry) (judged, bool) {
	j := judged{bySoname: map[string]*Step{}, objects: map[string]bool{}}
	for _, st := range plan.Steps {
		e, ok := entries[st.Key()]
		if !ok {
			continue
		}
		if libDir, _, err := libraries(e, st); err == nil {
			d, seen := s.modelDir(filepath.Join(e.Dir, filepath.FromSlash(libDir)))
			if !seen {
				return j, false
			}
			j.dirs = append(j.dirs, d)
		}
		if !judgedByBinding(st) {
			continue
		}
		for _, n := range st.needs {
			j.bySoname[n.Soname] = st
			if n.Runtime {
				continue // opened with dlopen: bound by dlsym, not by relocations
			}
			for _, req := range n.Requests {
				j.objects[req.Object] = true
			}
		}
	}
	return j, true
}

// modelDir is a directory of this machine as the loader model names it:
// under --root, as the root sees it (false when the root cannot).
func (s *session) modelDir(host string) (string, bool) {
	if s.opts.Loader.Root == "" {
		return host, true
	}
	for _, root := range []string{s.opts.Prefix.Root(), physical(s.root.Dir())} {
		if rel, ok := strings.CutPrefix(host, root+"/"); ok {
			return "/" + rel, true
		}
	}
	return "", false
}

// olderRelease finds the newest release of the step's component older than
// every refused one with an archive for the platform and CUDA major that
// provides what the step provides, and returns what turns the step into it;
// nil when there is none.
func (s *session) olderRelease(st *Step, refused []string) func(*Step) {
	comp, ok := s.opts.Catalog.Component(st.Component)
	if !ok {
		return nil
	}
	oldest := refused[0]
	for _, v := range refused[1:] {
		if dotted.Less(v, oldest) {
			oldest = v
		}
	}
	for _, r := range comp.Releases { // newest first
		if !dotted.Less(r.Version, oldest) {
			continue
		}
		for _, a := range r.Archives {
			if !a.Fits(r, s.out.Platform, s.out.CUDAMajor) || !providesAll(a, st.Provides) {
				continue
			}
			return func(st *Step) { s.becomeRelease(st, comp, r, a) }
		}
	}
	return nil
}

func providesAll(a *catalog.Archive, sonames []string) bool {
	for _, n := range sonames {
		if !slices.Contains(a.Sonames, n) {
			return false
		}
	}
	return true
}

// becomeRelease turns a step into the archive a of release r.
func (s *session) becomeRelease(st *Step, comp *catalog.Component, r *catalog.Release, a *catalog.Archive) {
	st.Version, st.Platform, st.CUDAVariant = r.Version, a.Platform, a.CUDAVariant
	st.URL, st.SHA256, st.Size, st.Sonames = s.opts.Catalog.URL(comp, a), a.SHA256, a.Size, a.Sonames
	st.Installed, st.Cached = false, false
	st.Pin = "an older release: the newer ones' symbols do not bind"
}

func firstN(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	return append(slices.Clone(list[:n]), fmt.Sprintf("%d more", len(list)-n))
}
