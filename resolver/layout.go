package resolver

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/plural"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/python/declared"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// Layout is what a Python target's installed distributions say about its
// libraries: which distribution's RECORD puts each shared library where, at
// which version, and which of those files are gone. It is the authority on
// where a library belongs and which version the package was built for.
type Layout struct {
	// Dists are the target's distribution and those it requires, with the
	// state of their files.
	Dists []*DistState           `json:"distributions"`
	libs  map[string][]*OwnedLib // by file name
	dirs  map[string]string      // directory (physical host path) → owning distribution
	// real memoizes physical for the directories own meets: a wheel
	// puts hundreds of libraries in a few directories, and each physical
	// path costs a stat per path component.
	real map[string]string
	// majors, when set, says which CUDA majors builds of a soname at a
	// release are made for (cudaMajorsOf over the catalog).
	majors func(soname, version string) []int
}

// DistState is one distribution's RECORD against the disk.
type DistState struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Pin is the requirement that selects this distribution's version, as
	// the requiring distribution wrote it ("nvidia-cudnn-cu13==9.19.0.56"),
	// with who wrote it; empty for the target itself.
	Pin      string `json:"pin,omitempty"`
	PinnedBy string `json:"pinned_by,omitempty"`
	Files    int    `json:"files"`
	// Missing are RECORD's files that are not on disk (a dangling link
	// counts as missing).
	Missing []string `json:"missing"`
}

// OwnedLib is a shared library that an installed distribution's RECORD
// lists.
type OwnedLib struct {
	Name    string `json:"name"` // the file name (the soname, for NVIDIA's wheels)
	Path    string `json:"path"` // where RECORD puts it, on this machine
	Dist    string `json:"distribution"`
	Version string `json:"version"` // the distribution's version
	Present bool   `json:"present"`
}

// Describe names the owner for messages: "nvidia-cudnn-cu13 9.19.0.56".
func (o *OwnedLib) Describe() string { return o.Dist + " " + o.Version }

// newLayout reads the ownership of the target's libraries from RECORD:
// the installed distributions' own, and for the NVIDIA distributions the
// target declares but that are not installed (cl), the RECORD paths their
// wheel would write, under site (where they are to be restored; "" when no
// site-packages directory may be written: then they have no path and are
// restored through the activation script). Only Python targets have one;
// for others it is nil.
func newLayout(t *Target, cl *declared.Closure, site string) *Layout {
	if t.Kind != KindPython || t.Dist == nil {
		return nil
	}
	lay := &Layout{libs: map[string][]*OwnedLib{}, dirs: map[string]string{}}
	// A distribution whose extras name itself (scikit-image[data]) is
	// among its own requirements: each once.
	self := pymeta.NormalizeName(t.Dist.Name)
	dists := append(slices.DeleteFunc(slices.Clone(t.Requires), func(d *pyenv.Dist) bool { return pymeta.NormalizeName(d.Name) == self }), t.Dist)
	// Every distribution's files asked about at once: the small ones'
	// directories are listed beside torch's, not one distribution after
	// the other.
	var all []string
	for _, d := range dists {
		all = append(all, d.Files...)
	}
	allExist := presence(all)
	for _, d := range dists {
		st := &DistState{Name: d.Name, Version: d.Version, Missing: []string{}, Files: len(d.Files)}
		if p, ok := t.Pins[pymeta.NormalizeName(d.Name)]; ok {
			st.Pin, st.PinnedBy = p.Requirement, p.By
		}
		exists := allExist[:len(d.Files)]
		allExist = allExist[len(d.Files):]
		for i, f := range d.Files {
			present := exists[i]
			if !present {
				st.Missing = append(st.Missing, f)
			}
			lay.own(filepath.Base(f), f, d.Name, d.Version, present)
		}
		lay.Dists = append(lay.Dists, st)
	}
	sort.Slice(lay.Dists, func(i, j int) bool { return lay.Dists[i].Name < lay.Dists[j].Name })
	lay.addDeclared(cl, site)
	return lay
}

// addDeclared adds the NVIDIA distributions of cl that are not installed,
// as newLayout does: a layout built without them gets them without its
// installed files being stat'ed again.
func (l *Layout) addDeclared(cl *declared.Closure, site string) {
	if l == nil || cl == nil {
		return
	}
	for _, d := range cl.Dists {
		l.declared(d, site)
	}
}

// own records that distribution dist's RECORD puts the file name at p.
func (l *Layout) own(name, p, dist, version string, present bool) {
	if !isSharedLibrary(name) {
		return
	}
	lib := &OwnedLib{Name: name, Path: p, Dist: dist, Version: version, Present: present}
	l.libs[name] = append(l.libs[name], lib)
	if p == "" {
		return
	}
	dir, ok := l.real[filepath.Dir(p)]
	if !ok {
		dir = physical(filepath.Dir(p))
		if l.real == nil {
			l.real = map[string]string{}
		}
		l.real[filepath.Dir(p)] = dir
	}
	if _, taken := l.dirs[dir]; !taken {
		l.dirs[dir] = dist
	}
}

// declared adds a declared distribution that is not installed: its
// libraries are owned at the paths its wheel's RECORD gives, under the
// site it is (or is to be) restored in.
func (l *Layout) declared(d *declared.Dist, site string) {
	if d.Installed != nil && d.State != declared.OtherVersion {
		return // read from its own RECORD above
	}
	if d.Supply != nil {
		site = d.Supply.Site
		if site == "" {
			l.supplied(d)
			return
		}
	}
	for _, f := range d.Libraries() {
		if slices.ContainsFunc(l.libs[path.Base(f.Path)], func(o *OwnedLib) bool { return o.Present }) {
			continue // an installed distribution has it: that one counts
		}
		p := ""
		if site != "" {
			p = filepath.Join(site, filepath.FromSlash(f.Path))
		}
		l.own(path.Base(f.Path), p, d.Name, d.Version, p != "" && fileExists(p))
	}
}

// isSharedLibrary tells a library a catalog may provide from the other
// files of a wheel; Python's own extension modules are not among them.
func isSharedLibrary(name string) bool {
	if !strings.Contains(name, ".so") || isExtensionModule(name) {
		return false
	}
	return strings.HasSuffix(name, ".so") || strings.Contains(name, ".so.")
}

// Owner is the distribution file for a library name, preferring a present
// one; nil when no required distribution lists it.
func (l *Layout) Owner(name string) *OwnedLib {
	if l == nil {
		return nil
	}
	libs := l.libs[name]
	for _, o := range libs {
		if o.Present {
			return o
		}
	}
	if len(libs) > 0 {
		return libs[0]
	}
	return nil
}

// OwnerOfDir names the distribution whose RECORD puts libraries in dir
// (a host path), or "".
func (l *Layout) OwnerOfDir(dir string) string {
	if l == nil {
		return ""
	}
	return l.dirs[physical(dir)]
}

// MissingLibraries are the owned libraries that are not on disk, by name.
func (l *Layout) MissingLibraries() []*OwnedLib {
	if l == nil {
		return nil
	}
	var out []*OwnedLib
	for _, libs := range l.libs {
		if o := l.Owner(libs[0].Name); o != nil && !o.Present {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Incomplete lists, by name and version, the distributions with files
// missing: "nvidia-cudnn-cu13 9.19.0.56 is installed but 8 of its 40 files
// are missing".
func (l *Layout) Incomplete() []string {
	if l == nil {
		return nil
	}
	var out []string
	for _, d := range l.Dists {
		if len(d.Missing) > 0 {
			out = append(out, fmt.Sprintf("%s %s is installed but %d of its %d files %s missing (%s)", d.Name, d.Version, len(d.Missing), d.Files, plural.Of(len(d.Missing), "is", "are"), pyenv.NameFiles(d.Missing)))
		}
	}
	return out
}

var reCUDASuffix = regexp.MustCompile(`-cu([0-9]+)$`)

// CUDAMajor is the CUDA major the required NVIDIA wheels are built for, by
// their names (nvidia-cudnn-cu13), or 0 when they do not say or disagree.
func (l *Layout) CUDAMajor() int {
	if l == nil {
		return 0
	}
	major := 0
	for _, d := range l.Dists {
		m := reCUDASuffix.FindStringSubmatch(pymeta.NormalizeName(d.Name))
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if major != 0 && n != major {
			return 0
		}
		major = n
	}
	return major
}

// Shadow is a library that a required distribution owns but the loader
// takes from elsewhere.
type Shadow struct {
	Soname string `json:"soname"`
	// Found is the file the loader takes, and how it got there.
	Found        string   `json:"found"`
	FoundVersion string   `json:"found_version,omitempty"` // from its real file name: libcudnn.so.9.14.0 → 9.14.0
	Via          ldso.Via `json:"via"`
	From         string   `json:"from,omitempty"`
	NeededBy     []string `json:"needed_by"`
	// Exact is set when Found's file name says it is exactly the release
	// the owner must come at: no wrong copy, though not the package's own.
	Exact bool `json:"exact,omitempty"`
	// MajorUnknown is set when builds for several CUDA majors share the
	// soname at that release (cuDNN 9.19.0 is built for CUDA 12 and 13,
	// both libcudnn.so.9): the name says the release but not the build,
	// so an exact release is not the package's build for certain.
	MajorUnknown bool `json:"cuda_major_unknown,omitempty"`
	// Conda is the conda environment whose package holds Found (it has a
	// conda-meta directory), "" when none does: conda's CUDA packages
	// (cuda-cudart, libcublas, cudnn) are a common source of other copies.
	Conda string `json:"conda_env,omitempty"`
	// Owner is the copy the package was built for.
	Owner *OwnedLib `json:"owner"`
	// Fixable is set when restoring the owned copy makes the loader find
	// it first; Remedy says what to do otherwise.
	Fixable bool   `json:"fixable"`
	Remedy  string `json:"remedy,omitempty"`
}

// SameBuild says the copy found is, by its name and the catalog, the very
// build the owner carries: exactly its release, of a soname that builds for
// other CUDA majors do not share at that release. It is then no wrong copy.
func (s *Shadow) SameBuild() bool { return s.Exact && !s.MajorUnknown }

func (s *Shadow) String() string {
	found := s.Found
	if s.FoundVersion != "" {
		found += " (" + s.FoundVersion + ")"
	}
	if s.Exact && s.MajorUnknown {
		found += ", the required release by its name, but builds for several CUDA majors share this soname at that release"
	}
	if s.Conda != "" {
		found += ", a CUDA package of the conda environment " + s.Conda
	}
	state := "present"
	if !s.Owner.Present {
		state = "missing"
	}
	return fmt.Sprintf("%s: the loader takes %s via %s; %s owns %s (%s)", s.Soname, found, s.Via, s.Owner.Describe(), s.Owner.Path, state)
}

// Shadows lists every library in the scan's closures, or opened at run
// time by soname, that a required distribution owns but the loader finds
// elsewhere.
func (l *Layout) Shadows(rep *scan.Report) []Shadow {
	if l == nil {
		return nil
	}
	set := &shadowSet{l: l, byName: map[string]*Shadow{}, owned: map[[2]string]bool{}}
	for _, root := range rep.Roots {
		if root.Result == nil {
			continue
		}
		for _, o := range root.Result.Objects {
			if !o.Found() || o.HostPath == "" || o.Via == ldso.ViaMain || o.Via == ldso.ViaDlopen {
				continue
			}
			sh := set.add(path0(o), o.HostPath, o.Via, o.From, func() (bool, string) { return fixable(root.Result, o) })
			if sh == nil {
				continue
			}
			for _, by := range root.Result.NeededBy(o) {
				sh.NeededBy = uniq.Append(sh.NeededBy, by.Path)
			}
		}
		set.opened(root)
	}
	res := make([]Shadow, 0, len(set.out))
	for _, s := range set.out {
		res = append(res, *s)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Soname < res[j].Soname })
	return res
}

// shadowSet gathers one scan's shadows, a library once whatever roots
// load it.
type shadowSet struct {
	l      *Layout
	byName map[string]*Shadow
	out    []*Shadow
	// owned memoizes whether a file is its owner's own, by name and host
	// path: the roots of a target share most of their objects, and
	// resolving links costs system calls per component.
	owned map[[2]string]bool
}

// add is the shadow of the library name that the loader finds at host by
// via (from names the search entry), new or met before, or nil when a
// required distribution owns no such library or host is its own copy. fix
// says, for a new one, whether placement can win and the remedy if not.
func (set *shadowSet) add(name, host string, via ldso.Via, from string, fix func() (bool, string)) *Shadow {
	owner := set.l.Owner(name)
	if owner == nil {
		return nil
	}
	k := [2]string{name, host}
	own, ok := set.owned[k]
	if !ok {
		own = samePath(owner.Path, host)
		set.owned[k] = own
	}
	if own {
		return nil
	}
	if sh, ok := set.byName[name]; ok {
		return sh
	}
	sh := &Shadow{Soname: name, Found: host, FoundVersion: fileVersion(host, name), Conda: condaEnv(host),
		Via: via, From: from, Owner: owner, NeededBy: []string{}}
	sh.Fixable, sh.Remedy = fix()
	sh.Exact = sh.FoundVersion != "" && sameRelease(sh.FoundVersion, owner.Version)
	sh.MajorUnknown = sh.Exact && set.l.majorUnknown(name, sh.FoundVersion)
	set.byName[name] = sh
	set.out = append(set.out, sh)
	return sh
}

// opened adds the libraries root's objects open at run time by the
// loader's own search (dlopen of a bare soname) that a required
// distribution owns and the search finds elsewhere: libcudnn.so.9 opens
// libcudnn_graph.so.9 and its other sub-libraries so, searching
// LD_LIBRARY_PATH before its own DT_RUNPATH, and an older cuDNN there
// fails torch's convolutions though every NEEDED entry is the package's
// own. Opens by the framework's own paths (site-packages, beside the
// opener) and of libraries already loaded are left out: the first are
// the package's layout, the others are judged as loaded.
func (set *shadowSet) opened(root *scan.Root) {
	for _, ro := range root.RuntimeOpens {
		via := ldso.Via(ro.How)
		switch via {
		case ldso.ViaRPath, ldso.ViaRunPath, ldso.ViaLDLibraryPath, ldso.ViaCache, ldso.ViaDefault:
		default:
			continue
		}
		if ro.Path == nil || ro.Host == "" || ro.Driver {
			continue
		}
		name := path.Base(ro.Soname)
		sh := set.add(name, ro.Host, via, ro.From, func() (bool, string) { return openFixable(root.Result, ro.Opener, ro.Host, via) })
		if sh != nil {
			sh.NeededBy = uniq.Append(sh.NeededBy, ro.Opener)
		}
	}
}

// openFixable is fixable for a library opened at run time by the object
// at opener (its path as the loader sees it), found at host by via.
func openFixable(r *ldso.Result, opener, host string, via ldso.Via) (bool, string) {
	switch via {
	case ldso.ViaCache, ldso.ViaDefault:
		return true, ""
	case ldso.ViaLDLibraryPath:
		if r != nil {
			for _, o := range r.Objects {
				if o.Path == opener && o.Info != nil && o.Info.HasRPath && !o.Info.HasRunPath {
					return true, ""
				}
			}
		}
		// No soname in the remedy: the libraries of one directory share it.
		return false, fmt.Sprintf("dlopen searches LD_LIBRARY_PATH before the RUNPATH of the library that opens it at run time: remove %s from LD_LIBRARY_PATH", filepath.Dir(host))
	}
	return false, fmt.Sprintf("the library that opens it at run time searches %s first: remove or rename the copy there, or put the owned copy's directory first on LD_LIBRARY_PATH", filepath.Dir(host))
}

// majorUnknown says whether a copy of soname at version could be a build
// for another CUDA major than the package's: when the catalog knows builds
// of it at that release for more than one, or knows none (nothing to tell
// by). Without a catalog (a layout made for reading) nothing is told.
func (l *Layout) majorUnknown(soname, version string) bool {
	if l.majors == nil {
		return true
	}
	return len(l.majors(soname, version)) != 1
}

// cudaMajorsOf are the CUDA majors of c's archives that provide soname at
// the release version (all its releases when c has none at that one): one
// for libnvJitLink.so.13 or libcufile.so.0 at 1.15.1.6, two for
// libcudnn.so.9 at 9.19.0. 0 (an archive not tied to CUDA) is left out.
func cudaMajorsOf(c *catalog.Catalog, soname, version string) []int {
	var at, all []int
	for _, comp := range c.Components() {
		for _, r := range comp.Releases {
			for _, a := range r.Archives {
				if !slices.Contains(a.Sonames, soname) {
					continue
				}
				m := a.CUDAMajor(r)
				if m == 0 {
					continue
				}
				all = uniq.Append(all, m)
				if sameRelease(version, r.Version) {
					at = uniq.Append(at, m)
				}
			}
		}
	}
	if len(at) > 0 {
		return at
	}
	return all
}

// useCatalog lets the layout tell builds for different CUDA majors apart
// by c (majorUnknown).
func (l *Layout) useCatalog(c *catalog.Catalog) {
	if l != nil && c != nil {
		l.majors = func(soname, version string) []int { return cudaMajorsOf(c, soname, version) }
	}
}

// path0 is the name an object was requested by, without directories.
func path0(o *ldso.Object) string { return filepath.Base(o.Name) }

func samePath(a, b string) bool { return physical(a) == physical(b) }

var reVersionTail = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)

// fileVersion reads a library's version from its real file name, after
// links: libcudnn.so.9 → libcudnn.so.9.14.0 gives 9.14.0. Wheels name the
// file by its soname, which says only the major: "" then.
func fileVersion(p, soname string) string {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	base := filepath.Base(real)
	stem, _, ok := strings.Cut(soname, ".so")
	if !ok || !strings.HasPrefix(base, stem+".so.") {
		return ""
	}
	v := strings.TrimPrefix(base, stem+".so.")
	if !reVersionTail.MatchString(v) || v == strings.TrimPrefix(soname, stem+".so.") {
		return ""
	}
	return v
}

// fixable predicts whether restoring the owned copy makes the loader take
// it, from the way the other copy was found. The package's own objects
// reach the owned directories through RPATH or RUNPATH; those come before
// the cache and the default directories, and RPATH (not RUNPATH) before
// LD_LIBRARY_PATH. The next round's scan checks the prediction.
func fixable(r *ldso.Result, o *ldso.Object) (bool, string) {
	switch o.Via {
	case ldso.ViaCache, ldso.ViaDefault:
		return true, ""
	case ldso.ViaLDLibraryPath:
		for _, by := range r.NeededBy(o) {
			if by.Info != nil && by.Info.HasRPath && !by.Info.HasRunPath {
				return true, ""
			}
		}
		return false, fmt.Sprintf("LD_LIBRARY_PATH is searched before the RUNPATH of the objects that need it: remove %s from LD_LIBRARY_PATH", filepath.Dir(o.HostPath))
	case ldso.ViaLoaded, ldso.ViaPreload:
		return false, fmt.Sprintf("%s is loaded before the package asks for it (%s): remove it from the preload list", o.HostPath, o.Via)
	}
	return false, fmt.Sprintf("the objects that need %s search %s first: remove or rename it, or put the owned copy's directory first on LD_LIBRARY_PATH", path0(o), filepath.Dir(o.HostPath))
}

// condaEnv is the conda environment a library file lies in: the nearest
// directory above it with a conda-meta directory, within a few levels
// (ENV/lib/libcudart.so.13, ENV/targets/x86_64-linux/lib/...); "" when none.
func condaEnv(file string) string {
	dir := filepath.Dir(file)
	for i := 0; i < 4 && dir != "/" && dir != "."; i++ {
		if st, err := os.Stat(filepath.Join(dir, "conda-meta")); err == nil && st.IsDir() {
			return dir
		}
		dir = filepath.Dir(dir)
	}
	return ""
}
