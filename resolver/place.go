package resolver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/ldso"
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

// placeOwned puts a distribution's library where its RECORD says.
func (d *Decision) placeOwned(n *Need, dc dirChecker) {
	dir := filepath.Dir(n.Owner.Path)
	for i := range d.Placements {
		p := &d.Placements[i]
		if p.HostDir == dir && p.Owner == n.Owner.Dist {
			p.Names = appendUnique(p.Names, n.Owner.Name)
			for _, by := range n.NeededBy {
				p.For = appendUnique(p.For, by)
			}
			return
		}
	}
	_, err := os.Stat(dir)
	d.Placements = append(d.Placements, Placement{Dir: dir, HostDir: dir, Entry: "RECORD of " + n.Owner.Describe(),
		For: slices.Clone(n.NeededBy), Create: err != nil, Owner: n.Owner.Dist, Names: []string{n.Owner.Name}})
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
				d.Placements[i].For = appendUnique(d.Placements[i].For, obj)
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
			d.Script.For = appendUnique(d.Script.For, o)
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

func writable(dir string) bool {
	return syscall.Access(dir, 0x2|0x1) == nil // W_OK|X_OK
}

// Placed is one file cudadeps put in place.
type Placed struct {
	Path      string `json:"path"`             // on this machine
	Link      string `json:"link,omitempty"`   // the symlink's target, as written
	SHA256    string `json:"sha256,omitempty"` // of a copy
	Soname    string `json:"soname"`
	Component string `json:"component"`
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
	rel  string // slash-separated, relative to the entry; or an absolute path
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

// apply places files of one store entry in hostDir, recording each
// file and each directory it creates. Every change is announced in the
// record's journal before it is made. An existing file of the same name is
// left alone (it is not ours), unless another target placed it: then this
// target shares it.
func apply(rec *Record, e fetch.Entry, s *Step, hostDir string, files []libFile, copyFiles bool) ([]Placed, error) {
	if err := mkdirRecorded(rec, hostDir); err != nil {
		return nil, err
	}
	if err := rec.shareDir(hostDir); err != nil {
		return nil, err
	}
	type todo struct {
		p   Placed
		src string
		tmp string
	}
	var plan []todo
	var intents []journalLine
	for _, f := range files {
		name := f.name
		dst := filepath.Join(hostDir, name)
		src := f.rel // written by cudadeps (a .dist-info's RECORD), else in the entry
		if !filepath.IsAbs(src) {
			src = filepath.Join(e.Dir, filepath.FromSlash(f.rel))
		}
		if _, err := os.Lstat(dst); err == nil {
			if rec.owns(dst) {
				continue
			}
			shared, err := rec.shareExisting(dst)
			if err != nil {
				return nil, err
			}
			if !shared {
				rec.Kept = appendUnique(rec.Kept, dst)
			}
			continue
		}
		t := todo{p: Placed{Path: dst, Soname: name, Component: s.Component}, src: src}
		if copyFiles {
			sum, err := fileSum(src)
			if err != nil {
				return nil, fmt.Errorf("copy %s: %w", src, err)
			}
			t.p.SHA256 = sum
			t.tmp = copyTemp(dst)
			intents = append(intents, journalLine{Op: opCopy, Path: dst, SHA256: sum, Temp: t.tmp, Soname: name, Component: s.Component})
		} else {
			// A relative link survives moving the prefix and the tree
			// together (an image prepared under --root).
			link, err := filepath.Rel(hostDir, src)
			if err != nil || strings.Count(link, "..") > 12 {
				link = src
			}
			t.p.Link = link
			intents = append(intents, journalLine{Op: opLink, Path: dst, Link: link, Soname: name, Component: s.Component})
		}
		plan = append(plan, t)
	}
	if err := rec.intend(intents...); err != nil {
		return nil, err
	}
	rec.Installed = appendKeys(rec.Installed, []fetch.Key{e.Key})
	var out []Placed
	for _, t := range plan {
		if copyFiles {
			sum, err := copyFile(t.src, t.p.Path, t.tmp)
			if err != nil {
				return out, err
			}
			if sum != t.p.SHA256 {
				os.Remove(t.p.Path)
				return out, fmt.Errorf("copy %s to %s: the source changed while it was copied", t.src, t.p.Path)
			}
		} else if err := os.Symlink(t.p.Link, t.p.Path); err != nil {
			return out, fmt.Errorf("link %s: %w", t.p.Path, err)
		}
		rec.setPlaced(t.p)
		out = append(out, t.p)
		rec.step("placed")
	}
	return out, nil
}

// mkdirRecorded creates dir and records every directory it had to create,
// each announced in the journal first.
func mkdirRecorded(rec *Record, dir string) error {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		if _, err := os.Stat(p); err == nil {
			break
		}
		missing = append(missing, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	var intents []journalLine
	for i := len(missing) - 1; i >= 0; i-- {
		intents = append(intents, journalLine{Op: opMkdir, Path: missing[i]})
	}
	if err := rec.intend(intents...); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w", missing[i], err)
		}
		rec.Created = appendUnique(rec.Created, missing[i])
		rec.step("mkdir")
	}
	return nil
}

// copyTemp is the name a copy is written under before it is renamed to
// dst: fixed, so that a journal can name it.
func copyTemp(dst string) string {
	return filepath.Join(filepath.Dir(dst), ".cudadeps-"+filepath.Base(dst)+".part")
}

// copyFile copies src (following symlinks) to dst through the temporary
// file tmp, so dst appears whole, and returns its sha256.
func copyFile(src, dst, tmp string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return "", err
	}
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, st.Mode().Perm())
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
