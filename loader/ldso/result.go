package ldso

import (
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// Via says how the loader found an object.
type Via string

// The ways an object comes to be loaded, in the loader's terms.
const (
	ViaMain          Via = "main"            // the object being examined
	ViaDlopen        Via = "dlopen"          // opened by path into a running process
	ViaPreload       Via = "preload"         // LD_PRELOAD or /etc/ld.so.preload
	ViaInterpreter   Via = "interpreter"     // the dynamic loader itself
	ViaLoaded        Via = "loaded"          // counted as already loaded by the caller
	ViaPath          Via = "path"            // the needed name contains a slash
	ViaRPath         Via = "rpath"           // DT_RPATH of the needing object or an ancestor
	ViaLDLibraryPath Via = "ld_library_path" // LD_LIBRARY_PATH
	ViaRunPath       Via = "runpath"         // DT_RUNPATH of the needing object
	ViaCache         Via = "cache"           // /etc/ld.so.cache
	ViaDefault       Via = "default"         // the default directories
	ViaNotFound      Via = "not_found"
)

// Object is one entry of the loader's list of loaded objects.
type Object struct {
	// What mapping the object found and fixed: shared by the copies a
	// fork makes, which copy only what loading more objects changes.
	*mapped
	// names are the names it answered to (NEEDED strings, its soname) in
	// the process that loaded it; read them through Result.Names or
	// Process.Names, which add what a fork added.
	names []string
	// Source is the object whose DT_RPATH or DT_RUNPATH found it.
	Source *Object
	// Loader is the object whose NEEDED entry first brought it in.
	Loader *Object
	// neededBy lists the objects whose NEEDED entries it satisfied, in
	// order, in the process that loaded it; read them through
	// Result.NeededBy or Process.NeededBy, which add what a fork added.
	neededBy []*Object
	// Deps are the objects that answered its NEEDED entries, in order.
	Deps []*Object

	depsDone bool
	// pos is its place in its process's list of objects (Process.add):
	// what a fork's link looks the copy up by.
	pos      int32
	lrpath   *pathList // cached DT_RPATH search list
	lrunpath *pathList // cached DT_RUNPATH search list
}

// mapped is what the loader found of an object when it mapped it: set as
// the object is made, before any fork can share it, and never written
// after.
type mapped struct {
	// Name is the name it was first requested by: a NEEDED string, or the
	// path for main, preloaded and dlopen'ed objects.
	Name string
	// Path is where the loader opened it, as the loader sees it; empty when
	// it was not found.
	Path string
	// HostPath is the same file on this machine (differs under a root).
	HostPath string
	Via      Via
	// From names the search list that found it ("RPATH of
	// /site-packages/torch/lib/libtorch_cuda.so", "LD_LIBRARY_PATH",
	// "/etc/ld.so.cache", "system search path").
	From string
	// Entry is the entry of that list, as written ("$ORIGIN/../lib").
	Entry string
	Info  *elfscan.Info
	// Problem explains a miss beyond "no such file": candidates rejected for
	// their class or machine, or a file the loader refuses.
	Problem string
	// Fatal is set when the loader would stop here instead of going on: a
	// file on the search path that is not a loadable object.
	Fatal bool
	// Searched are, for a name not found, the directories the loader
	// searched besides its cache and default directories (RPATH, LD_LIBRARY_PATH,
	// RUNPATH entries, in order): where a library could be placed for the
	// loader to find it.
	Searched []SearchDir

	id     fileID
	stamp  factcache.Stamp
	lname  string // the name ld.so matches requests against (l_name)
	faked  bool
	isMain bool // the main program: answers to its DT_SONAME alone
	origin string
}

// NotFound is a request for name, made by opener, that found nothing: a
// miss reported outside the loader's own list (a run-time open).
func NotFound(name string, opener *Object) *Object {
	return &Object{mapped: &mapped{Name: name, Via: ViaNotFound, faked: true}, names: []string{name}, Loader: opener, neededBy: []*Object{opener}}
}

// Found reports whether the loader found the object.
func (o *Object) Found() bool { return !o.faked }

// Stamp is what stat said of the object's file when the loader read it;
// zero when it has none (not found, or a member of a mounted wheel).
func (o *Object) Stamp() factcache.Stamp { return o.stamp }

// SearchDir is one directory of a search list, as the loader expands it.
type SearchDir struct {
	Via    Via    `json:"via"`
	Source string `json:"source"` // "RPATH of X", "LD_LIBRARY_PATH", "RUNPATH of X"
	Entry  string `json:"entry"`  // as written
	Dir    string `json:"dir"`    // expanded, as the loader sees it; "" is the working directory
}

// Miss is a name the loader could not find, with everything that needed it.
type Miss struct {
	Name     string
	NeededBy []*Object
	// Requests are the individual failed searches: who needed the name and
	// which directories were searched for it.
	Requests []*Object
	// Problem explains a miss beyond "no such file" (wrong class, invalid).
	Problem string
	Fatal   bool
}

// VersionError is a symbol version that a provider does not define.
type VersionError struct {
	Object   *Object // the object requiring the version
	File     string  // the vn_file name it requires it from
	Provider *Object // the object that answered to File
	Version  string
	Weak     bool // ld.so only warns for weak versions
}

// Result is the outcome of loading one object and all it needs.
type Result struct {
	Main *Object
	// Objects are every object of the process in load order: preloads, the
	// interpreter where first needed, dependencies breadth-first. Names not
	// found are entries with Found() false, as `ldd` prints them.
	Objects       []*Object
	Missing       []Miss
	VersionErrors []VersionError
	// Warnings are what ld.so prints but survives: a preload that cannot be
	// loaded, a provider without version information.
	Warnings []string
	Arch     *ArchConfig
	// Searched are the directories (RPATH, LD_LIBRARY_PATH, RUNPATH) a name
	// that Main itself requests would be searched in: where a library Main
	// dlopen's by name could be placed.
	Searched []SearchDir

	// adds are what the process added to objects it shares with the one
	// it was forked from (nil once detached).
	adds *additions
}

// Names are all the names o answered to (NEEDED strings, its soname).
func (r *Result) Names(o *Object) []string { return r.adds.namesOf(o) }

// NeededBy lists every object whose NEEDED entry o satisfied, in order.
func (r *Result) NeededBy(o *Object) []*Object { return r.adds.neededByOf(o) }

// OK reports a closure the loader would load without error.
func (r *Result) OK() bool {
	if len(r.Missing) > 0 {
		return false
	}
	for _, v := range r.VersionErrors {
		if !v.Weak {
			return false
		}
	}
	return true
}
