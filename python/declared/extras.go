package declared

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// requestedExtras are the target's extras that count as requested. An
// installer does not record them (jax-cuda13-plugin[with-cuda],
// cupy-cuda13x[ctk]); an extra counts when the NVIDIA distributions it
// brings beyond the base requirements own a library the package's objects
// need or open at run time. Without that knowledge (Input.Needs nil), it
// counts when a distribution it names is installed.
func (c *computer) requestedExtras(target string) []Extra {
	meta := c.metas[target]
	if meta == nil {
		return nil
	}
	base := c.nvidiaClosure(target)
	var out []Extra
	for _, x := range meta.ProvidesExtra {
		x = pymeta.NormalizeName(x)
		with := c.nvidiaClosure(target + "[" + x + "]")
		var brought []string
		for name := range with {
			if _, ok := base[name]; !ok {
				brought = append(brought, name)
			}
		}
		slices.Sort(brought)
		if why := c.extraReason(brought); why != "" {
			out = append(out, Extra{Name: x, Why: why})
		}
	}
	return out
}

// nvidiaClosure is the set of NVIDIA distributions spec brings, with the
// version each would come at.
func (c *computer) nvidiaClosure(spec string) map[string]pymeta.Dependency {
	res, err := pymeta.ResolveWith(c.metas, c.known, spec, c.in.Env.Markers)
	out := map[string]pymeta.Dependency{}
	if err != nil {
		return out
	}
	for _, d := range res.Dependencies {
		if c.isNVIDIA(d.Name) {
			out[d.Name] = d
		}
	}
	return out
}

// extraReason says why an extra that brings these distributions counts, or
// "" when it does not.
func (c *computer) extraReason(brought []string) string {
	if c.in.Needs == nil {
		for _, name := range brought {
			if c.in.Installed[name] != nil {
				return name + " is installed"
			}
		}
		return ""
	}
	for _, name := range brought {
		for _, f := range c.filesOf(name) {
			lib := path.Base(f.Path)
			if catalog.IsSharedLibrary(lib) && c.in.Needs(lib) {
				return fmt.Sprintf("it requires %s, which owns %s, a library the package needs", name, lib)
			}
		}
	}
	return ""
}

// filesOf are the files a distribution installs, as far as is known
// before its version is decided: its installed RECORD, else the real wheel
// record of the version chosen for it, else of any release.
func (c *computer) filesOf(name string) []catalog.WheelFile {
	if inst := c.in.Installed[name]; inst != nil {
		return recordFiles(inst)
	}
	if ch, ok := c.chosen[name]; ok && ch.version != "" {
		if r, ok := c.in.Records.Nearest(name, ch.version); ok {
			return r.Files
		}
	}
	vs := c.in.Records.Versions(name)
	if len(vs) == 0 {
		return nil
	}
	r, _ := c.in.Records.Exact(name, vs[len(vs)-1])
	return r.Files
}

// String is the closure's table in text: one line per distribution.
func (cl *Closure) String() string {
	var b strings.Builder
	for _, d := range cl.Dists {
		fmt.Fprintf(&b, "%-26s %-12s %-14s %s\n", d.Name, orDash(d.Version), d.State, d.Detail)
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
