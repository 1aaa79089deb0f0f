package doctor

import (
	"context"
	"debug/elf"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// model is what the project's loader model says about this host: the
// process that runs the target (or a plain program), and where it finds the
// driver's libraries.
type model struct {
	err     string // why there is no model
	loader  *ldso.Loader
	from    string // host path of the main program
	proc    *ldso.Process
	result  *ldso.Result
	libcuda *lib
	nvml    *lib
	cudarts []*lib // every libcudart of the process
}

// lib is one library as the loader would load it.
type lib struct {
	soname string
	search *ldso.Search
	obj    *ldso.Object // what answers to soname (already loaded or found)
	loaded bool         // it was already in the process
	// real is the file behind the links, on this machine; realGuest the same
	// as the loader sees it.
	real, realGuest string
}

func (l *lib) found() bool { return l != nil && l.obj != nil }

// how tells by which rule the loader found it.
func (l *lib) how() string {
	if l.loaded {
		return "already loaded"
	}
	return viaText(l.obj)
}

func viaText(o *ldso.Object) string {
	switch o.Via {
	case ldso.ViaLDLibraryPath:
		return "LD_LIBRARY_PATH"
	case ldso.ViaCache:
		return "/etc/ld.so.cache"
	case ldso.ViaDefault:
		return "default directory"
	case ldso.ViaPreload, ldso.ViaRPath, ldso.ViaRunPath:
		if o.From != "" {
			return o.From // "RPATH of /x/liba.so ($ORIGIN/../lib)"
		}
	}
	if o.From != "" {
		return o.From
	}
	return string(o.Via)
}

// shown writes "path → real" when the path is a link to another name.
func (l *lib) shown() string {
	if path.Clean(l.obj.Path) == l.realGuest || l.realGuest == "" {
		return l.obj.Path
	}
	return l.obj.Path + " → " + l.realGuest
}

// buildModel models the process that would run the target (or a plain
// program) and finds the driver's libraries as its loader would.
func buildModel(ctx context.Context, d *diag) *model {
	m := &model{}
	l, err := ldso.New(ctx, ldso.Options{
		Root:          d.sys.Root,
		LDLibraryPath: d.opts.LDLibraryPath,
		Preload:       d.opts.Preload,
		PreloadSet:    d.opts.PreloadSet,
		LookupEnv:     d.sys.LookupEnv,
	})
	if err != nil {
		m.err = err.Error()
		return m
	}
	m.loader = l
	mainIsTarget := m.startProcess(ctx, d)
	d.log.Debug("loader model", "program", m.from, "root", d.sys.Root)
	m.loadTarget(ctx, d, mainIsTarget)
	m.result = m.proc.Result()
	m.findDriverLibraries()
	return m
}

// startProcess starts the process whose loader is modelled: the target
// when it is a program, else the program that would load it (python3),
// else the first object of the target that loads, else a plain program of
// this machine. It returns the target object that is the main program.
func (m *model) startProcess(ctx context.Context, d *diag) *targetObject {
	var mains []string
	var mainIsTarget *targetObject
	if t := d.target; t != nil && len(t.objects) == 1 && isProgram(t.objects[0].info) {
		mains = []string{t.objects[0].host}
		mainIsTarget = t.objects[0]
	} else {
		mains = d.programCandidates()
	}
	var tried []string
	for _, cand := range mains {
		p, err := m.loader.Start(ctx, cand, ldso.AsExecuted)
		if err == nil {
			m.proc, m.from = p, cand
			return mainIsTarget
		}
		tried = append(tried, err.Error())
	}
	if d.target != nil {
		for _, o := range d.target.objects {
			p, err := m.loader.Start(ctx, o.host, ldso.AsListed)
			if err == nil {
				m.proc, m.from = p, o.host
				return o
			}
			tried = append(tried, err.Error())
		}
	}
	// No program to stand for: a plain one of this machine, without search
	// paths of its own.
	d.log.Debug("modelling a plain program", "tried", tried)
	m.proc = m.loader.StartEmpty(ctx, hostLike())
	return nil
}

// loadTarget dlopens the target's libraries into the process.
func (m *model) loadTarget(ctx context.Context, d *diag, main *targetObject) {
	if d.target == nil {
		return
	}
	for _, o := range d.target.objects {
		if o == main || isProgram(o.info) {
			continue // programs are not dlopen'ed
		}
		if _, err := m.proc.Dlopen(ctx, o.host); err != nil {
			d.log.Warn("the loader model cannot load a target object; its needs are left out", "object", o.rel, "err", err)
		}
	}
}

// findDriverLibraries finds libcuda and NVML as libcudart, the library
// that dlopens libcuda.so.1 on behalf of CUDA programs, would: its DT_RPATH
// chain is the one searched.
func (m *model) findDriverLibraries() {
	from := m.proc.Main()
	for _, o := range m.result.Objects {
		if o.Found() && isCudart(m.result, o) {
			lb := &lib{soname: cudartName(m.result, o), obj: o, loaded: true}
			m.resolve(lb)
			m.cudarts = append(m.cudarts, lb)
			if from == m.proc.Main() {
				from = o
			}
		}
	}
	m.libcuda = m.find("libcuda.so.1", from)
	m.nvml = m.find("libnvidia-ml.so.1", from)
}

// hostLike describes a program of the machine doctor runs on.
func hostLike() *elfscan.Info {
	in := &elfscan.Info{Class: elf.ELFCLASS64, Data: elf.ELFDATA2LSB}
	switch runtime.GOARCH {
	case "amd64":
		in.Machine = elf.EM_X86_64
	case "arm64":
		in.Machine = elf.EM_AARCH64
	case "ppc64le":
		in.Machine = elf.EM_PPC64
	case "riscv64":
		in.Machine = elf.EM_RISCV
	case "s390x":
		in.Machine, in.Data = elf.EM_S390, elf.ELFDATA2MSB
	}
	return in
}

// programCandidates lists programs whose loader view stands for "a CUDA
// program on this host": the given one, python3 on PATH, then a shell.
func (d *diag) programCandidates() []string {
	if d.opts.From != "" {
		return []string{d.opts.From}
	}
	var out []string
	if pathEnv, ok := d.sys.LookupEnv("PATH"); ok {
		for _, dir := range filepath.SplitList(pathEnv) {
			if dir != "" && filepath.IsAbs(dir) {
				out = append(out, d.sys.root.Path(filepath.Join(dir, "python3")))
			}
		}
	}
	for _, p := range []string{"/usr/bin/python3", "/bin/sh", "/usr/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/env"} {
		out = append(out, d.sys.root.Path(p))
	}
	return out
}

func (m *model) find(name string, from *ldso.Object) *lib {
	s := m.proc.Find(name, from)
	lb := &lib{soname: name, search: s}
	switch {
	case s.Loaded != nil:
		lb.obj, lb.loaded = s.Loaded, true
	case s.Found != nil:
		lb.obj = s.Found
	default:
		return lb
	}
	m.resolve(lb)
	return lb
}

// resolve follows the links behind the object's path.
func (m *model) resolve(lb *lib) {
	host := lb.obj.HostPath
	if host == "" {
		return
	}
	real, err := filepath.EvalSymlinks(host)
	if err != nil {
		real = host
	}
	lb.real = real
	lb.realGuest = m.loader.GuestPath(real)
}

// tried summarises a failed search: each rule the loader went through, in
// order, with its entries when they are few.
func (l *lib) tried() string {
	type rule struct {
		source  string
		entries []string
	}
	var rules []*rule
	index := map[string]*rule{}
	for _, st := range l.search.Steps {
		r, ok := index[st.Source]
		if !ok {
			r = &rule{source: st.Source}
			index[st.Source] = r
			rules = append(rules, r)
		}
		if e := strings.TrimSuffix(st.Entry, "/"); e != "" && !slices.Contains(r.entries, e) {
			r.entries = append(r.entries, e)
		}
	}
	var parts []string
	for _, r := range rules {
		switch {
		case len(r.entries) == 0:
			parts = append(parts, r.source)
		case len(r.entries) <= 4:
			parts = append(parts, r.source+" "+strings.Join(r.entries, ":"))
		default:
			parts = append(parts, fmt.Sprintf("%s (%d entries)", r.source, len(r.entries)))
		}
	}
	return strings.Join(parts, ", ")
}

var cudartRE = regexp.MustCompile(`^libcudart(?:-[0-9a-f]+)?\.so\.(\d+)`)

func isCudart(r *ldso.Result, o *ldso.Object) bool {
	for _, n := range objectNames(r, o) {
		if cudartRE.MatchString(n) {
			return true
		}
	}
	return false
}

// cudartName is the libcudart soname an object was loaded under: the
// name it was needed by, else its own soname.
func cudartName(r *ldso.Result, o *ldso.Object) string {
	for _, n := range objectNames(r, o) {
		if cudartRE.MatchString(n) {
			return n
		}
	}
	return o.Name
}

func objectNames(r *ldso.Result, o *ldso.Object) []string {
	names := append([]string{path.Base(o.Name)}, r.Names(o)...)
	if o.Info != nil && o.Info.Soname != "" {
		names = append(names, o.Info.Soname)
	}
	return names
}

// targetMajor is the CUDA major the target needs: the libcudart soname in
// its closure, else the sonames it needs (libcublas.so.13, ...); 0 when
// it needs none. Where several majors appear the newest counts.
func (d *diag) targetMajor() int {
	maj, _, _ := d.targetCUDA()
	return maj
}

// targetCUDA returns the major, the minor when a libcudart's file name
// tells it (libcudart.so.12.8.90; else -1), and the evidence.
func (d *diag) targetCUDA() (major, minor int, why string) {
	minor = -1
	best := func(names []string, re *regexp.Regexp) (int, string) {
		m, w := 0, ""
		for _, n := range names {
			if sm := re.FindStringSubmatch(path.Base(n)); sm != nil {
				v, _ := strconv.Atoi(sm[len(sm)-1])
				if v > m {
					m, w = v, path.Base(n)
				}
			}
		}
		return m, w
	}
	if r := d.model.result; r != nil {
		var names []string
		for _, o := range r.Objects {
			names = append(names, objectNames(r, o)...)
		}
		if m, w := best(names, cudartRE); m > 0 {
			major, why = m, w+" in its closure"
			for _, c := range d.model.cudarts {
				if maj, min, ok := cudartFileVersion(c.realGuest); ok && maj == major {
					minor = min
				}
			}
			if minor < 0 {
				if maj, min, ok := d.packageCUDA(); ok && maj == major {
					minor, why = min, why+"; version.py says "+fmt.Sprintf("%d.%d", maj, min)
				}
			}
			return major, minor, why
		}
	}
	var needed []string
	for _, o := range d.target.objects {
		needed = append(needed, o.info.Needed...)
	}
	if r := d.model.result; r != nil {
		for _, o := range r.Objects {
			if o.Info != nil {
				needed = append(needed, o.Info.Needed...)
			}
		}
	}
	m, w := 0, ""
	for _, n := range needed {
		if v, ok := catalog.CUDAMajorHint(path.Base(n)); ok && v > m {
			m, w = v, path.Base(n)
		}
	}
	if m > 0 {
		return m, minor, "it needs " + w
	}
	return 0, minor, ""
}

// versionPyRE reads the CUDA version a package records of its build, as
// torch's version.py does (cuda: Optional[str] = '13.0').
var versionPyRE = regexp.MustCompile(`(?m)^cuda\s*(?::[^=\n]*)?=\s*['"](\d+)\.(\d+)`)

// packageCUDA reads version.py at the top of a target directory, or the
// PACKAGE/version.py of a distribution named PACKAGE.
func (d *diag) packageCUDA() (major, minor int, ok bool) {
	if d.target == nil {
		return 0, 0, false
	}
	var file string
	switch {
	case d.target.isDir:
		file = filepath.Join(d.target.path, "version.py")
	case len(d.target.files) > 0:
		pkg := strings.ReplaceAll(strings.ToLower(d.target.name), "-", "_")
		for _, f := range d.target.files {
			if filepath.Base(f) == "version.py" && filepath.Base(filepath.Dir(f)) == pkg {
				file = f
				break
			}
		}
	}
	if file == "" {
		return 0, 0, false
	}
	data, err := regfile.Read(file, 1<<20)
	if err != nil {
		return 0, 0, false
	}
	m := versionPyRE.FindSubmatch(data)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(string(m[1]))
	minor, _ = strconv.Atoi(string(m[2]))
	return major, minor, true
}

var cudartFileRE = regexp.MustCompile(`libcudart\.so\.(\d+)\.(\d+)\.\d+$`)

func cudartFileVersion(p string) (int, int, bool) {
	m := cudartFileRE.FindStringSubmatch(p)
	if m == nil {
		return 0, 0, false
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	return a, b, true
}

// libcudaFileRE reads the driver version from the name of the driver's
// libcuda (libcuda.so.580.95.05); Jetson's and WSL's libcuda.so.1.1 say
// nothing.
var libcudaFileRE = regexp.MustCompile(`^libcuda\.so\.(\d{3,}\.\d+(?:\.\d+)?)$`)

func libcudaFileVersion(p string) (version, bool) {
	m := libcudaFileRE.FindStringSubmatch(path.Base(p))
	if m == nil {
		return version{}, false
	}
	return parseVersion(m[1])
}

// isStub reports a path inside a CUDA toolkit's stubs directory.
func isStub(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == "stubs" {
			return true
		}
	}
	return false
}

// isCompat reports the forward-compatibility libcuda of the cuda-compat
// package (/usr/local/cuda-13.0/compat/libcuda.so.*).
func isCompat(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == "compat" {
			return true
		}
	}
	return false
}

// isProgram reports an executable, which dlopen refuses: ET_EXEC, or a
// position-independent executable (DF_1_PIE).
func isProgram(in *elfscan.Info) bool {
	return in.Type == elf.ET_EXEC || in.Flags1&elf.DF_1_PIE != 0
}
