package ldso

import "slices"

// Fork returns a process that loads on from where p is without changing
// p. It shares p's objects: what loading more changes of one of them (a
// name it comes to answer to, an object whose NEEDED entry it satisfies)
// is kept by the fork, as additions that Result.Names, Result.NeededBy
// and their Process twins read with the object's own. One process loaded
// once (an interpreter after the packages an import loads first) then
// serves every file loaded after them, each in a fork of its own, at the
// cost of what the file adds, not of a copy of the process. Several
// goroutines may fork p at once; p must load nothing after it is forked
// (Dlopen refuses).
func (p *Process) Fork() *Process {
	p.forked.Store(true)
	q := &Process{
		l: p.l, arch: p.arch, archKey: p.archKey, cacheArch: p.cacheArch, hwprio: p.hwprio,
		subdirs: p.subdirs, want: p.want, sysdirs: p.sysdirs, llp: p.llp,
		main: p.main, rtld: p.rtld,
		objs:   slices.Clip(p.objs),
		shared: len(p.objs),
		adds:   &additions{parent: p.adds},
	}
	if p.rtld != nil && !p.contains(p.rtld) {
		// A loader not on the list yet is listed by the first fork that
		// needs it, which sets its place: each fork has its own.
		rtld := *p.rtld
		rtld.names, rtld.neededBy, rtld.Deps = slices.Clip(p.Names(p.rtld)), slices.Clip(p.NeededBy(p.rtld)), slices.Clip(rtld.Deps)
		q.rtld = &rtld
	}
	res := *p.res
	res.Objects, res.Missing = nil, nil
	res.Warnings = slices.Clip(res.Warnings)
	res.VersionErrors = slices.Clip(res.VersionErrors)
	q.res = &res
	return q
}

// additions are what a fork added to the objects it shares with the
// process it was forked from, which stay as they were there: the names
// they came to answer to, and the objects whose NEEDED entries they
// satisfied. A fork of a fork reads its parent's additions before its
// own. The maps are made at the first addition: most forks add to a few
// objects (libc, the framework's core library), many to none.
type additions struct {
	parent   *additions
	names    map[*Object][]string
	answerer map[string]*Object // the object each added name is of
	neededBy map[*Object][]*Object
}

// namesOf is o's names with the additions of every layer, oldest first.
func (a *additions) namesOf(o *Object) []string {
	return layered(a, o.names, func(l *additions) []string { return l.names[o] })
}

// neededByOf is o's needing objects with the additions of every layer,
// oldest first.
func (a *additions) neededByOf(o *Object) []*Object {
	return layered(a, o.neededBy, func(l *additions) []*Object { return l.neededBy[o] })
}

// layered is own followed by what each layer from the oldest to a adds
// (extra of the layer); own itself when no layer adds anything.
func layered[T any](a *additions, own []T, extra func(*additions) []T) []T {
	if a == nil {
		return own
	}
	base := layered(a.parent, own, extra)
	if e := extra(a); len(e) > 0 {
		return append(slices.Clip(base), e...)
	}
	return base
}

// hasNeededBy reports whether by is among o's needing objects, without
// making the list.
func (a *additions) hasNeededBy(o, by *Object) bool {
	for ; a != nil; a = a.parent {
		if slices.Contains(a.neededBy[o], by) {
			return true
		}
	}
	return slices.Contains(o.neededBy, by)
}

// answering is the shared object a layer made answer to name, if any (a
// name is added to one object at most: once added, that object answers
// to it before any other could).
func (a *additions) answering(name string) *Object {
	for ; a != nil; a = a.parent {
		if o, ok := a.answerer[name]; ok {
			return o
		}
	}
	return nil
}

func (a *additions) addName(o *Object, name string) {
	if a.names == nil {
		a.names, a.answerer = map[*Object][]string{}, map[string]*Object{}
	}
	a.names[o] = append(a.names[o], name)
	a.answerer[name] = o
}

func (a *additions) addNeededBy(o, by *Object) {
	if a.neededBy == nil {
		a.neededBy = map[*Object][]*Object{}
	}
	a.neededBy[o] = append(a.neededBy[o], by)
}

// isShared reports whether o is one of the objects p shares with the
// process it was forked from, which p must not change.
func (p *Process) isShared(o *Object) bool {
	i := int(o.pos)
	return i < p.shared && p.objs[i] == o
}

// mutable reports whether p may change o in place: o is p's own and no
// fork of p shares it yet.
func (p *Process) mutable(o *Object) bool { return !p.isShared(o) && !p.forked.Load() }

// addName records that o answers to name too.
func (p *Process) addName(o *Object, name string) {
	if p.isShared(o) {
		p.adds.addName(o, name)
		return
	}
	o.names = append(o.names, name)
}

// addNeededBy records that o satisfied a NEEDED entry of by (once).
func (p *Process) addNeededBy(o, by *Object) {
	if p.isShared(o) {
		if !p.adds.hasNeededBy(o, by) {
			p.adds.addNeededBy(o, by)
		}
		return
	}
	if !slices.Contains(o.neededBy, by) {
		o.neededBy = append(o.neededBy, by)
	}
}

// Names are all the names o answered to in p (NEEDED strings, its soname).
func (p *Process) Names(o *Object) []string { return p.adds.namesOf(o) }

// NeededBy lists every object whose NEEDED entry o satisfied in p, in
// order.
func (p *Process) NeededBy(o *Object) []*Object { return p.adds.neededByOf(o) }

// linkBuf hands out the remapped link lists of a set of copies from one
// allocation, each clipped so that appending to one reallocates it.
type linkBuf struct{ buf []*Object }

func newLinkBuf(n int) *linkBuf { return &linkBuf{buf: make([]*Object, 0, n)} }

func (b *linkBuf) mapped(list []*Object, f func(*Object) *Object) []*Object {
	if list == nil {
		return nil
	}
	start := len(b.buf)
	for _, o := range list {
		b.buf = append(b.buf, f(o))
	}
	return slices.Clip(b.buf[start:])
}

// Detached returns a copy of r that keeps nothing else of the process it
// came from alive: its objects are copies linked among themselves, and an
// object outside r that one of them names (another module that needed the
// same library, the first loader of one r shares with it) is a copy with
// its names and paths and no links. The answer of one file loaded into a
// large process then costs what the file brings in, not the process.
// link maps any other object of that process to what stands for it in the
// copy.
func (r *Result) Detached() (d *Result, link func(*Object) *Object) {
	in := make(map[*Object]*Object, len(r.Objects)+1)
	slab := make([]Object, len(r.Objects))
	nlinks := 0
	// Names are shared: a process only ever appends to an object's names,
	// which leaves what the copy sees as it was.
	for i, o := range r.Objects {
		c := &slab[i]
		*c = *o
		c.lrpath, c.lrunpath = nil, nil
		c.names, c.neededBy = r.Names(o), r.NeededBy(o)
		nlinks += len(c.neededBy) + len(c.Deps)
		in[o] = c
	}
	stubs := map[*Object]*Object{}
	link = func(o *Object) *Object {
		if o == nil {
			return nil
		}
		if c, ok := in[o]; ok {
			return c
		}
		if s, ok := stubs[o]; ok {
			return s
		}
		s := &Object{mapped: o.mapped, names: r.Names(o), depsDone: true}
		stubs[o] = s
		return s
	}
	links := newLinkBuf(nlinks)
	for i := range slab {
		c := &slab[i]
		c.Loader, c.Source = link(c.Loader), link(c.Source)
		c.neededBy = links.mapped(c.neededBy, link)
		c.Deps = links.mapped(c.Deps, link)
	}
	d = &Result{Main: link(r.Main), Objects: mapObjects(r.Objects, link), Warnings: r.Warnings, Arch: r.Arch, Searched: r.Searched}
	for _, m := range r.Missing {
		d.Missing = append(d.Missing, m.Relinked(link))
	}
	for _, v := range r.VersionErrors {
		v.Object, v.Provider = link(v.Object), link(v.Provider)
		d.VersionErrors = append(d.VersionErrors, v)
	}
	return d, link
}

// Relinked is m with the objects it names mapped by link (the link of a
// Detached result, for a miss kept beside it).
func (m Miss) Relinked(link func(*Object) *Object) Miss {
	m.NeededBy, m.Requests = mapObjects(m.NeededBy, link), mapObjects(m.Requests, link)
	return m
}

func mapObjects(list []*Object, f func(*Object) *Object) []*Object {
	if list == nil {
		return nil
	}
	out := make([]*Object, len(list))
	for i, o := range list {
		out[i] = f(o)
	}
	return out
}
