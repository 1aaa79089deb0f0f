package resolver

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// Placement is where a step's libraries go so that the loader finds them
// for the objects that need them.
type Placement struct {
	// Dir is a directory the loader already searches for the needing
	// objects (an RPATH or RUNPATH entry), as the loader names it, or the
	// directory a distribution's RECORD puts the libraries in.
	Dir string `json:"loader_dir"`
	// HostDir is the same directory on this machine, resolved.
	HostDir string `json:"dir"`
	// Rule and Entry say why the loader searches it.
	Rule  ldso.Via `json:"rule"`
	Entry string   `json:"entry"`
	For   []string `json:"for"` // the needing objects it serves
	// Create is set when the directory does not exist yet.
	Create bool `json:"create,omitempty"`
	// Owner is the distribution whose RECORD puts Names here; only those
	// files are placed then, under the names RECORD gives.
	Owner string   `json:"owner,omitempty"`
	Names []string `json:"names,omitempty"`
}

// ScriptActivation is set when some needing object searches no directory the
// user may write: LD_LIBRARY_PATH must then name the store's library
// directory, through the activation script.
type ScriptActivation struct {
	For []string `json:"for"`
}

// Decision is where one step's libraries are placed.
type Decision struct {
	Step       *Step             `json:"-"`
	Placements []Placement       `json:"placements"`
	Script     *ScriptActivation `json:"environment,omitempty"`
}

// dirChecker answers the questions of placement about directories.
type dirChecker interface {
	// host maps a loader path to this machine.
	host(dir string) string
	// usable says whether a library may be placed in dir (the loader's
	// path): not a system directory, writable or creatable by this user.
	usable(dir string) (ok, exists bool)
	// foreign says whether dir (the loader's path) belongs to a
	// distribution other than the one that owns the step's libraries.
	foreign(dir string, s *Step) bool
}

// Decide chooses, for every step, where its libraries go. A library that
// a required distribution's RECORD lists goes back exactly there, so that
// Python-level loaders find it too. Any other goes, for each object that
// needs it, to a directory of its RPATH or RUNPATH that the user may write
// (created if need be) and that no distribution owns, preferring one named
// after the component (nvidia/cusparselt/lib for cuSPARSELt) and then one
// that exists; a directory that serves every needing object at once is
// taken over one per object. Objects with no such directory fall back to
// the activation script. Decide changes nothing.
func Decide(plan *Plan, dc dirChecker) []Decision {
	var out []Decision
	for _, s := range plan.Steps {
		d := Decision{Step: s}
		var reqs []Request
		for _, n := range s.needs {
			if n.Owner != nil {
				d.placeOwned(n, dc)
				continue
			}
			reqs = append(reqs, n.Requests...)
		}
		d.placeForRequests(reqs, dc)
		out = append(out, d)
	}
	return out
}

// placeOwned puts a distribution's library where its RECORD says; where
// that directory may not be written (a system site-packages), or the
// distribution is to be restored nowhere, the activation script serves it.
func (d *Decision) placeOwned(n *Need, dc dirChecker) {
	if n.Owner.Path == "" {
		d.script(n.NeededBy)
		return
	}
	dir := filepath.Dir(n.Owner.Path)
	if !creatable(dir) {
		d.script(n.NeededBy)
		return
	}
	for i := range d.Placements {
		p := &d.Placements[i]
		if p.HostDir == dir && p.Owner == n.Owner.Dist {
			p.Names = uniq.Append(p.Names, n.Owner.Name)
			for _, by := range n.NeededBy {
				p.For = uniq.Append(p.For, by)
			}
			return
		}
	}
	_, err := os.Stat(dir)
	d.Placements = append(d.Placements, Placement{Dir: dir, HostDir: dir, Entry: "RECORD of " + n.Owner.Describe(),
		For: slices.Clone(n.NeededBy), Create: err != nil, Owner: n.Owner.Dist, Names: []string{n.Owner.Name}})
}

// script adds objects to those the activation script serves.
func (d *Decision) script(objects []string) {
	if d.Script == nil {
		d.Script = &ScriptActivation{}
	}
	for _, o := range objects {
		d.Script.For = uniq.Append(d.Script.For, o)
	}
}

type candidateDir struct {
	dir   ldso.SearchDir
	score int
}

// placeForRequests chooses search-path directories for the objects whose
// searches failed.
func (d *Decision) placeForRequests(reqs []Request, dc dirChecker) {
	options := map[string][]candidateDir{} // object → usable dirs, best first
	var objects []string
	for _, r := range reqs {
		if _, seen := options[r.Object]; seen {
			continue
		}
		objects = append(objects, r.Object)
		options[r.Object] = candidateDirs(r, d.Step, dc)
	}
	best, ok := sharedDir(objects, options)
	add := func(sd ldso.SearchDir, obj string) {
		for i := range d.Placements {
			if d.Placements[i].Dir == sd.Dir {
				d.Placements[i].For = uniq.Append(d.Placements[i].For, obj)
				return
			}
		}
		_, exists := dc.usable(sd.Dir)
		d.Placements = append(d.Placements, Placement{Dir: sd.Dir, HostDir: dc.host(sd.Dir), Rule: sd.Via, Entry: sd.Entry, For: []string{obj}, Create: !exists})
	}
	for _, o := range objects {
		switch {
		case ok:
			add(best, o)
		case len(options[o]) > 0:
			add(options[o][0].dir, o)
		default:
			if d.Script == nil {
				d.Script = &ScriptActivation{}
			}
			d.Script.For = uniq.Append(d.Script.For, o)
		}
	}
}

// candidateDirs are the directories of one failed search a library may be
// placed in, best first.
func candidateDirs(r Request, s *Step, dc dirChecker) []candidateDir {
	var cs []candidateDir
	for i, sd := range r.Searched {
		if sd.Via == ldso.ViaLDLibraryPath || sd.Dir == "" || !path.IsAbs(sd.Dir) {
			// LD_LIBRARY_PATH is not there in a new shell; relative entries
			// depend on the working directory.
			continue
		}
		if dc.foreign(sd.Dir, s) {
			// Another distribution's directory: its RECORD does not list
			// the library, and Python-level loaders do not look there.
			continue
		}
		ok, exists := dc.usable(sd.Dir)
		if !ok {
			continue
		}
		score := 1000 - i
		if exists {
			score += 2000
		}
		if namedFor(sd.Dir, s) {
			score += 4000
		}
		cs = append(cs, candidateDir{sd, score})
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].score > cs[j].score })
	return cs
}

// sharedDir is the directory every object can use, best by total score.
func sharedDir(objects []string, options map[string][]candidateDir) (ldso.SearchDir, bool) {
	var best ldso.SearchDir
	bestScore := -1
	if len(objects) == 0 {
		return best, false
	}
	for _, c := range options[objects[0]] {
		total, all := c.score, true
		for _, o := range objects[1:] {
			i := slices.IndexFunc(options[o], func(c2 candidateDir) bool { return c2.dir.Dir == c.dir.Dir })
			if i < 0 {
				all = false
				break
			}
			total += options[o][i].score
		}
		if all && total > bestScore {
			best, bestScore = c.dir, total
		}
	}
	return best, bestScore >= 0
}

// namedFor reports a directory that belongs to the component, such as the
// nvidia/cusparselt/lib of the nvidia-cusparselt wheel.
func namedFor(dir string, s *Step) bool {
	names := []string{s.Product, strings.TrimPrefix(s.Component, "lib"), strings.ReplaceAll(strings.TrimPrefix(s.Component, "lib"), "_", "")}
	for _, part := range strings.Split(dir, "/") {
		for _, n := range names {
			if n != "" && strings.EqualFold(part, n) {
				return true
			}
		}
	}
	return false
}

// systemPrefixes are never written to, whoever runs cudadeps: they belong
// to the system's package manager.
func systemPrefixes() []string {
	return []string{"/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32", "/usr/bin", "/bin", "/usr/sbin", "/sbin", "/etc", "/proc", "/sys", "/dev", "/boot"}
}

// fsChecker is the real dirChecker.
type fsChecker struct {
	l          *ldso.Loader
	systemDirs []string
	layout     *Layout
	// sites are a Python target's site-packages directories: no directory
	// is created outside them (a wheel's RPATH may name one that only
	// another install layout has).
	sites []string
}

func (c *fsChecker) foreign(dir string, s *Step) bool {
	owner := c.layout.OwnerOfDir(c.host(dir))
	if owner == "" {
		return false
	}
	for _, n := range s.Sonames {
		if o := c.layout.Owner(n); o != nil && o.Dist == owner {
			return false // the component's own wheel's directory
		}
	}
	return true
}

// host maps a loader directory to this machine, resolved physically (as
// the kernel resolves "..": after symlinks) and cleaned, for display and
// for creating it.
func (c *fsChecker) host(dir string) string { return physical(c.l.HostPath(dir)) }

// physical resolves the existing leading part of p through its symlinks and
// appends the rest; the result has no "." or ".." left.
func physical(p string) string {
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "/"
	}
	parts := strings.Split(p, "/")
	for i := len(parts); i > 0; i-- {
		head := strings.Join(parts[:i], "/")
		if head == "" {
			head = "/"
		}
		if real, err := filepath.EvalSymlinks(head); err == nil {
			return filepath.Join(append([]string{real}, parts[i:]...)...)
		}
	}
	return filepath.Clean(p)
}

func (c *fsChecker) usable(dir string) (bool, bool) {
	clean := path.Clean(dir)
	for _, s := range append(append([]string(nil), c.systemDirs...), systemPrefixes()...) {
		s = strings.TrimSuffix(s, "/")
		if clean == s || strings.HasPrefix(clean, s+"/") {
			return false, false
		}
	}
	h := c.host(clean)
	if st, err := os.Stat(h); err == nil {
		return st.IsDir() && writable(h), st.IsDir()
	}
	if len(c.sites) > 0 && !slices.ContainsFunc(c.sites, func(site string) bool {
		site = physical(site)
		return h == site || strings.HasPrefix(h, site+"/")
	}) {
		return false, false
	}
	// Creatable: the nearest existing ancestor is a writable directory.
	for p := filepath.Dir(h); ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil {
			return st.IsDir() && writable(p), false
		}
		if p == filepath.Dir(p) {
			return false, false
		}
	}
}

// creatable says whether this user may write in dir (a host path), or
// create it: its nearest existing ancestor is a writable directory.
func creatable(dir string) bool {
	for p := dir; ; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil {
			return st.IsDir() && writable(p)
		}
		if p == filepath.Dir(p) {
			return false
		}
	}
}

func writable(dir string) bool {
	return syscall.Access(dir, 0x2|0x1) == nil // W_OK|X_OK
}

// libraries finds, in a store entry, the files that provide the archive's
// sonames: the soname's own file in the directory that holds the needed
// one, and its siblings, so that the libraries' own $ORIGIN lookups find
// each other where they are placed.
func libraries(e fetch.Entry, s *Step) (dir string, names []string, err error) {
	files := map[string]bool{}
	for _, f := range e.Files {
		files[f] = true
	}
	for _, want := range s.Provides {
		for _, f := range e.Files {
			if path.Base(f) == want && !strings.Contains(f, "/stubs/") {
				dir = path.Dir(f)
				break
			}
		}
		if dir != "" {
			break
		}
	}
	if dir == "" {
		return "", nil, fmt.Errorf("%s: the archive has no file named %s", e.Dir, strings.Join(s.Provides, " or "))
	}
	for _, so := range s.Sonames {
		if files[path.Join(dir, so)] {
			names = append(names, so)
		}
	}
	for _, want := range s.Provides {
		if !slices.Contains(names, want) && files[path.Join(dir, want)] {
			names = append(names, want)
		}
	}
	sort.Strings(names)
	return dir, names, nil
}

// libFile is one file of a store entry to place, under name.
type libFile struct {
	name string
	rel  string // slash-separated, relative to the entry
}

// placementFiles are the store files one placement puts in place: the
// names a RECORD gives, found anywhere in the entry, or else the
// libraries that serve the step's needs.
func placementFiles(e fetch.Entry, s *Step, pl Placement) ([]libFile, error) {
	if len(pl.Names) == 0 {
		dir, names, err := libraries(e, s)
		if err != nil {
			return nil, err
		}
		out := make([]libFile, 0, len(names))
		for _, n := range names {
			out = append(out, libFile{name: n, rel: path.Join(dir, n)})
		}
		return out, nil
	}
	libDir, _, _ := libraries(e, s)
	var out []libFile
	for _, want := range pl.Names {
		// A wheel holds the file at the path its RECORD gives.
		found, err := memberFile(e, s, want)
		if err != nil {
			return out, err
		}
		for _, f := range e.Files {
			if found != "" && s.members[want].path == found {
				break
			}
			if path.Base(f) != want || strings.Contains(f, "/stubs/") {
				continue
			}
			if found == "" || path.Dir(f) == libDir {
				found = f
			}
		}
		if found == "" {
			return out, fmt.Errorf("%s: the archive has no file named %s, which %s's RECORD lists", e.Dir, want, pl.Owner)
		}
		out = append(out, libFile{name: want, rel: found})
	}
	return out, nil
}

// activationFiles are the files of one placement, from the store entry e
// into hostDir, as activation places them.
func activationFiles(e fetch.Entry, s *Step, hostDir string, files []libFile) []activation.File {
	out := make([]activation.File, 0, len(files))
	dist := ""
	if s.Restore != nil {
		dist = s.Restore.Dist
	}
	for _, f := range files {
		out = append(out, activation.File{Path: filepath.Join(hostDir, f.name), From: filepath.Join(e.Dir, filepath.FromSlash(f.rel)),
			Soname: f.name, Component: s.Component, Dist: dist})
	}
	return out
}
