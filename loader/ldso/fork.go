package ldso

import "slices"

// Fork returns a copy of p that loads on without changing p: every object
// copied, with its links (the loader that brought it in, the objects it
// needs and is needed by, the one whose RPATH found it) pointing to the
// copies. One process loaded once (an interpreter after the packages an
// import loads first) then serves every file loaded after them, each in a
// fork of its own. Several goroutines may fork p at once while nothing is
// loaded into p itself. link gives the copy of an object of p.
func (p *Process) Fork() (q *Process, link func(*Object) *Object) {
	fork := *p
	q = &fork
	// The copies in one allocation, their links in another.
	own := p.objs // as forked: p may load on after
	objs := own
	rtldApart := p.rtld != nil && !p.contains(p.rtld)
	if rtldApart {
		objs = append(slices.Clip(objs), p.rtld)
	}
	slab := make([]Object, len(objs))
	for i, o := range objs {
		slab[i] = *o
	}
	// An object of p is found by its place in p's list, not through a
	// map: a fork of a hundred objects is made for every file imported.
	link = func(o *Object) *Object {
		if o == nil {
			return nil
		}
		if i := int(o.pos); i < len(own) && own[i] == o {
			return &slab[i]
		}
		if rtldApart && o == p.rtld {
			return &slab[len(slab)-1]
		}
		return o
	}
	links := newLinkBuf(slab)
	for i := range slab {
		c := &slab[i]
		// The search lists name the object they belong to: computed
		// again on the copy when it loads something.
		c.lrpath, c.lrunpath = nil, nil
		// Appending to a name list of the copy must not write where the
		// original's spare capacity is.
		c.Names = slices.Clip(c.Names)
		c.Loader, c.Source = link(c.Loader), link(c.Source)
		c.NeededBy = links.mapped(c.NeededBy, link)
		c.Deps = links.mapped(c.Deps, link)
	}
	q.objs = mapObjects(own, link)
	q.main, q.rtld = link(p.main), link(p.rtld)
	res := *p.res
	res.Main = link(res.Main)
	res.Objects, res.Missing = nil, nil
	res.Warnings = slices.Clone(res.Warnings)
	res.VersionErrors = slices.Clone(res.VersionErrors)
	for i := range res.VersionErrors {
		v := &res.VersionErrors[i]
		v.Object, v.Provider = link(v.Object), link(v.Provider)
	}
	q.res = &res
	return q, link
}

// linkBuf hands out the remapped link lists of a set of copies from one
// allocation, each clipped so that appending to one reallocates it.
type linkBuf struct{ buf []*Object }

func newLinkBuf(objs []Object) *linkBuf {
	n := 0
	for i := range objs {
		n += len(objs[i].NeededBy) + len(objs[i].Deps)
	}
	return &linkBuf{buf: make([]*Object, 0, n)}
}

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
	for i, o := range r.Objects {
		slab[i] = *o
		slab[i].lrpath, slab[i].lrunpath = nil, nil
		in[o] = &slab[i]
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
		s := &Object{mapped: o.mapped, Names: o.Names, depsDone: true}
		stubs[o] = s
		return s
	}
	// Names are shared: a process only ever appends to an object's names,
	// which leaves what the copy sees as it was.
	links := newLinkBuf(slab)
	for i := range slab {
		c := &slab[i]
		c.Loader, c.Source = link(c.Loader), link(c.Source)
		c.NeededBy = links.mapped(c.NeededBy, link)
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
