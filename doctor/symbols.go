package doctor

import (
	"debug/elf"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// hookKind sorts the entry points an interposer may define.
type hookKind int

const (
	hookNone    hookKind = iota
	hookDriver           // cuInit, cuMemAlloc_v2 (libcuda)
	hookRuntime          // cudaMalloc, __cudaRegisterFatBinary (libcudart)
	hookNVML             // nvmlInit_v2 (libnvidia-ml)
	hookDL               // dlsym, dlopen: the way to the driver's entry points
)

func classifyHook(name string) hookKind {
	upperAt := func(i int) bool { return len(name) > i && name[i] >= 'A' && name[i] <= 'Z' }
	switch {
	case strings.HasPrefix(name, "__cuda"), strings.HasPrefix(name, "cuda") && upperAt(4):
		return hookRuntime
	case strings.HasPrefix(name, "cu") && upperAt(2):
		return hookDriver
	case strings.HasPrefix(name, "nvml") && upperAt(4):
		return hookNVML
	}
	switch name {
	case "dlsym", "dlvsym", "dlopen", "dlmopen":
		return hookDL
	}
	return hookNone
}

// hooks is what one preloaded object interposes.
type hooks struct {
	obj    *ldso.Object
	syms   []elfscan.Symbol
	byKind map[hookKind][]string
	err    error
}

func (h *hooks) has(names ...string) bool {
	for _, s := range h.syms {
		if slices.Contains(names, s.Name) {
			return true
		}
	}
	return false
}

// preloads reads the CUDA and dl entry points of every preloaded object.
func (d *diag) preloads() []*hooks {
	if d.model.result == nil {
		return nil
	}
	if d.hooks != nil {
		return d.hooks
	}
	d.hooks = []*hooks{}
	for _, o := range d.model.result.Objects {
		if o.Via != ldso.ViaPreload || !o.Found() {
			continue
		}
		h := &hooks{obj: o, byKind: map[hookKind][]string{}}
		h.syms, h.err = symbolsOf(o.HostPath, func(name string, defined bool) bool {
			return defined && classifyHook(name) != hookNone
		})
		for _, s := range h.syms {
			k := classifyHook(s.Name)
			h.byKind[k] = append(h.byKind[k], s.Name)
		}
		d.hooks = append(d.hooks, h)
	}
	return d.hooks
}

func listNames(names []string, max int) string {
	if len(names) > max {
		return strings.Join(names[:max], ", ") + fmt.Sprintf(" and %d more", len(names)-max)
	}
	return strings.Join(names, ", ")
}

func (d *diag) checkInterposers() Check {
	if d.model.result == nil {
		return check(CheckInterposers, Warn, "loader model unavailable: "+d.model.err, "")
	}
	var fs []finding
	for _, w := range d.model.result.Warnings {
		if strings.Contains(w, "preload") {
			fs = append(fs, finding{Warn, "ld.so: " + w, "fix or remove the entry: the loader prints this error at every program start"})
		}
	}
	static := d.staticRuntimeObjects()
	for _, h := range d.preloads() {
		label := h.obj.From + " " + h.obj.Path
		if h.err != nil {
			fs = append(fs, finding{Warn, fmt.Sprintf("%s: symbols unreadable (%v)", label, h.err), ""})
			continue
		}
		if len(h.syms) == 0 {
			fs = append(fs, finding{OK, label + " defines no CUDA entry point", ""})
			continue
		}
		var all []string
		for _, k := range []hookKind{hookDriver, hookRuntime, hookNVML, hookDL} {
			all = append(all, h.byKind[k]...)
		}
		what := fmt.Sprintf("%s interposes %s", label, listNames(all, 4))
		without := "env -u LD_PRELOAD"
		if h.obj.From == "/etc/ld.so.preload" {
			without = "commenting it out of /etc/ld.so.preload"
		}
		switch {
		case len(h.byKind[hookDriver]) > 0 && !h.has("dlsym", "dlvsym") && !h.has("cuGetProcAddress", "cuGetProcAddress_v2"):
			fs = append(fs, finding{Warn, what + ", but neither dlsym nor cuGetProcAddress",
				"the CUDA runtime opens libcuda.so.1 with dlopen and takes driver functions from dlsym and cuGetProcAddress, which LD_PRELOAD does not reach: hook those too, or these hooks fire only for programs calling the driver API directly"})
		case len(h.byKind[hookRuntime]) > 0 && len(static) > 0:
			fs = append(fs, finding{Warn, fmt.Sprintf("%s, but %s carries the CUDA runtime statically and never calls it", what, listNames(static, 2)),
				"a statically linked runtime (nvcc's default) does not go through the dynamic linker: hook the driver API (cuInit, cuMemAlloc_v2 through dlsym and cuGetProcAddress) instead"})
		default:
			if mism := d.versionMismatch(h); mism != "" {
				fs = append(fs, finding{Warn, what + ", but " + mism,
					"the loader binds a versioned reference only to a definition of that version: give the hooks the version the program asks for (a version script)"})
				continue
			}
			fs = append(fs, finding{Warn, what, "if CUDA misbehaves, compare with a run without it (" + without + ")"})
		}
	}
	if len(fs) == 0 {
		return check(CheckInterposers, OK, "no LD_PRELOAD and no /etc/ld.so.preload", "")
	}
	return combine(CheckInterposers, fs)
}

// versionMismatch finds a runtime hook whose version differs from the one
// the process's objects ask for (cudaMalloc@@libcudart.so.12 against
// references to cudaMalloc@libcudart.so.13).
func (d *diag) versionMismatch(h *hooks) string {
	for _, s := range h.syms {
		if classifyHook(s.Name) != hookRuntime {
			continue
		}
		for _, refs := range d.cudartRefs() {
			for _, r := range refs {
				if r.sym.Name == s.Name && r.sym.Version != "" && s.Version != "" && s.Version != r.sym.Version {
					return fmt.Sprintf("it defines %s while %s asks for %s", s.String(), path.Base(r.from.Path), r.sym.String())
				}
			}
		}
	}
	return ""
}

// needsCudart reports an object that links libcudart dynamically.
func needsCudart(in *elfscan.Info) bool {
	for _, n := range in.Needed {
		if strings.HasPrefix(n, "libcudart") {
			return true
		}
	}
	return false
}

// staticRuntimeObjects lists the target's objects that carry the CUDA
// runtime: they register fat binaries (__cudaRegisterFatBinary defined, or
// a .nvFatBinSegment section) without needing libcudart.
func (d *diag) staticRuntimeObjects() []string {
	if d.target == nil {
		return nil
	}
	if d.static != nil {
		return *d.static
	}
	out := []string{}
	for _, o := range d.target.objects {
		if needsCudart(o.info) || cudartRE.MatchString(o.info.Soname) || cudartRE.MatchString(path.Base(o.host)) {
			continue // a libcudart is the runtime, not a user of it
		}
		if defs, err := lookupSymbols(o.host, "__cudaRegisterFatBinary"); err == nil && len(defs) > 0 {
			out = append(out, o.rel)
			continue
		}
		if hasFatbinSegment(o.host) {
			out = append(out, o.rel)
		}
	}
	d.static = &out
	return out
}

// hasFatbinSegment looks for the section nvcc puts the fat binary wrapper
// in; it needs the section headers, which debug/elf reads without the data.
func hasFatbinSegment(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Section(".nvFatBinSegment") != nil
}

func (d *diag) checkStaticRuntime() Check {
	static := d.staticRuntimeObjects()
	name := d.targetName()
	if len(static) == 0 {
		return check(CheckStaticRuntime, OK, fmt.Sprintf("no object of %s carries the CUDA runtime statically", name), "")
	}
	ev := fmt.Sprintf("%d object(s) of %s carry the CUDA runtime statically (%s): no libcudart in NEEDED, fat binaries registered by their own copy", len(static), name, listNames(static, 3))
	for _, h := range d.preloads() {
		if rt := h.byKind[hookRuntime]; len(rt) > 0 {
			return check(CheckStaticRuntime, Warn, ev+fmt.Sprintf("; the hooks of %s (%s) never see their calls", path.Base(h.obj.Path), listNames(rt, 3)),
				"hook the driver API instead (cuInit, cuMemAlloc_v2, reached through dlsym and cuGetProcAddress): every runtime, static or shared, goes through it")
		}
	}
	return check(CheckStaticRuntime, OK, ev+"; their CUDA version is fixed at build time, only the driver must be new enough", "")
}

// ref is one versioned reference of a process object to a libcudart.
type ref struct {
	from *ldso.Object
	sym  elfscan.Symbol
}

// cudartRefs reads, for each libcudart soname, the runtime symbols that the
// process's objects import from it.
func (d *diag) cudartRefs() map[string][]ref {
	if d.refs != nil {
		return d.refs
	}
	d.refs = map[string][]ref{}
	if d.model.result == nil {
		return d.refs
	}
	for _, o := range d.model.result.Objects {
		if !o.Found() || o.Info == nil || isCudart(d.model.result, o) {
			continue
		}
		var sonames []string
		for _, n := range o.Info.Needed {
			if cudartRE.MatchString(n) {
				sonames = append(sonames, n)
			}
		}
		if len(sonames) == 0 {
			continue
		}
		syms, err := symbolsOf(o.HostPath, func(name string, defined bool) bool {
			return !defined && classifyHook(name) == hookRuntime
		})
		if err != nil {
			d.log.Debug("cannot read symbols", "path", o.HostPath, "err", err)
			continue
		}
		for _, s := range syms {
			switch {
			case s.File != "":
				d.refs[s.File] = append(d.refs[s.File], ref{o, s})
			case len(sonames) == 1:
				d.refs[sonames[0]] = append(d.refs[sonames[0]], ref{o, s})
			}
		}
	}
	return d.refs
}

// familyRE tells NVIDIA's own file names (and auditwheel's hashed copies)
// for the libraries shims replace.
func familyRE(stem string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(stem) + `(?:-[0-9a-f]{8})?\.so(?:\.[0-9.]+)?$`)
}

func stemOf(soname string) string {
	stem, _, _ := strings.Cut(soname, ".so")
	return stem
}

func (d *diag) checkShims() Check {
	m := d.model
	if m.err != "" {
		return check(CheckShims, Warn, "loader model unavailable: "+m.err, "")
	}
	var fs []finding
	var own []string
	libs := append([]*lib{m.libcuda, m.nvml}, m.cudarts...)
	for _, lb := range libs {
		if !lb.found() {
			continue
		}
		before := len(fs)
		name := lb.soname
		base := path.Base(lb.realGuest)
		if !familyRE(stemOf(name)).MatchString(base) {
			fs = append(fs, finding{Warn, fmt.Sprintf("%s is a shim, not NVIDIA's library: %s", name, lb.shown()),
				fmt.Sprintf("if CUDA fails, put NVIDIA's %s first (or remove the link) and try again", name)})
		}
		switch {
		case name == "libcuda.so.1":
			fs = append(fs, d.libcudaSymbols(lb)...)
		case name == "libnvidia-ml.so.1":
			if defs, err := lookupSymbols(lb.real, "nvmlInit_v2"); err == nil && len(defs) == 0 {
				fs = append(fs, finding{Warn, fmt.Sprintf("%s (%s) defines no nvmlInit_v2, which nvidia-smi and torch call", name, base), "use the driver's own libnvidia-ml.so.1"})
			}
		default:
			fs = append(fs, d.cudartSymbols(lb)...)
		}
		for _, w := range m.result.Warnings {
			if strings.HasPrefix(w, lb.obj.Path+": no version information available") {
				fs = append(fs, finding{Warn, fmt.Sprintf("%s (%s) defines no symbol versions: ld.so warns %q and binds its symbols unversioned", name, base, strings.TrimPrefix(w, lb.obj.Path+": ")),
					fmt.Sprintf("give the shim the version script of NVIDIA's %s, or put NVIDIA's first", name)})
			}
		}
		for _, ve := range m.result.VersionErrors {
			if ve.Provider == lb.obj && !ve.Weak {
				fs = append(fs, finding{Fail, fmt.Sprintf("%s needs version %s of %s, which %s does not define: the loader refuses to load it", path.Base(ve.Object.Path), ve.Version, ve.File, base),
					fmt.Sprintf("put NVIDIA's %s first on the library path", name)})
			}
		}
		if len(fs) == before {
			own = append(own, name)
		}
	}
	if len(fs) == 0 {
		if len(own) == 0 {
			return check(CheckShims, OK, "no libcuda.so.1, libnvidia-ml.so.1 or libcudart found to examine", "")
		}
		return check(CheckShims, OK, strings.Join(own, ", ")+": NVIDIA's own names, defining what is asked of them", "")
	}
	if len(own) > 0 {
		fs = append(fs, finding{OK, strings.Join(own, ", ") + " in order", ""})
	}
	return combine(CheckShims, fs)
}

// libcudaSymbols checks the entry points every CUDA runtime takes from
// libcuda.so.1.
func (d *diag) libcudaSymbols(lb *lib) []finding {
	defs, err := lookupSymbols(lb.real, "cuInit", "cuGetProcAddress", "cuGetProcAddress_v2", "cuDriverGetVersion")
	if err != nil {
		return []finding{{Warn, fmt.Sprintf("%s: symbols unreadable (%v)", lb.realGuest, err), ""}}
	}
	have := map[string]bool{}
	for _, s := range defs {
		have[s.Name] = true
	}
	switch {
	case !have["cuInit"]:
		return []finding{{Fail, fmt.Sprintf("libcuda.so.1 (%s) defines no cuInit: not a CUDA driver library", lb.shown()),
			"put the NVIDIA driver's libcuda.so.1 first on the library path"}}
	case !have["cuGetProcAddress"] && !have["cuGetProcAddress_v2"]:
		return []finding{{Fail, fmt.Sprintf("libcuda.so.1 (%s) defines no cuGetProcAddress, through which the CUDA 12 and 13 runtimes take every driver function", lb.shown()),
			"use the driver's own libcuda.so.1, or give the shim cuGetProcAddress and cuGetProcAddress_v2"}}
	}
	return nil
}

// cudartSymbols checks that a libcudart defines every versioned symbol the
// process's objects import from it, as ld.so will when they are bound.
func (d *diag) cudartSymbols(lb *lib) []finding {
	refs := d.cudartRefs()[lb.soname]
	if len(refs) == 0 {
		return nil
	}
	names := map[string]bool{}
	for _, r := range refs {
		names[r.sym.Name] = true
	}
	list := slices.Sorted(maps.Keys(names))
	defs, err := lookupSymbols(lb.real, list...)
	if err != nil {
		return []finding{{Warn, fmt.Sprintf("%s: symbols unreadable (%v)", lb.realGuest, err), ""}}
	}
	satisfied := func(r ref) bool {
		for _, s := range defs {
			if s.Name != r.sym.Name {
				continue
			}
			// glibc's check_match: the version asked for, or an unversioned
			// definition that is not hidden.
			if r.sym.Version == "" || s.Version == r.sym.Version || s.Version == "" && !s.Hidden {
				return true
			}
		}
		return false
	}
	var missing []string
	users := map[string]bool{}
	seen := map[string]bool{}
	for _, r := range refs {
		if satisfied(r) {
			continue
		}
		users[path.Base(r.from.Path)] = true
		if k := r.sym.String(); !seen[k] {
			seen[k] = true
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	who := slices.Sorted(maps.Keys(users))
	major := ""
	if sm := cudartRE.FindStringSubmatch(lb.soname); sm != nil {
		major = sm[1]
	}
	return []finding{{Fail, fmt.Sprintf("%s (%s) lacks %d symbol(s) that %s import(s): %s", lb.soname, lb.shown(), len(missing), listNames(who, 2), listNames(missing, 3)),
		fmt.Sprintf("the program stops with \"undefined symbol\" when it calls them: put NVIDIA's libcudart.so.%s first on the library path (CUDA runtime wheel or toolkit), or complete the shim", major)}}
}

// symbolsOf opens an ELF file and reads the dynamic symbols keep selects.
func symbolsOf(path string, keep elfscan.SymbolFilter) ([]elfscan.Symbol, error) {
	f, err := elfscan.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Symbols(keep)
}

// lookupSymbols opens an ELF file and looks names up in its hash table.
func lookupSymbols(path string, names ...string) ([]elfscan.Symbol, error) {
	f, err := elfscan.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Lookup(names...)
}
