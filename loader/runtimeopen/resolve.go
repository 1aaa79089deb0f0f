package runtimeopen

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cudadeps/cudadeps/internal/memo"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// How an open was satisfied, besides the loader's own ways (ldso.Via).
const (
	HowLoaded       = "loaded"        // already in the process under that name or soname
	HowSitePackages = "site-packages" // by path, in a directory the framework tries
	HowOrigin       = "origin"        // by path, beside the opener
)

// Open is one library opened at run time by an object of a process.
type Open struct {
	Opener *ldso.Object
	// Name is the name that was found, or the first one tried.
	Name string
	// Tried are the names tried, in order (alternatives).
	Tried    []string
	Evidence string
	Optional bool
	Driver   bool
	// Found is the object dlopen returns; nil when nothing is found.
	Found *ldso.Object
	// How is one of the How* constants or the ldso.Via that found it.
	How string
	// From names the search list or directory that found it.
	From string
	// Request is, for a miss, the not-found object that records who asked
	// and which directories were searched (ldso.Object.Searched).
	Request *ldso.Object
}

// Missing reports an open that fails where the program needs it to work.
func (o *Open) Missing() bool { return o.Found == nil && !o.Optional && !o.Driver }

// Resolver resolves the run-time opens of processes. It is safe for
// concurrent use and caches the notes it reads, so one should serve a scan.
type Resolver struct {
	table *Table
	l     *ldso.Loader
	sites Sites
	cache *resolverCache
}

type resolverCache struct {
	// Each file is read once, however many processes hold it at once
	// (every worker of a scan starts with the same system libraries).
	notes memo.Map[string, []elfscan.DlopenNote]
	// What the table says of each path, asked for every object of every
	// process.
	byPath memo.Map[string, pathEntries]
}

// pathEntries are Table.ForPath's answer.
type pathEntries struct {
	entries      []Entry
	sitePackages []string
}

// Sites are the site directories of one Python environment, as the
// frameworks' own loaders search them.
type Sites struct {
	// Dirs are the environment's site directories in sys.path order.
	Dirs []string
	// User is the user's site directory when the interpreter enables it
	// ("" otherwise); it is among Dirs once it exists.
	User string
}

// NewResolver prepares a resolver over a table for a loader's files.
func NewResolver(t *Table, l *ldso.Loader) *Resolver {
	if l != nil {
		l.ReadDlopenNotes() // each object's, in the same reading as its facts
	}
	return &Resolver{table: t, l: l, cache: &resolverCache{}}
}

// WithSites is r for the objects of a Python environment whose site
// directories are s: the entries that search more than the opener's own
// site-packages (Entry.Sites) search these. It shares r's caches. Without
// it, those entries search the opener's site-packages only.
func (r *Resolver) WithSites(s Sites) *Resolver {
	c := *r
	c.sites = s
	return &c
}

// Resolve performs, in p, the run-time opens of objs and of everything they
// bring in, in load order: first what frameworks open by path beside their
// libraries, then what each library opens (the table, then its
// .note.dlopen). Opened objects are loaded into p with what they need.
func (r *Resolver) Resolve(ctx context.Context, p *ldso.Process, objs []*ldso.Object) []Open {
	var out []Open
	done := map[string]bool{}
	do := func(opener *ldso.Object, item string, e Entry, sp string) {
		k := opener.Path + "\x00" + item
		if done[k] {
			return
		}
		done[k] = true
		out = append(out, r.open(p, opener, item, e, sp))
	}
	if !r.pathOpens(ctx, objs, do) {
		return out
	}
	// Sized for the whole process: a root's process holds about a
	// hundred objects. What is queued is marked by the object's place in
	// the process (a map of them was 2.5 MB of a scan's allocations).
	n := len(objs) + len(p.ObjectsFrom(0))
	queue := make([]*ldso.Object, 0, n)
	var queued processSet
	enqueue := func(x *ldso.Object) {
		if queued.add(p, x) {
			queue = append(queue, x)
		}
	}
	for _, o := range objs {
		enqueue(o)
	}
	seen := 0 // the process's objects already looked at
	enqueueNew := func() {
		fresh := p.ObjectsFrom(seen)
		seen += len(fresh)
		for _, x := range fresh {
			enqueue(x)
		}
	}
	enqueueNew() // what the framework opens above
	var names []string
	for i := 0; i < len(queue); i++ {
		if ctx.Err() != nil {
			break
		}
		o := queue[i]
		if !o.Found() || o.Info == nil {
			continue
		}
		names = append(append(names[:0], o.Info.Soname, path.Base(o.Path)), p.Names(o)...)
		for _, e := range r.table.ForSoname(names...) {
			for _, item := range e.Opens {
				do(o, item, e, "")
			}
		}
		for _, n := range r.readNotes(o.HostPath) {
			e := Entry{
				Optional: n.Priority != elfscan.PriorityRequired,
				Source:   noteEvidence(o.Path, n),
			}
			do(o, strings.Join(n.Sonames, "|"), e, "")
		}
		enqueueNew()
	}
	return out
}

// pathOpens does what frameworks open by path beside the libraries of
// objs; false when ctx ended first.
func (r *Resolver) pathOpens(ctx context.Context, objs []*ldso.Object, do func(opener *ldso.Object, item string, e Entry, sp string)) bool {
	for _, o := range objs {
		if ctx.Err() != nil {
			return false
		}
		if !o.Found() || o.Path == "" {
			continue
		}
		pe := r.cache.byPath.Get(o.Path, func() pathEntries {
			entries, sps := r.table.ForPath(o.Path)
			return pathEntries{entries, sps}
		})
		entries, sps := pe.entries, pe.sitePackages
		for i, e := range entries {
			if e.Fallback || (e.When != "" && !r.exists(path.Join(sps[i], e.When))) {
				continue // a fallback happens at import, not at run time
			}
			for _, item := range e.Opens {
				do(o, item, e, sps[i])
			}
		}
	}
	return true
}

// processSet is a set of objects, those of the process by their place in
// it, any other apart.
type processSet struct {
	in     []bool
	others map[*ldso.Object]bool
}

// add adds x, an object of p or not, and reports whether it was new.
func (s *processSet) add(p *ldso.Process, x *ldso.Object) bool {
	if i, ok := p.Index(x); ok {
		if i >= len(s.in) {
			s.in = append(s.in, make([]bool, i+1-len(s.in)+64)...)
		}
		if s.in[i] {
			return false
		}
		s.in[i] = true
		return true
	}
	if s.others[x] {
		return false
	}
	if s.others == nil {
		s.others = map[*ldso.Object]bool{}
	}
	s.others[x] = true
	return true
}

func noteEvidence(file string, n elfscan.DlopenNote) string {
	s := fmt.Sprintf("ELF .note.dlopen of %s (priority %s", file, n.Priority)
	if n.Feature != "" {
		s += ", feature " + n.Feature
	}
	if n.Description != "" {
		s += ": " + n.Description
	}
	return s + ")"
}

// open performs one opens item: each alternative in turn, first by path in
// the entry's directories, then (unless dirs_only) by dlopen's search.
func (r *Resolver) open(p *ldso.Process, opener *ldso.Object, item string, e Entry, sp string) Open {
	alts := Alternatives(item)
	res := Open{Opener: opener, Name: alts[0], Tried: alts, Evidence: e.Source, Optional: e.Optional, Driver: e.Driver}
	searched := r.searchDirs(opener.Path, e, sp)
	for _, name := range alts {
		for _, sd := range searched {
			file := r.match(sd.Dir, name)
			if file == "" {
				continue
			}
			obj, loaded := p.DlopenFrom(file, opener)
			if obj.Found() {
				res.Name, res.Found, res.How, res.From = name, obj, string(sd.Via), sd.Dir
				if loaded {
					res.How = HowLoaded
				}
				return res
			}
		}
		if e.DirsOnly || strings.ContainsAny(name, "*[") {
			continue
		}
		obj, loaded := p.DlopenFrom(name, opener)
		if obj.Found() {
			res.Name, res.Found, res.How, res.From = name, obj, string(obj.Via), obj.From
			if loaded {
				res.How, res.From = HowLoaded, ""
			}
			return res
		}
		if res.Request == nil {
			res.Request = obj
		}
	}
	if res.Request == nil {
		res.Request = ldso.NotFound(res.Name, opener)
	}
	// Where a library could be placed for this open to find it: the
	// framework's directories first. The request is this open's own (a
	// miss is a new object), so its facts may still be written.
	res.Request.Searched = append(searched, res.Request.Searched...)
	return res
}

func (e Entry) describeOpener() string {
	if e.OpenerPath != "" {
		return e.OpenerPath
	}
	return e.Opener
}

// searchDirs are the directories, in order, that an entry's Dirs name for
// an opener whose site-packages directory is sp ("" when none): "$ORIGIN..."
// relative to the opener's directory; any other relative to site-packages
// as Sites says.
func (r *Resolver) searchDirs(opener string, e Entry, sp string) []ldso.SearchDir {
	var out []ldso.SearchDir
	add := func(entry, dir, how string) {
		out = append(out, ldso.SearchDir{Via: ldso.Via(how), Source: how + " (" + e.describeOpener() + ")", Entry: entry, Dir: dir + "/"})
	}
	sites := r.siteDirs(sp)
	switch e.Sites {
	case SitesSysPath:
		for _, site := range sites {
			for _, d := range e.Dirs {
				add(d, path.Join(site, d), HowSitePackages)
			}
		}
		return out
	case SitesUserFirst:
		if u := r.sites.User; u != "" {
			sites = append([]string{u}, slices.DeleteFunc(slices.Clone(sites), func(s string) bool { return s == u })...)
		}
		for _, d := range e.Dirs {
			for _, site := range sites {
				add(d, path.Join(site, d), HowSitePackages)
			}
		}
		return out
	case SitesFirstPackage:
		for _, d := range e.Dirs {
			for _, site := range sites {
				if r.isDir(path.Join(site, path.Dir(d))) {
					add(d, path.Join(site, d), HowSitePackages)
					break
				}
			}
		}
		return out
	}
	for _, d := range e.Dirs {
		if rest, ok := strings.CutPrefix(d, "$ORIGIN"); ok {
			add(d, path.Clean(path.Dir(opener)+"/"+rest), HowOrigin)
		} else if sp != "" {
			add(d, path.Join(sp, d), HowSitePackages)
		}
	}
	return out
}

// siteDirs are the site directories searched beyond the opener's own: the
// environment's in sys.path order, the opener's own first when it is not
// among them; the opener's own alone when no environment is known.
func (r *Resolver) siteDirs(sp string) []string {
	if len(r.sites.Dirs) == 0 {
		if sp == "" {
			return nil
		}
		return []string{sp}
	}
	if sp == "" || slices.Contains(r.sites.Dirs, sp) {
		return r.sites.Dirs
	}
	return append([]string{sp}, r.sites.Dirs...)
}

// isDir reports whether the directory guest exists (links followed, inside
// the root).
func (r *Resolver) isDir(guest string) bool {
	st, err := os.Stat(r.l.HostPath(guest))
	return err == nil && st.IsDir()
}

// Preloads are the libraries that frameworks load by path from
// site-packages before they import the module at file (CuPy through CUDA
// Python's pathfinder), in the order they load them: the ones present.
// Load them into the process before the module.
func (r *Resolver) Preloads(file string) []string {
	entries, sps := r.table.ForPath(file)
	var out []string
	for i, e := range entries {
		if !e.Preload || (e.When != "" && !r.exists(path.Join(sps[i], e.When))) {
			continue
		}
		for _, item := range e.Opens {
			if found := r.find(file, item, e, sps[i]); found != "" && !slices.Contains(out, found) {
				out = append(out, found)
			}
		}
	}
	return out
}

// Fallback is what a framework loads by path while its package is
// imported when its own load of the library at file failed because the
// loader did not find missing (the first name it did not find): the
// libraries of the fallback entries anchored at file, each found where its
// entry's Dirs and Sites say, in order, up to the first one the framework
// requires and no directory has (the framework gives up there, and the
// import fails). ok reports whether the framework falls back at all: it
// does when missing is one of those libraries (its name up to the first
// dot names missing), as torch matches the loader's error message.
func (r *Resolver) Fallback(file, missing string) (files []string, ok bool) {
	entries, sps := r.table.ForPath(file)
	var use []int
	for i, e := range entries {
		if !e.Fallback || (e.When != "" && !r.exists(path.Join(sps[i], e.When))) {
			continue
		}
		use = append(use, i)
		for _, item := range e.Opens {
			for _, n := range Alternatives(item) {
				stem, _, _ := strings.Cut(n, ".")
				ok = ok || strings.Contains(missing, stem)
			}
		}
	}
	if !ok {
		return nil, false
	}
	for _, i := range use {
		e := entries[i]
		for _, item := range e.Opens {
			found := r.find(file, item, e, sps[i])
			if found == "" && !e.Optional {
				return files, true
			}
			if found != "" && !slices.Contains(files, found) {
				files = append(files, found)
			}
		}
	}
	return files, true
}

// HasFallback reports whether a framework loads the library at file
// itself, with a fallback (Fallback).
func (r *Resolver) HasFallback(file string) bool {
	entries, sps := r.table.ForPath(file)
	for i, e := range entries {
		if e.Fallback && (e.When == "" || r.exists(path.Join(sps[i], e.When))) {
			return true
		}
	}
	return false
}

// find finds one item of an entry by path, in its directories, the
// alternatives in order.
func (r *Resolver) find(file, item string, e Entry, sp string) string {
	dirs := r.searchDirs(file, e, sp)
	for _, name := range Alternatives(item) {
		for _, sd := range dirs {
			if found := r.match(strings.TrimSuffix(sd.Dir, "/"), name); found != "" {
				return found
			}
		}
	}
	return ""
}

// match finds name (or the first file matching the pattern name) in dir.
// On this host the loader's cached listings answer (and dir counts among
// its Inputs); under a root, HostPath resolves the links inside it and
// Lstat sees the file the root's own loader would open, never one a link
// leads to outside the root.
func (r *Resolver) match(dir, name string) string {
	if r.l.Root() != "" {
		return r.matchInRoot(dir, name)
	}
	if !strings.ContainsAny(name, "*[") {
		if r.l.IsFile(r.l.HostPath(path.Join(dir, name))) {
			return path.Join(dir, name)
		}
		return ""
	}
	if m := r.l.Glob(r.l.HostPath(dir), name); len(m) > 0 {
		return path.Join(dir, m[0])
	}
	return ""
}

func (r *Resolver) matchInRoot(dir, name string) string {
	if !strings.ContainsAny(name, "*[") {
		if st, err := os.Lstat(r.l.HostPath(path.Join(dir, name))); err == nil && st.Mode().IsRegular() {
			return path.Join(dir, name)
		}
		return ""
	}
	m, err := filepath.Glob(filepath.Join(r.l.HostPath(dir), name))
	if err != nil || len(m) == 0 {
		return ""
	}
	sort.Strings(m)
	return path.Join(dir, filepath.Base(m[0]))
}

// exists reports whether something matches the pattern guest, whose last
// element only may be a pattern on this host.
func (r *Resolver) exists(guest string) bool {
	host := r.l.HostPath(guest)
	dir, pattern := filepath.Split(host)
	if r.l.Root() != "" || strings.ContainsAny(dir, "*?[") {
		m, err := filepath.Glob(host)
		return err == nil && len(m) > 0
	}
	return len(r.l.Glob(dir, pattern)) > 0
}

// readNotes reads an object's dlopen notes once; a file whose notes cannot
// be read has none (its loading is judged elsewhere).
func (r *Resolver) readNotes(host string) []elfscan.DlopenNote {
	return r.cache.notes.Get(host, func() []elfscan.DlopenNote {
		if n, ok := r.l.DlopenNotes(host); ok {
			return n
		}
		f, done, err := r.l.OpenObject(host)
		if err != nil {
			return nil
		}
		defer done()
		n, _ := f.DlopenNotes()
		return n
	})
}
