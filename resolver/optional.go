package resolver

import (
	_ "embed"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

//go:embed optional.yaml
var optionalYAML []byte

// OptionalModules is one curated fact: extension modules of a distribution
// that load only on demand, so that what only they need is optional.
type OptionalModules struct {
	Dists   []string `yaml:"dists"`
	Modules []string `yaml:"modules"`
	Feature string   `yaml:"feature"`
	Install string   `yaml:"install"`
	Source  string   `yaml:"source"`
}

// LoadOptionalModules parses the built-in table and checks every entry.
func LoadOptionalModules() ([]OptionalModules, error) {
	return parseOptionalModules(optionalYAML)
}

func parseOptionalModules(data []byte) ([]OptionalModules, error) {
	var entries []OptionalModules
	if err := yaml.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("optional module table: %w", err)
	}
	for i, e := range entries {
		bad := ""
		switch {
		case len(e.Dists) == 0 || len(e.Modules) == 0:
			bad = "needs dists and modules"
		case strings.TrimSpace(e.Source) == "":
			bad = "no source"
		case e.Feature == "":
			bad = "no feature"
		}
		for _, g := range append(append([]string(nil), e.Dists...), e.Modules...) {
			if _, err := path.Match(g, ""); err != nil || path.IsAbs(g) || strings.Contains(g, "..") {
				bad = fmt.Sprintf("bad glob %q", g)
			}
		}
		if bad != "" {
			return nil, fmt.Errorf("optional module table, entry %d: %s", i+1, bad)
		}
	}
	return entries, nil
}

// OptionalLib is a library that the package works without: needed only by
// an optional extension module, or opened at run time where a failure is
// survived. resolve reports it and never fetches it.
type OptionalLib struct {
	Soname string `json:"soname"`
	// For are the optional modules (dotted names) or, for a run-time
	// open, the libraries that open it.
	For     []string `json:"for"`
	Feature string   `json:"feature,omitempty"`
	// Install is the pip requirement that provides it, when known.
	Install string `json:"install,omitempty"`
	Source  string `json:"source"`
	// RunTime marks an optional run-time open (runtimeopen's table or a
	// .note.dlopen of priority other than required).
	RunTime bool `json:"run_time,omitempty"`
}

// String is the line the report prints.
func (o OptionalLib) String() string {
	s := o.Soname + " for " + strings.Join(o.For, ", ")
	if o.Feature != "" && !o.RunTime {
		s += " (" + o.Feature + ")"
	}
	if o.Install != "" {
		s += "; install " + o.Install + " to enable"
	}
	return s
}

// withoutOptional drops from needs the libraries that only optional
// extension modules need, and records them, with the optional run-time
// opens not found, in the outcome. A library a required distribution owns
// stays a need: its wheel puts it there.
func (s *session) withoutOptional(needs []*Need, rep *scan.Report) []*Need {
	table, err := LoadOptionalModules()
	if err != nil {
		s.opts.Logger.Warn("optional modules not known", "error", err)
	}
	optRoots := optionalRoots(s.t, rep, table)
	missedBy := map[string][]*scan.Root{}
	for _, r := range rep.Roots {
		if r.Result == nil {
			continue
		}
		for _, m := range r.Result.Missing {
			missedBy[m.Name] = append(missedBy[m.Name], r)
		}
		for _, m := range r.RuntimeMisses {
			missedBy[m.Name] = append(missedBy[m.Name], r)
		}
	}
	var keep []*Need
	var opt []OptionalLib
	for _, n := range needs {
		roots := missedBy[n.Soname]
		optional := len(roots) > 0 && (s.layout == nil || s.layout.Owner(n.Soname) == nil)
		var entry *OptionalModules
		var mods []string
		for _, r := range roots {
			m, ok := optRoots[r]
			if !ok {
				optional = false
				break
			}
			entry = m.entry
			mods = uniq.Append(mods, m.module)
		}
		if !optional {
			keep = append(keep, n)
			continue
		}
		opt = append(opt, OptionalLib{Soname: n.Soname, For: mods, Feature: entry.Feature,
			Install: installName(entry.Install, s.out.CUDAMajor), Source: entry.Source})
	}
	opt = append(opt, optionalOpens(rep, opt)...)
	s.out.Optional = orEmpty(opt)
	return keep
}

// optionalModule is a root found to be an optional extension module.
type optionalModule struct {
	entry  *OptionalModules
	module string // its dotted name
}

// optionalRoots are the scan's roots that are optional extension modules of
// the target's distribution, with the table entry that says so.
func optionalRoots(t *Target, rep *scan.Report, table []OptionalModules) map[*scan.Root]optionalModule {
	out := map[*scan.Root]optionalModule{}
	if t.Kind != KindPython || t.Dist == nil {
		return out
	}
	dist := pymeta.NormalizeName(t.Dist.Name)
	for i := range table {
		e := &table[i]
		if !matchAny(e.Dists, dist) {
			continue
		}
		for _, r := range rep.Roots {
			for _, g := range e.Modules {
				if matchTail(g, r.Path) {
					out[r] = optionalModule{entry: e, module: moduleName(r.Path, g)}
				}
			}
		}
	}
	return out
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// matchTail matches a glob relative to site-packages against the last as
// many components of p (which may be under a --root or a symlinked venv).
func matchTail(glob, p string) bool {
	parts := strings.Split(filepath.ToSlash(p), "/")
	n := strings.Count(glob, "/") + 1
	if len(parts) < n {
		return false
	}
	ok, _ := path.Match(glob, strings.Join(parts[len(parts)-n:], "/"))
	return ok
}

// moduleName is an extension module's dotted name: its path relative to
// site-packages, as deep as the glob that matched it, without the
// extension suffix (cutensor.cpython-312-x86_64-linux-gnu.so → cutensor).
func moduleName(p, glob string) string {
	parts := strings.Split(filepath.ToSlash(p), "/")
	parts = parts[len(parts)-(strings.Count(glob, "/")+1):]
	last := parts[len(parts)-1]
	if i := strings.IndexByte(last, '.'); i > 0 {
		parts[len(parts)-1] = last[:i]
	}
	return strings.Join(parts, ".")
}

// installName fills in the CUDA major of a pip requirement template.
func installName(tmpl string, cudaMajor int) string {
	if cudaMajor == 0 {
		return strings.ReplaceAll(tmpl, "{cuda}", "N")
	}
	return strings.ReplaceAll(tmpl, "{cuda}", strconv.Itoa(cudaMajor))
}

// optionalOpens are the optional run-time opens no root found, each once,
// named as dlopen would be asked (patterns are left out: they stand for
// whatever a directory holds).
func optionalOpens(rep *scan.Report, have []OptionalLib) []OptionalLib {
	var out []OptionalLib
	idx := map[string]int{}
	for _, o := range have {
		idx[o.Soname] = -1
	}
	for _, r := range rep.Roots {
		for _, o := range r.RuntimeOpens {
			if !o.Optional || o.Path != nil || strings.ContainsAny(o.Soname, "*[?") {
				continue
			}
			i, seen := idx[o.Soname]
			if i < 0 {
				continue
			}
			if !seen {
				idx[o.Soname] = len(out)
				out = append(out, OptionalLib{Soname: o.Soname, Source: o.Evidence, RunTime: true})
				i = len(out) - 1
			}
			out[i].For = uniq.Append(out[i].For, filepath.Base(o.Opener))
		}
	}
	return out
}
