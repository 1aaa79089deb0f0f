package ldso

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// Process is the loader's list of loaded objects for one program: the main
// object, its preloads and everything loaded since. It is not safe for
// concurrent use; the Loader behind it is.
type Process struct {
	l         *Loader
	arch      *ArchConfig
	archKey   string
	cacheArch cacheArch
	hwprio    map[string]int
	subdirs   []string
	want      expect
	sysdirs   *pathList
	llp       *pathList

	main *Object
	rtld *Object
	objs []*Object // the link map list in order, misses included
	res  *Result

	// shared is how many objects at the start of objs are those of the
	// process this one was forked from, left unchanged; adds are what this
	// process added to them (see Fork).
	shared int
	adds   *additions
	// forked is set once p is forked: p must then load nothing more.
	forked atomic.Bool
}

// MainMode says how the main object came to run.
type MainMode int

const (
	// AsListed is `ld.so --list FILE`: $ORIGIN of the main object is the
	// directory of FILE as given.
	AsListed MainMode = iota
	// AsExecuted is a program started by the kernel: ld.so takes $ORIGIN of
	// the main program from /proc/self/exe, i.e. its real path.
	AsExecuted
)

// ErrStaticallyLinked is returned by Start for a main program without a
// dynamic section: nothing is loaded for it, so it has no link map.
var ErrStaticallyLinked = errors.New("statically linked")

// Closure loads the object at path as `ld.so --list path` would and returns
// every object in load order, the misses and the version errors.
func (l *Loader) Closure(ctx context.Context, file string) (*Result, error) {
	p, err := l.Start(ctx, file, AsListed)
	if err != nil {
		return nil, err
	}
	return p.Result(), nil
}

// Start creates a process whose main program is file: the program, its
// preloads and its dependencies are loaded.
func (l *Loader) Start(ctx context.Context, file string, mode MainMode) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	guest, host := l.locate(file)
	fi := l.open(host)
	if fi.err != nil {
		return nil, mainError(file, fi.err)
	}
	in := fi.info
	if !in.Dynamic {
		return nil, fmt.Errorf("%s: not a dynamic object (no PT_DYNAMIC): %w", file, ErrStaticallyLinked)
	}
	if in.Type != 3 && in.Type != 2 { // ET_DYN, ET_EXEC
		return nil, fmt.Errorf("%s: %s cannot be loaded (only shared objects and executables)", file, in.Type)
	}
	p := l.newProcess(ctx, in)
	// ld.so empties the main map's name (dl_main in elf/rtld.c) and never
	// records its file identity, so the main object answers to its
	// DT_SONAME alone: a preload or NEEDED entry naming its file by path
	// loads a second copy.
	main := &Object{mapped: &mapped{Name: guest, Path: guest, HostPath: host, Via: ViaMain, Info: in, id: fi.id, stamp: fi.stamp, isMain: true}}
	main.origin = originOf(guest)
	if mode == AsExecuted {
		if real, ok := l.fs.realPath(host); ok {
			main.origin = l.fs.guestPath(filepath.Dir(real))
		}
	}
	p.main = main
	p.add(main)
	p.res.Main = main
	p.res.Objects = nil

	if l.hasLLP {
		p.llp = l.newPathList(ViaLDLibraryPath, "LD_LIBRARY_PATH", decompose(l.llp, ":;", main.origin, p.arch))
	}
	p.startInterpreter(in)
	if l.fs.root == "" && hostMachine() != elf.EM_NONE && in.Machine != hostMachine() {
		p.res.Warnings = append(p.res.Warnings, fmt.Sprintf(
			"objects built for %s are examined on this %s host without --root: the system libraries they need are looked for among this host's, which cannot serve them; pass --root with a system tree for %s",
			machineName(in.Machine), machineName(hostMachine()), machineName(in.Machine)))
	}

	// Preloads are searched as if main needed them; a failure is a warning.
	var start = []*Object{main}
	for _, src := range []struct {
		names []string
		what  string
	}{{l.preload, "LD_PRELOAD"}, {l.preloadFile(), "/etc/ld.so.preload"}} {
		for _, name := range src.names {
			before := len(p.objs)
			o := p.mapObject(name, main, nil, true)
			if o == nil {
				p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("object '%s' from %s cannot be preloaded (cannot open shared object file): ignored", name, src.what))
				continue
			}
			if len(p.objs) > before {
				o.Via = ViaPreload
				o.From = src.what
			}
			start = append(start, o)
		}
	}
	p.loadDeps(start)
	p.checkVersions(p.objs)
	p.listLoader()
	return p, nil
}

// listLoader adds the dynamic loader to the list of loaded objects where
// glibc always lists it: from 2.41 on, ld.so is on the list whether or not
// anything needs it (elf/rtld.c, "rtld_multiple_ref is always true");
// before, only when some object needs it (libc.so.6 does).
func (p *Process) listLoader() {
	v := p.arch.GlibcVersion
	if p.rtld == nil || p.rtld == p.main || v == "" || dotted.Less(v, "2.41") || p.contains(p.rtld) {
		return
	}
	p.add(p.rtld)
}

// originOf is the directory of an object as ld.so records it (l_origin):
// the name the object was opened under, up to its last slash, not cleaned.
// "/sp/h5py/../h5py.libs/libhdf5.so" has the origin "/sp/h5py/../h5py.libs",
// and its $ORIGIN paths print that way in ld.so's trace.
func originOf(name string) string {
	i := strings.LastIndexByte(name, '/')
	switch {
	case i < 0:
		return "."
	case i == 0:
		return "/"
	}
	return name[:i]
}

func mainError(file string, err error) error {
	var fe *elfscan.FormatError
	switch {
	case errors.Is(err, elfscan.ErrNotELF):
		return fmt.Errorf("%s: not an ELF file", file)
	case errors.As(err, &fe):
		return fmt.Errorf("%s: %s", file, fe.Msg)
	}
	return err
}

// newProcess prepares an empty process for objects like in.
func (l *Loader) newProcess(ctx context.Context, in *elfscan.Info) *Process {
	arch := l.Arch(ctx, in.Machine, in.Class, in.Flags)
	b := l.bases.Get(processKind{arch, in.Machine, in.Class, in.Data, in.Flags}, func() *processBase {
		b := &processBase{
			archKey:   fmt.Sprintf("%d/%d/%d", in.Machine, in.Class, in.Data),
			cacheArch: cacheArchFor(in.Machine, in.Class, in.Flags),
			subdirs:   arch.subdirs(),
			hwprio:    map[string]int{},
		}
		for i, h := range arch.HWCaps {
			b.hwprio[h] = i + 1
		}
		var sys []searchDir
		for _, d := range arch.SystemDirs {
			sys = append(sys, searchDir{entry: strings.TrimSuffix(d, "/"), dir: d})
		}
		b.sysdirs = &pathList{via: ViaDefault, source: "system search path", dirs: sys, id: l.listID(listKey(ViaDefault, sys))}
		return b
	})
	return &Process{
		l:         l,
		arch:      arch,
		archKey:   b.archKey,
		cacheArch: b.cacheArch,
		subdirs:   b.subdirs,
		want:      expect{class: in.Class, data: in.Data, machine: in.Machine},
		hwprio:    b.hwprio,
		sysdirs:   b.sysdirs,
		res:       &Result{Arch: arch},
	}
}

// processKind is what the start of a process depends on.
type processKind struct {
	arch  *ArchConfig
	m     elf.Machine
	c     elf.Class
	d     elf.Data
	flags uint32
}

// processBase is how every process for one kind of object starts, made
// once per loader (a scan starts thousands) and never changed after: its
// processes, like the forks of one, share it.
type processBase struct {
	archKey   string
	cacheArch cacheArch
	subdirs   []string
	hwprio    map[string]int
	sysdirs   *pathList
}

// StartEmpty creates a process whose main program has no dependencies and
// no search paths of its own, for objects like the one at like (a plain
// program of that class and machine): the context in which a library is
// dlopen'ed by a program that adds nothing to the search.
func (l *Loader) StartEmpty(ctx context.Context, like *elfscan.Info) *Process {
	p := l.newProcess(ctx, like)
	in := &elfscan.Info{Class: like.Class, Data: like.Data, Machine: like.Machine, Flags: like.Flags, Type: elf.ET_EXEC, Dynamic: true}
	main := &Object{mapped: &mapped{Name: "(program)", Via: ViaMain, Info: in, isMain: true}}
	p.main = main
	p.add(main)
	p.res.Main = main
	if l.hasLLP {
		p.llp = l.newPathList(ViaLDLibraryPath, "LD_LIBRARY_PATH", decompose(l.llp, ":;", "", p.arch))
	}
	p.startInterpreter(in)
	var start = []*Object{main}
	for _, name := range append(append([]string(nil), l.preload...), l.preloadFile()...) {
		before := len(p.objs)
		o := p.mapObject(name, main, nil, true)
		if o == nil {
			continue
		}
		if len(p.objs) > before {
			o.Via = ViaPreload
		}
		start = append(start, o)
	}
	p.loadDeps(start)
	return p
}

// startInterpreter registers the dynamic loader itself: it is loaded before
// anything else and answers to its PT_INTERP path and its soname.
func (p *Process) startInterpreter(main *elfscan.Info) {
	interp := main.Interp
	if interp == "" {
		interp = p.arch.Interp
	}
	if interp == "" {
		return
	}
	rt := &Object{mapped: &mapped{Name: interp, Path: interp, Via: ViaInterpreter, From: "PT_INTERP", lname: interp}, names: []string{interp}}
	if host, ok := p.l.fs.resolve(interp); ok {
		fi := p.l.open(host)
		if fi.err == nil {
			rt.HostPath, rt.Info, rt.id, rt.stamp = host, fi.info, fi.id, fi.stamp
		}
	}
	if rt.Info == nil {
		// Without the file we still know its usual soname.
		rt.Info = &elfscan.Info{Soname: path.Base(interp)}
	}
	if rt.id != (fileID{}) && rt.id == p.main.id {
		p.rtld = p.main
		return
	}
	p.rtld = rt
}

// lookupLoaded is _dl_lookup_map: an object answers to the name it was
// opened under, every name it was requested by, and its DT_SONAME.
func (p *Process) lookupLoaded(name string) *Object {
	added := p.adds.answering(name)
	for _, o := range p.objs {
		if p.answers(o, name, added) {
			return o
		}
	}
	// The loader answers even before it is listed (when it is listed, the
	// loop above met it first).
	if p.rtld != nil && p.answers(p.rtld, name, added) {
		return p.rtld
	}
	return nil
}

// answers reports whether a loaded object answers to name (added is the
// shared object a fork made answer to it), recording the name when it
// answers by its soname.
func (p *Process) answers(o *Object, name string, added *Object) bool {
	if o.faked {
		return false
	}
	if o.matches(name) || o == added {
		return true
	}
	if o.Info != nil && o.Info.Soname == name {
		p.addName(o, name)
		return true
	}
	return false
}

// matches reports whether o answers to name by the name it was opened
// under or the names it was given where it was loaded; a fork's shared
// objects also answer to the names the fork added (additions.answering).
func (o *Object) matches(name string) bool {
	return o.lname != "" && o.lname == name || slices.Contains(o.names, name)
}

func (p *Process) contains(o *Object) bool {
	i := int(o.pos)
	return i < len(p.objs) && p.objs[i] == o
}

// add appends o to the process's objects and records its place there,
// which a fork's copies keep.
func (p *Process) add(o *Object) {
	o.pos = int32(len(p.objs))
	p.objs = append(p.objs, o)
}

// mapObject is _dl_map_object: name is already loaded, or is searched for
// (or opened, when it has a slash) and loaded. A miss becomes a faked entry,
// as in ld.so's trace mode, unless noFake (preloads) is set.
func (p *Process) mapObject(name string, loader *Object, t *tracer, noFake bool) *Object {
	if o := p.lookupLoaded(name); o != nil {
		if o == p.rtld && !p.contains(o) {
			p.add(o)
		}
		return o
	}
	var f found
	if strings.Contains(name, "/") {
		f = p.openPath(name, t)
	} else {
		f = p.search(name, loader, t)
	}
	if !f.ok {
		if noFake {
			return nil
		}
		o := &Object{mapped: &mapped{Name: name, Via: ViaNotFound, Problem: f.problem, Fatal: f.fatal, faked: true}, names: []string{name}, Loader: loader}
		if !strings.Contains(name, "/") {
			o.Searched = p.searchedDirs(loader)
		}
		p.add(o)
		return o
	}
	// The same file under another name is the same object: ld.so compares
	// device and inode after opening, but only with the objects it opened
	// itself (_dl_map_object_from_fd): neither the main program nor ld.so
	// carries a file identity, so their files load again.
	if f.fi.id != (fileID{}) {
		for _, o := range p.objs {
			if !o.faked && !o.isMain && o != p.rtld && o.id == f.fi.id {
				p.addName(o, name)
				return o
			}
		}
	}
	// The object, what its forks share of it, its first name and first
	// opener, in one allocation: a scan maps tens of thousands.
	n := &struct {
		o        Object
		m        mapped
		names    [1]string
		neededBy [1]*Object
	}{}
	n.m = mapped{
		Name: name, Path: f.guest, HostPath: f.host, Via: f.via, From: f.from, Entry: f.entry,
		Info: f.fi.info, id: f.fi.id, stamp: f.fi.stamp, origin: originOf(f.guest), lname: f.guest,
	}
	n.names[0] = name
	n.o = Object{mapped: &n.m, names: n.names[:1:1], neededBy: n.neededBy[:0:1], Source: f.owner, Loader: loader}
	o := &n.o
	if f.via == ViaPath && !path.IsAbs(f.guest) {
		o.origin = originOf(absolute(f.guest))
	}
	// What _dl_map_object_from_fd refuses once the file is open: the loader
	// stops there, so the name counts as not loaded.
	problem := ""
	switch in := f.fi.info; {
	case in.Type == elf.ET_EXEC:
		problem = "cannot dynamically load executable"
	case !in.Dynamic:
		problem = "object file has no dynamic section"
	case in.Flags1&elf.DF_1_PIE != 0:
		problem = "cannot dynamically load position-independent executable"
	}
	if problem != "" {
		// ld.so names the object as it was requested here.
		miss := &Object{mapped: &mapped{Name: name, Via: ViaNotFound, Problem: name + ": " + problem + " (" + f.guest + ")", Fatal: true, faked: true}, names: []string{name}, Loader: loader}
		p.add(miss)
		return miss
	}
	p.add(o)
	return o
}

// loadDeps is _dl_map_object_deps: breadth-first over the NEEDED entries of
// the start objects and of everything they bring in.
func (p *Process) loadDeps(start []*Object) {
	queued := map[*Object]bool{}
	queue := make([]*Object, 0, len(start)+16)
	for _, o := range start {
		if !queued[o] {
			queued[o] = true
			queue = append(queue, o)
		}
	}
	for i := 0; i < len(queue); i++ {
		o := queue[i]
		// A shared object was done where it was loaded (see Fork).
		if o.faked || o.Info == nil || o.depsDone || p.isShared(o) {
			continue
		}
		o.depsDone = true
		if o.Deps == nil {
			o.Deps = make([]*Object, 0, len(o.Info.Needed))
		}
		for _, name := range o.Info.Needed {
			// Tokens in a NEEDED entry are expanded first; the expanded
			// string is the name the object is known by.
			if strings.Contains(name, "$") {
				if e, ok := expandDST(name, o.origin, p.arch); ok {
					name = e
				}
			}
			dep := p.mapObject(name, o, nil, false)
			p.addNeededBy(dep, o)
			o.Deps = append(o.Deps, dep)
			if !queued[dep] {
				queued[dep] = true
				queue = append(queue, dep)
			}
		}
	}
}

// checkVersions is _dl_check_map_versions for each object: every version an
// object needs from a file must be defined by the object that answers to
// that name; a provider without version definitions only draws a warning,
// and requirements on missing files are not checked.
func (p *Process) checkVersions(objs []*Object) {
	for _, o := range objs {
		if o.faked || o.Info == nil {
			continue
		}
		for _, vn := range o.Info.VersionNeeds {
			prov := p.findNeeded(vn.File)
			if prov == nil || prov.faked || prov.Info == nil {
				continue
			}
			if len(prov.Info.VersionDefs) == 0 {
				p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("%s: no version information available (required by %s)", prov.displayName(), o.displayName()))
				continue
			}
			for _, v := range vn.Versions {
				if !prov.Info.HasVersion(v.Name, v.Hash) {
					p.res.VersionErrors = append(p.res.VersionErrors, VersionError{Object: o, File: vn.File, Provider: prov, Version: v.Name, Weak: v.Weak()})
				}
			}
		}
	}
}

// findNeeded matches a vn_file name against the loaded objects by the names
// they were loaded under (not by soname, as in ld.so).
func (p *Process) findNeeded(name string) *Object {
	added := p.adds.answering(name)
	for _, o := range p.objs {
		if o.matches(name) || o == added {
			return o
		}
	}
	if p.rtld != nil && (p.rtld.matches(name) || p.rtld == added) {
		return p.rtld
	}
	return nil
}

// Dlopen opens the object at file into the running process as dlopen(3)
// with a path would (its load chain starts at itself; the main program's
// DT_RPATH still applies) and loads what it needs. It returns the object.
func (p *Process) Dlopen(ctx context.Context, file string) (*Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.forked.Load() {
		return nil, fmt.Errorf("%s: cannot be loaded into a process that was forked (load into a fork)", file)
	}
	guest, host := p.l.locate(file)
	before := len(p.objs)
	o := p.mapObject(guest, nil, nil, true)
	if o == nil {
		fi := p.l.open(host)
		if fi.err != nil {
			return nil, mainError(file, fi.err)
		}
		return nil, fmt.Errorf("%s: cannot be loaded into this process (%s %s)", file, fi.info.Class, machineName(fi.info.Machine))
	}
	if len(p.objs) > before {
		o.Via = ViaDlopen
	}
	p.loadDeps([]*Object{o})
	p.checkVersions(p.objs[before:])
	return o, nil
}

// Result summarises the process: its objects in load order, the misses
// grouped by name, the version errors.
func (p *Process) Result() *Result {
	r := p.res
	r.adds = p.adds
	if r.Searched == nil && p.main != nil {
		r.Searched = p.searchedDirs(p.main)
	}
	r.Objects = append([]*Object(nil), p.objs...)
	r.Missing = nil
	idx := map[string]int{}
	for _, o := range p.objs {
		if !o.faked {
			continue
		}
		i, ok := idx[o.Name]
		if !ok {
			idx[o.Name] = len(r.Missing)
			r.Missing = append(r.Missing, Miss{Name: o.Name, Problem: o.Problem, Fatal: o.Fatal})
			i = len(r.Missing) - 1
		}
		for _, by := range p.NeededBy(o) {
			r.Missing[i].NeededBy = uniq.Append(r.Missing[i].NeededBy, by)
		}
		r.Missing[i].Requests = append(r.Missing[i].Requests, o)
		if r.Missing[i].Problem == "" {
			r.Missing[i].Problem = o.Problem
		}
		r.Missing[i].Fatal = r.Missing[i].Fatal || o.Fatal
	}
	return r
}

// Main returns the main object.
func (p *Process) Main() *Object { return p.main }

// Search is the explanation of where the loader looks for one name.
type Search struct {
	Name string
	// From is the object that needs Name.
	From *Object
	// Found is what the search finds (nil when nothing).
	Found *Object
	// Loaded is the object that answers to Name in From's closure before any
	// search happens (its soname, or an earlier NEEDED), when there is one.
	Loaded *Object
	Steps  []Attempt
	// Problem explains rejections when nothing was found.
	Problem string
}

// Find explains where the loader looks for name when the object at from
// needs it, from being the main object as with `ld.so --list from`.
func (l *Loader) Find(ctx context.Context, name, from string) (*Search, error) {
	if from == "" {
		// A plain program of this host's kind, without paths of its own.
		p := l.StartEmpty(ctx, &elfscan.Info{Class: elf.ELFCLASS64, Data: elf.ELFDATA2LSB, Machine: hostMachine()})
		return p.Find(name, p.main), nil
	}
	p, err := l.Start(ctx, from, AsListed)
	if err != nil {
		return nil, err
	}
	return p.Find(name, p.main), nil
}

// Find explains the search for name as needed by the loaded object from.
func (p *Process) Find(name string, from *Object) *Search {
	s := &Search{Name: name, From: from}
	added := p.adds.answering(name)
	for _, o := range p.objs {
		if !o.faked && o != from && (o.matches(name) || o == added || o.Info != nil && o.Info.Soname == name) {
			s.Loaded = o
			break
		}
	}
	if s.Loaded == nil && p.rtld != nil && (p.rtld.matches(name) || p.rtld == added || p.rtld.Info != nil && p.rtld.Info.Soname == name) {
		s.Loaded = p.rtld
	}
	t := &tracer{}
	var f found
	if strings.Contains(name, "/") {
		exp := name
		if e, ok := expandDST(name, from.origin, p.arch); ok {
			exp = e
		}
		f = p.openPath(exp, t)
	} else {
		f = p.search(name, from, t)
	}
	s.Steps = t.steps
	s.Problem = f.problem
	if f.ok {
		s.Found = &Object{mapped: &mapped{Name: name, Path: f.guest, HostPath: f.host, Via: f.via, From: f.from, Entry: f.entry, Info: f.fi.info}, Source: f.owner, Loader: from}
	}
	return s
}

// Objects returns the process's objects in load order.
func (p *Process) Objects() []*Object { return append([]*Object(nil), p.objs...) }

// ObjectsFrom returns the process's objects from the i-th on, in load
// order: what was loaded since the caller saw i of them (objects are only
// ever added, at the end). The list is the process's own, clipped, to be
// read and not changed: a caller that follows what each load adds asks
// after every load.
func (p *Process) ObjectsFrom(i int) []*Object {
	if i >= len(p.objs) {
		return nil
	}
	return slices.Clip(p.objs[i:])
}

// Index is o's place among the process's objects (Objects), and whether it
// is one of them.
func (p *Process) Index(o *Object) (int, bool) {
	if p.contains(o) {
		return int(o.pos), true
	}
	return 0, false
}

// locate turns a path given by the caller into the loader's path and the
// file on this machine: a member of a mounted wheel, a file inside the root
// (seen without the root prefix), or any other file (reachable as itself).
func (l *Loader) locate(file string) (guest, host string) {
	if o, rel, isDir, ok := l.fs.lookupOverlay(file); ok && !isDir {
		return path.Clean(file), o.handle(rel)
	}
	host = absolute(file)
	l.fs.addTree(filepath.Dir(host))
	guest = l.fs.guestPath(host)
	if guest != host {
		// A file inside the root is opened through the root: an absolute
		// symlink on its way names a file of the root, not of this machine.
		if real, ok := l.fs.realPath(host); ok {
			host = real
		}
	}
	return guest, host
}

// OpenPath names the file of this machine that file (a path of this
// machine) opens: under a root, a path into the root has the links on its
// way, absolute ones too, resolved inside the root, as in a chroot;
// otherwise, or when nothing is there, file itself.
func (l *Loader) OpenPath(file string) string {
	host := absolute(file)
	if l.fs.guestPath(host) == host {
		return file
	}
	if real, ok := l.fs.realPath(host); ok {
		return real
	}
	return file
}

// Info reads the dynamic-linking facts of a file (or mounted wheel member)
// through the loader's cache.
func (l *Loader) Info(file string) (*elfscan.Info, error) {
	_, host := l.locate(file)
	fi := l.open(host)
	return fi.info, fi.err
}

// HostInfo is Info of a file of this machine named as it is (OpenPath's
// answer, say), through the loader's cache.
func (l *Loader) HostInfo(host string) (*elfscan.Info, error) {
	fi := l.open(host)
	return fi.info, fi.err
}

// searchedDirs lists the directories of the search lists a name needed by
// loader goes through (not the cache or the default directories).
func (p *Process) searchedDirs(loader *Object) []SearchDir {
	var out []SearchDir
	for _, pl := range p.searchLists(loader, nil) {
		for _, d := range pl.dirs {
			out = append(out, SearchDir{Via: pl.via, Source: pl.source, Entry: d.entry, Dir: d.dir})
		}
	}
	return out
}

// Reach is the part of the process that o brings in: o and everything its
// NEEDED entries reach, in load order, with the misses and version errors
// among them. It is the result of dlopen'ing o.
func (p *Process) Reach(o *Object) *Result {
	in := map[*Object]bool{o: true}
	queue := []*Object{o}
	for i := 0; i < len(queue); i++ {
		for _, d := range queue[i].Deps {
			if !in[d] {
				in[d] = true
				queue = append(queue, d)
			}
		}
	}
	r := &Result{Main: o, Arch: p.arch, Warnings: p.res.Warnings, Searched: p.searchedDirs(o), adds: p.adds}
	for _, x := range p.objs {
		if in[x] {
			r.Objects = append(r.Objects, x)
		}
	}
	if p.rtld != nil && in[p.rtld] && !p.contains(p.rtld) {
		r.Objects = append(r.Objects, p.rtld)
	}
	full := p.Result()
	for _, m := range full.Missing {
		var keep []*Object
		var reqs []*Object
		for _, req := range m.Requests {
			if in[req] {
				reqs = append(reqs, req)
				for _, by := range p.NeededBy(req) {
					keep = uniq.Append(keep, by)
				}
			}
		}
		if len(reqs) > 0 {
			m.NeededBy, m.Requests = keep, reqs
			r.Missing = append(r.Missing, m)
		}
	}
	for _, v := range full.VersionErrors {
		if in[v.Object] {
			r.VersionErrors = append(r.VersionErrors, v)
		}
	}
	return r
}
