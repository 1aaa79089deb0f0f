package pymeta

import (
	"fmt"
	"sort"
	"strings"
)

// Resolution is what a target distribution requires, transitively, in one
// environment, and whether what is installed satisfies it.
type Resolution struct {
	Target       string       // normalized name
	Dependencies []Dependency // by name
}

// Dependency is one distribution that the target requires.
type Dependency struct {
	Name      string    // normalized
	Installed *Metadata // nil when not installed
	// Known is the metadata a Known lookup gave for a dependency that is
	// not installed; its requirements were followed. Nil otherwise.
	Known      *Metadata
	Extras     []string // extras of it that are requested, normalized, sorted
	RequiredBy []Edge   // every requirement that names it
	// Satisfied is true when it is installed and its version meets every
	// requirement's specifier (pre-releases admitted, as pip check does).
	Satisfied bool
}

// Edge is one requirement naming a dependency.
type Edge struct {
	By          string      // the requiring distribution's normalized name
	ByVersion   string      // its installed version
	Extra       string      // the extra of By that brings the requirement in, "" for none
	Chain       []string    // normalized names from the target down to By
	Requirement Requirement // as By's METADATA says
	// MarkerKnown is false when the marker reads a variable the
	// environment lacks and was taken to hold.
	MarkerKnown bool
	Satisfied   bool // the installed version meets this requirement
}

// Version is the installed version, "" when not installed.
func (d Dependency) Version() string {
	if d.Installed == nil {
		return ""
	}
	return d.Installed.Version
}

// Find returns the dependency named name (any spelling), or nil.
func (r *Resolution) Find(name string) *Dependency {
	n := NormalizeName(name)
	for i := range r.Dependencies {
		if r.Dependencies[i].Name == n {
			return &r.Dependencies[i]
		}
	}
	return nil
}

// Resolve follows the Requires-Dist of target ("torch", or
// "cuda-toolkit[cublas]" for extras) through installed (keyed by
// normalized name) in env: markers are evaluated with each requested extra,
// and a requirement with extras brings in its target's requirements for
// those extras. Requirements naming what is not installed are reported,
// not followed.
func Resolve(installed map[string]*Metadata, target string, env Environment) (*Resolution, error) {
	return ResolveWith(installed, nil, target, env)
}

// Known gives the metadata of a distribution that is not installed, for
// the first requirement that names it (normalized name, as written), or nil
// when it is not known.
type Known func(name string, req Requirement) *Metadata

// ResolveWith is Resolve where the requirements of a distribution that is
// not installed are followed too, when known has its metadata (an index's,
// or a table of real wheels'): what a package declares counts whether or
// not it is installed.
func ResolveWith(installed map[string]*Metadata, lookup Known, target string, env Environment) (*Resolution, error) {
	root, err := ParseRequirement(target)
	if err != nil {
		return nil, err
	}
	rootName := NormalizeName(root.Name)
	if installed[rootName] == nil {
		return nil, fmt.Errorf("%s is not installed", root.Name)
	}
	c := &closure{installed: installed, lookup: lookup, env: env, rootName: rootName, nodes: map[string]*node{}, deps: map[string]*Dependency{}}
	c.nodes[rootName] = &node{chain: []string{rootName}, done: map[string]bool{}, taken: map[int]bool{}}
	c.queue = []work{{rootName, normalizeAll(root.Extras)}}
	for len(c.queue) > 0 {
		w := c.queue[0]
		c.queue = c.queue[1:]
		c.visit(w)
	}
	return c.resolution(), nil
}

// closure is the state of a resolution: the distributions reached, each
// dependency found, and the work still queued.
type closure struct {
	installed map[string]*Metadata
	lookup    Known
	env       Environment
	rootName  string
	nodes     map[string]*node
	deps      map[string]*Dependency
	queue     []work
}

// node is a distribution reached, and what of it was applied.
type node struct {
	chain []string        // names from the target to this one, inclusive
	done  map[string]bool // extra contexts processed ("" is the base)
	taken map[int]bool    // indexes of RequiresDist already applied
}

// work is a distribution to visit with the extras asked of it.
type work struct {
	name   string
	extras []string
}

// visit applies the requirements of w's distribution, in its base context
// and each extra not yet processed.
func (c *closure) visit(w work) {
	meta, n := c.installed[w.name], c.nodes[w.name]
	if meta == nil {
		meta = c.deps[w.name].Known
	}
	for _, x := range append([]string{""}, w.extras...) {
		if n.done[x] {
			continue
		}
		n.done[x] = true
		e := make(Environment, len(c.env)+1)
		for k, v := range c.env {
			e[k] = v
		}
		e["extra"] = x
		for i, req := range meta.RequiresDist {
			if n.taken[i] {
				continue
			}
			holds, known := true, true
			if req.Marker != nil {
				holds, known = req.Marker.EvaluatePartial(e)
				holds = holds || !known
			}
			if holds {
				n.taken[i] = true
				c.require(w.name, meta, n, x, req, known)
			}
		}
	}
}

// require records one requirement that holds, and queues its target when
// its metadata is known (installed, or from lookup).
func (c *closure) require(by string, meta *Metadata, n *node, extra string, req Requirement, known bool) {
	dn := NormalizeName(req.Name)
	if dn == c.rootName && len(req.Extras) == 0 {
		return // a self-reference adds nothing
	}
	d := c.deps[dn]
	if d == nil {
		d = &Dependency{Name: dn, Installed: c.installed[dn]}
		if d.Installed == nil && c.lookup != nil {
			d.Known = c.lookup(dn, req)
		}
		c.deps[dn] = d
	}
	edge := Edge{By: by, ByVersion: meta.Version, Extra: extra, Chain: n.chain, Requirement: req, MarkerKnown: known}
	if d.Installed != nil {
		edge.Satisfied = len(req.Specifier) == 0 || req.Specifier.ContainsString(d.Installed.Version, true)
	}
	d.RequiredBy = append(d.RequiredBy, edge)
	d.Extras = mergeSorted(d.Extras, normalizeAll(req.Extras))
	if d.Installed == nil && d.Known == nil {
		return
	}
	if c.nodes[dn] == nil {
		chain := append(append([]string(nil), n.chain...), dn)
		c.nodes[dn] = &node{chain: chain, done: map[string]bool{}, taken: map[int]bool{}}
	}
	c.queue = append(c.queue, work{dn, normalizeAll(req.Extras)})
}

// resolution is the closure's result, its dependencies sorted by name.
func (c *closure) resolution() *Resolution {
	res := &Resolution{Target: c.rootName}
	for _, d := range c.deps {
		d.Satisfied = d.Installed != nil
		for _, e := range d.RequiredBy {
			d.Satisfied = d.Satisfied && e.Satisfied
		}
		res.Dependencies = append(res.Dependencies, *d)
	}
	sort.Slice(res.Dependencies, func(i, j int) bool { return res.Dependencies[i].Name < res.Dependencies[j].Name })
	return res
}

// Pins are the specifiers the requirements put on the dependency, as
// written ("==9.19.0.56"), without repeats.
func (d Dependency) Pins() []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range d.RequiredBy {
		s := e.Requirement.Specifier.String()
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// String says in one line who requires the dependency and whether it is
// met: "nvidia-cudnn-cu13 9.19.0.56 (==9.19.0.56 from torch 2.11.0): ok".
func (d Dependency) String() string {
	var from []string
	for _, e := range d.RequiredBy {
		by := e.By + " " + e.ByVersion
		if e.Extra != "" {
			by = e.By + "[" + e.Extra + "] " + e.ByVersion
		}
		spec := e.Requirement.Specifier.String()
		if spec == "" {
			spec = "any version"
		}
		from = append(from, spec+" from "+by)
	}
	state := "ok"
	switch {
	case d.Installed == nil:
		state = "not installed"
	case !d.Satisfied:
		state = "does not satisfy the requirement"
	}
	v := d.Version()
	if v == "" {
		v = "-"
	}
	return fmt.Sprintf("%s %s (%s): %s", d.Name, v, strings.Join(from, "; "), state)
}

func normalizeAll(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, NormalizeName(n))
	}
	sort.Strings(out)
	return out
}

func mergeSorted(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range append(append([]string(nil), a...), b...) {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}
