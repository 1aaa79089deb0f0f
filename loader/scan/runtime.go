package scan

import (
	"context"

	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/runtimeopen"
)

// RuntimeOpen is a library an object of the closure opens at run time.
type RuntimeOpen struct {
	Opener   string `json:"opener"`
	Soname   string `json:"soname"`
	Evidence string `json:"evidence"`
	Optional bool   `json:"optional"`
	// Driver marks a library of the GPU driver: reported, never fetched,
	// never counted missing.
	Driver bool    `json:"driver,omitempty"`
	Path   *string `json:"path"` // null when not found
	// Host is where the opened file is on this machine (differs under a root).
	Host string `json:"-"`
	// How is "loaded" (already in the process), "site-packages" or
	// "origin" (by path, where the framework looks), or the loader's way
	// (rpath, ld_library_path, runpath, cache, default, path); empty when
	// not found.
	How  string `json:"how,omitempty"`
	From string `json:"from,omitempty"`
}

// runtimeOpens performs the run-time opens of a process whose closure is
// objs and records them on root: every open, and the required ones not
// found among root's misses (flagged RunTime) and in RuntimeMisses.
func runtimeOpens(ctx context.Context, r *runtimeopen.Resolver, p *ldso.Process, objs []*ldso.Object, root *Root) {
	opens := r.Resolve(ctx, p, objs)
	root.RuntimeOpens = []RuntimeOpen{}
	for i := range opens {
		o := &opens[i]
		ro := RuntimeOpen{Opener: o.Opener.Path, Soname: o.Name, Evidence: o.Evidence, Optional: o.Optional, Driver: o.Driver, How: o.How, From: o.From}
		if o.Found != nil {
			p := o.Found.Path
			ro.Path, ro.Host = &p, o.Found.HostPath
		}
		root.RuntimeOpens = append(root.RuntimeOpens, ro)
		if !o.Missing() {
			continue
		}
		root.Missing = append(root.Missing, Missing{
			Soname: o.Name, NeededBy: []string{o.Opener.Path}, RunTime: true,
			Problem: "opened at run time by " + o.Opener.Path + " (" + o.Evidence + ")",
		})
		root.RuntimeMisses = append(root.RuntimeMisses, ldso.Miss{
			Name: o.Name, NeededBy: []*ldso.Object{o.Opener}, Requests: []*ldso.Object{o.Request},
		})
		root.OK = false
	}
	openedNeeds(p, opens, objs, root)
}

// openedNeeds records what a required run-time open that was found needs
// and the loader does not find (libtorch_cuda_linalg, which torch opens,
// needs cuSOLVER): the open fails on it as on the library itself.
func openedNeeds(p *ldso.Process, opens []runtimeopen.Open, objs []*ldso.Object, root *Root) {
	before := map[*ldso.Object]bool{}
	for _, o := range objs {
		before[o] = true
	}
	seen := map[*ldso.Object]bool{}
	for i := range opens {
		o := &opens[i]
		if o.Found == nil || o.Optional || o.Driver || before[o.Found] {
			continue
		}
		queue := []*ldso.Object{o.Found}
		for len(queue) > 0 {
			x := queue[0]
			queue = queue[1:]
			if seen[x] || before[x] {
				continue
			}
			seen[x] = true
			if x.Found() {
				queue = append(queue, x.Deps...)
				continue
			}
			var by []string
			for _, n := range p.NeededBy(x) {
				by = append(by, n.Path)
			}
			root.Missing = append(root.Missing, Missing{Soname: x.Name, NeededBy: by, RunTime: true,
				Problem: "needed by " + o.Found.Path + ", which " + o.Opener.Path + " opens at run time (" + o.Evidence + ")"})
			root.RuntimeMisses = append(root.RuntimeMisses, ldso.Miss{Name: x.Name, NeededBy: p.NeededBy(x), Requests: []*ldso.Object{x}})
			root.OK = false
		}
	}
}

// AddRuntimeOpens adds to root the run-time opens of the process p whose
// closure root describes (root.Result.Objects): for callers that build
// their own processes, like the resolver's import model.
func AddRuntimeOpens(ctx context.Context, r *runtimeopen.Resolver, p *ldso.Process, root *Root) {
	runtimeOpens(ctx, r, p, root.Result.Objects, root)
}
