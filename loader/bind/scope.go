package bind

import (
	"context"

	"github.com/cudadeps/cudadeps/loader/ldso"
)

// Closure binds a program as `ldd -r` does: every object the loader loads
// for r.Main is in the one global scope, and every one is relocated but the
// dynamic loader itself.
func (b *Binder) Closure(ctx context.Context, r *ldso.Result) ([]Undefined, error) {
	var check []*ldso.Object
	for _, o := range r.Objects {
		if o.Via == ldso.ViaInterpreter {
			continue
		}
		check = append(check, o)
	}
	return b.Check(ctx, r.Objects, check)
}

// GlobalScope is the process's global scope as ld.so builds it at start:
// the main program, its preloads, then breadth first everything their
// NEEDED entries bring in.
func GlobalScope(p *ldso.Process) []*ldso.Object {
	start := []*ldso.Object{p.Main()}
	for _, o := range p.ObjectsFrom(0) {
		if o.Via == ldso.ViaPreload {
			start = append(start, o)
		}
	}
	return breadthFirst(start)
}

// breadthFirst lists start and what their NEEDED entries reach, each once,
// in the order of ld.so's search lists.
func breadthFirst(start []*ldso.Object) []*ldso.Object {
	seen := map[*ldso.Object]bool{}
	var out []*ldso.Object
	for _, o := range start {
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	for i := 0; i < len(out); i++ {
		for _, d := range out[i].Deps {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// Dlopened binds what dlopen(o, RTLD_NOW|RTLD_LOCAL) relocated in process
// p, as Python imports an extension module: the objects of o's dependency
// group that this dlopen loaded (neither in the global scope, nor counted
// as loaded already, nor loaded by an earlier dlopen, which relocated them
// then), each looked up in the global scope and then in o's group. When o
// itself was loaded earlier, as a dependency of an object dlopen'ed before
// (a package's library that its extension module needs), the objects of
// o's group that that dlopen loaded are bound as it bound them: in the
// global scope, then in that object's group. globals are objects opened
// earlier with RTLD_GLOBAL: their dependency groups join the global scope,
// in order, after the program's.
func (b *Binder) Dlopened(ctx context.Context, p *ldso.Process, o *ldso.Object, globals ...*ldso.Object) ([]Undefined, error) {
	global := GlobalScope(p)
	isGlobal := map[*ldso.Object]bool{}
	for _, g := range global {
		isGlobal[g] = true
	}
	for _, g := range globals {
		for _, x := range breadthFirst([]*ldso.Object{g}) {
			if !isGlobal[x] {
				isGlobal[x] = true
				global = append(global, x)
			}
		}
	}
	objs := p.ObjectsFrom(0)
	// by is the object whose dlopen loaded o: o itself, or the last object
	// opened by path before it.
	by := o
	if i, ok := p.Index(o); ok && o.Via != ldso.ViaDlopen {
		for j := i - 1; j >= 0; j-- {
			if objs[j].Via == ldso.ViaDlopen {
				by = objs[j]
				break
			}
		}
	}
	from, ok := p.Index(by)
	if !ok {
		from = 0
	}
	var check []*ldso.Object
	for _, x := range breadthFirst([]*ldso.Object{o}) {
		if isGlobal[x] || x.Via == ldso.ViaLoaded || x.Via == ldso.ViaInterpreter {
			continue
		}
		if i, ok := p.Index(x); ok && i < from {
			continue // an earlier dlopen relocated it
		}
		check = append(check, x)
	}
	return b.Check(ctx, append(global, breadthFirst([]*ldso.Object{by})...), check)
}
