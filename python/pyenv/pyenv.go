// Package pyenv finds a Python environment's site-packages, its installed distributions and their files.
//
// The interpreter is asked once, without importing anything but the
// standard library, where its site-packages are; distributions are then
// read from their *.dist-info folders (METADATA for requirements, RECORD
// for files), never by importing them.
package pyenv

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cudadeps/cudadeps/internal/rootfs"
	"github.com/cudadeps/cudadeps/internal/workers"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// Env is one Python environment.
type Env struct {
	Executable  string   `json:"executable"`  // sys.executable
	Prefix      string   `json:"prefix"`      // sys.prefix
	BasePrefix  string   `json:"base_prefix"` // sys.base_prefix
	Version     string   `json:"version"`     // "3.12.3"
	Machine     string   `json:"machine"`     // platform.machine()
	SiteDirs    []string `json:"site_dirs"`   // site-packages directories, in sys.path order
	Markers     Markers  `json:"markers"`     // PEP 508 environment markers
	FromPython  bool     `json:"from_python"` // found by asking an interpreter
	Interpreter string   `json:"interpreter"` // the command that was run
	RealExec    string   `json:"real_executable,omitempty"`
	// UserSite is the user's site-packages directory (PEP 370), which may
	// not exist yet; UserSiteEnabled says whether the interpreter puts it
	// on sys.path (not in a virtual environment, nor with -s).
	UserSite        string `json:"user_site,omitempty"`
	UserSiteEnabled bool   `json:"user_site_enabled,omitempty"`
	// Inputs are the paths the interpreter's answer depends on (every
	// sys.path entry, existing or not, its .pth files, pyvenv.cfg, the
	// user site directory), for DiscoverCached.
	Inputs []string `json:"inputs,omitempty"`
	// Installation names, for an environment found in a root's files
	// (InRoot), the installation whose site directories these are: "python3.12
	// in /usr, Debian's layout", "venv /opt/venv of python3.12".
	Installation string `json:"installation,omitempty"`

	// ObjectsOnly reads each RECORD for the paths of the files that may be
	// ELF objects alone (Dist.Files; see MayBeObject), leaving Dist.Record
	// nil: a scan asks the owner of each object, never a file's digest or
	// size, and an environment lists tens of thousands of Python sources
	// and headers.
	ObjectsOnly bool `json:"-"`

	files files
	// read keeps the distributions read, by dist-info directory: finding
	// the target and resolving its requirements read the same ones.
	read *distMemo
}

type distMemo struct {
	mu    sync.Mutex
	dists map[string]*Dist
	errs  map[string]error
	// markers are the requirements' markers, each text parsed once.
	markers pymeta.SharedMarkers
}

// cachedDist reads the distribution of a dist-info directory once.
func (e *Env) cachedDist(di distInfo) (*Dist, error) {
	if e.read == nil {
		return e.readDist(di.dir, di.site)
	}
	m := e.read
	m.mu.Lock()
	d, ok := m.dists[di.dir]
	err := m.errs[di.dir]
	m.mu.Unlock()
	if ok || err != nil {
		return d, err
	}
	d, err = e.readDist(di.dir, di.site)
	m.mu.Lock()
	if err != nil {
		m.errs[di.dir] = err
	} else {
		m.dists[di.dir] = d
	}
	m.mu.Unlock()
	return d, err
}

// remember makes e keep the distributions it reads.
func (e *Env) remember() *Env {
	e.read = &distMemo{dists: map[string]*Dist{}, errs: map[string]error{}}
	return e
}

// Markers are the PEP 508 marker variables of an environment.
type Markers = pymeta.Environment

// EvalMarker evaluates a PEP 508 environment marker (the part of a
// Requires-Dist after ';') against an environment's marker variables, with
// no extra requested.
func EvalMarker(expr string, vars Markers) (bool, error) {
	m, err := pymeta.ParseMarker(expr)
	if err != nil {
		return false, err
	}
	return m.Evaluate(vars)
}

// probeScript prints what we need as JSON, importing only the standard
// library.
const probeScript = `
import json, os, platform, site, sys, sysconfig
dirs = []
for p in sys.path:
    if p and os.path.isdir(p) and (p.endswith("site-packages") or p.endswith("dist-packages")):
        dirs.append(os.path.abspath(p))
for key in ("purelib", "platlib"):
    p = sysconfig.get_paths().get(key)
    if p and os.path.isdir(p):
        dirs.append(os.path.abspath(p))
inputs = [os.path.abspath(p) for p in sys.path if p]
user_site, user_enabled = "", False
try:
    u = site.getusersitepackages()
    user_site, user_enabled = os.path.abspath(u), bool(site.ENABLE_USER_SITE)
    inputs.append(u)
    if site.ENABLE_USER_SITE and os.path.isdir(u):
        dirs.append(os.path.abspath(u))
except Exception:
    pass
for d in set(dirs + inputs):
    try:
        inputs += [os.path.join(d, n) for n in os.listdir(d) if n.endswith(".pth")]
    except OSError:
        pass
for d in (os.path.dirname(sys.executable), os.path.dirname(os.path.dirname(sys.executable))):
    inputs.append(os.path.join(d, "pyvenv.cfg"))
print(json.dumps({
    "inputs": inputs,
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "version": platform.python_version(),
    "machine": platform.machine(),
    "site_dirs": dirs,
    "user_site": user_site,
    "user_site_enabled": user_enabled,
    "markers": {
        "os_name": os.name,
        "sys_platform": sys.platform,
        "platform_machine": platform.machine(),
        "platform_python_implementation": platform.python_implementation(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "python_full_version": platform.python_version(),
        "implementation_name": sys.implementation.name,
    },
}))
`

// DefaultPython is the interpreter of the active environment: an activated
// virtualenv or conda environment, else python3 on PATH.
func DefaultPython() string {
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if d := os.Getenv(v); d != "" {
			for _, n := range []string{"bin/python3", "bin/python"} {
				p := filepath.Join(d, n)
				if _, err := os.Stat(p); err == nil {
					return p
				}
			}
		}
	}
	return "python3"
}

// Discover asks the interpreter python for its environment.
func Discover(ctx context.Context, python string) (*Env, error) {
	if python == "" {
		python = DefaultPython()
	}
	exe, err := exec.LookPath(python)
	if err != nil {
		return nil, fmt.Errorf("python interpreter %q not found (use --python to name one): %w", python, err)
	}
	probeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// No -I or -E: the environment (PYTHONPATH, user site) is the one the
	// import would see.
	cmd := exec.CommandContext(probeCtx, exe, "-c", probeScript)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && ctx.Err() != nil {
		// Killed because the caller gave up (Ctrl-C): say so, not "killed".
		return nil, fmt.Errorf("run %s: %w", exe, ctx.Err())
	}
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("run %s: %w: %s", exe, err, msg)
		}
		return nil, fmt.Errorf("run %s: %w (and it printed nothing on stderr)", exe, err)
	}
	var env Env
	if err := json.Unmarshal(out, &env); err != nil {
		return nil, fmt.Errorf("read what %s reported: %w", exe, err)
	}
	env.FromPython = true
	env.Interpreter = exe
	env.remember()
	env.SiteDirs = uniqueDirs(env.SiteDirs)
	if real, err := filepath.EvalSymlinks(env.Executable); err == nil {
		env.RealExec = real
	}
	return &env, nil
}

// FromSiteDir describes an environment known only by a site-packages
// directory (a foreign architecture's tree, an image being prepared): no
// interpreter is run, and markers are unknown. When root names the system
// the directory belongs to (its "/", "" for this host), the environment's
// files are read as that system sees them: links resolve inside root.
func FromSiteDir(dir, root string) (*Env, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r, err := rootfs.Open(root)
	if err != nil {
		return nil, err
	}
	env := &Env{SiteDirs: []string{abs}, Markers: Markers{}, files: files{root: r}}
	st, err := env.files.stat(abs)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	return env.remember(), nil
}

func uniqueDirs(dirs []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range dirs {
		key := d
		if r, err := filepath.EvalSymlinks(d); err == nil {
			key = r
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, d)
		}
	}
	return out
}

// Dist is one installed distribution.
type Dist struct {
	Name     string   `json:"name"`
	Version  string   `json:"version"`
	InfoDir  string   `json:"dist_info"` // the *.dist-info directory
	SiteDir  string   `json:"site_dir"`  // the directory RECORD paths are relative to
	Requires []string `json:"requires"`  // Requires-Dist that apply to this environment (names only)
	// Files are the absolute paths listed in RECORD, in its order (read
	// with Env.ObjectsOnly, those that may be ELF objects).
	Files []string `json:"-"`
	// Metadata is METADATA parsed; Record is RECORD parsed, in the order of
	// Files (nil when the environment was read with ObjectsOnly).
	Metadata *pymeta.Metadata     `json:"-"`
	Record   []pymeta.RecordEntry `json:"-"`

	files files
}

// distInfoDirs lists the *.dist-info directories of the site directories,
// in sys.path order, with the normalized project name each is for.
func (e *Env) distInfoDirs() []distInfo {
	var out []distInfo
	for _, site := range e.SiteDirs {
		entries, err := e.files.readDir(site)
		if err != nil {
			continue
		}
		for _, ent := range entries {
			n := ent.Name()
			if !ent.IsDir() || !strings.HasSuffix(n, ".dist-info") {
				continue
			}
			project, _, _ := strings.Cut(strings.TrimSuffix(n, ".dist-info"), "-")
			out = append(out, distInfo{name: pymeta.NormalizeName(project), dir: filepath.Join(site, n), site: site})
		}
	}
	return out
}

type distInfo struct{ name, dir, site string }

// Find locates an installed distribution by name ("torch", "cupy-cuda13x").
func (e *Env) Find(name string) (*Dist, error) {
	if di, ok := e.lookup(name); ok {
		return e.cachedDist(di)
	}
	return nil, fmt.Errorf("no installed distribution %q in %s", name, e.describe())
}

// lookup finds the dist-info directory of name, the first in sys.path
// order.
func (e *Env) lookup(name string) (distInfo, bool) {
	want := pymeta.NormalizeName(name)
	for _, di := range e.distInfoDirs() {
		if di.name == want {
			return di, true
		}
	}
	return distInfo{}, false
}

// describe names the environment and its site directories for messages.
func (e *Env) describe() string {
	dirs := strings.Join(e.SiteDirs, ", ")
	if len(e.SiteDirs) == 0 {
		dirs = "no site-packages directory"
	}
	switch {
	case e.Installation != "":
		return e.Installation + " (" + dirs + ")"
	case e.Interpreter != "":
		return "the environment of " + e.Interpreter + " (" + dirs + ")"
	}
	return dirs
}

// Installed reads every distribution of the environment, by normalized
// name; where two site directories hold one, the first in sys.path order
// wins, as for import. A dist-info that cannot be read is left out and
// named in the returned problems.
func (e *Env) Installed() (map[string]*Dist, []string) {
	var first []distInfo
	seen := map[string]bool{}
	for _, di := range e.distInfoDirs() {
		if !seen[di.name] {
			seen[di.name] = true
			first = append(first, di)
		}
	}
	// Read side by side, the largest RECORDs first: an environment's
	// RECORDs run to tens of thousands of lines, torch's alone to twelve
	// thousand, and started last it would be the one everything waits for.
	sizes := make([]int64, len(first))
	workers.Each(len(first), 0, func(i int) {
		if st, err := e.files.stat(filepath.Join(first[i].dir, "RECORD")); err == nil {
			sizes[i] = st.Size()
		}
	})
	order := make([]int, len(first))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sizes[b], sizes[a]) })
	dists := make([]*Dist, len(first))
	errs := make([]error, len(first))
	workers.Each(len(first), 0, func(k int) {
		i := order[k]
		dists[i], errs[i] = e.cachedDist(first[i])
	})
	out := map[string]*Dist{}
	var problems []string
	for i, di := range first {
		if errs[i] != nil {
			problems = append(problems, errs[i].Error())
			continue
		}
		out[di.name] = dists[i]
	}
	return out, problems
}

// Resolved is a target's transitive requirements with the installed
// distributions they name.
type Resolved struct {
	*pymeta.Resolution
	Dists    map[string]*Dist // every installed distribution, by normalized name
	Problems []string         // dist-info folders that could not be read
}

// Dist is the installed distribution of a dependency, or nil.
func (r *Resolved) Dist(name string) *Dist { return r.Dists[pymeta.NormalizeName(name)] }

// Resolve computes what target ("torch", "cuda-toolkit[cublas]") requires
// in this environment, following extras, with the specifiers that pin each
// requirement and whether the installed versions meet them. Markers that
// read a variable the environment does not know (no interpreter was asked)
// are taken to hold.
func (e *Env) Resolve(target string) (*Resolved, error) {
	dists, problems := e.Installed()
	metas := make(map[string]*pymeta.Metadata, len(dists))
	for n, d := range dists {
		metas[n] = d.Metadata
	}
	res, err := pymeta.Resolve(metas, target, e.Markers)
	if err != nil {
		return nil, fmt.Errorf("%w in %s", err, strings.Join(e.SiteDirs, ", "))
	}
	return &Resolved{Resolution: res, Dists: dists, Problems: problems}, nil
}

func (e *Env) readDist(infoDir, site string) (*Dist, error) {
	d := &Dist{InfoDir: infoDir, SiteDir: site, files: e.files}
	metaPath := filepath.Join(infoDir, "METADATA")
	// Read up to the headers' end: a description body (torch's runs to
	// tens of kilobytes) is never needed.
	mr, err := e.files.open(metaPath, maxMetadata)
	if err != nil {
		return nil, fmt.Errorf("read METADATA: %w", err)
	}
	var shared *pymeta.SharedMarkers
	if e.read != nil {
		shared = &e.read.markers
	}
	meta, err := pymeta.ParseMetadataSharing(mr, shared)
	mr.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", metaPath, err)
	}
	d.Metadata, d.Name, d.Version = meta, meta.Name, meta.Version
	seen := map[string]bool{}
	for _, req := range meta.RequiresDist {
		// Without an interpreter the markers are unknown: a requirement
		// counts unless what is known rules it out, better than inventing
		// a missing library.
		if ok, _ := req.Applies(e.Markers, nil); ok && !seen[req.Name] {
			seen[req.Name] = true
			d.Requires = append(d.Requires, req.Name)
		}
	}
	recPath := filepath.Join(infoDir, "RECORD")
	if e.ObjectsOnly {
		if err := e.readObjectPaths(d, recPath); err != nil {
			return nil, err
		}
		return d, nil
	}
	record, err := e.files.readFileString(recPath, maxRecord)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s has no RECORD (installed by a tool that keeps no file list): %w", infoDir, err)
	case err != nil:
		return nil, fmt.Errorf("read RECORD: %w", err)
	}
	d.Record, err = pymeta.ParseRecordString(record)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", recPath, err)
	}
	rel := make([]string, len(d.Record))
	for i, r := range d.Record {
		rel[i] = r.Path
	}
	d.Files = d.paths(rel)
	for i, r := range d.Record {
		// A plain path ends its absolute one: the entry keeps that tail
		// rather than a string of its own (an environment has tens of
		// thousands).
		if f := d.Files[i]; strings.HasSuffix(f, r.Path) && len(f) > len(r.Path) && f[len(f)-len(r.Path)-1] == '/' {
			d.Record[i].Path = f[len(f)-len(r.Path):]
		} else {
			// A piece of the RECORD's text would keep all of it.
			d.Record[i].Path = strings.Clone(r.Path)
		}
	}
	return d, nil
}

// readObjectPaths sets d.Files to the paths of d's RECORD that may name
// ELF objects (Env.ObjectsOnly), the RECORD read as a stream.
func (e *Env) readObjectPaths(d *Dist, recPath string) error {
	r, err := e.files.open(recPath, maxRecord)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s has no RECORD (installed by a tool that keeps no file list): %w", d.InfoDir, err)
	case err != nil:
		return fmt.Errorf("read RECORD: %w", err)
	}
	defer r.Close()
	var rel []string
	err = pymeta.EachRecordPath(r, func(p []byte) {
		if mayBeObjectName(p) {
			rel = append(rel, string(p))
		}
	})
	if err != nil {
		return fmt.Errorf("%s: %w", recPath, err)
	}
	d.Files = d.paths(rel)
	return nil
}

// paths are the absolute paths of RECORD paths. Those that are the site
// directory joined to a plain path share one string: an environment has
// tens of thousands, and one allocation each was most of its reading.
func (d *Dist) paths(record []string) []string {
	out := make([]string, len(record))
	plain := d.SiteDir != "" && !strings.HasSuffix(d.SiteDir, "/")
	size := 0
	ends := make([]int, len(record)) // -1: not plain
	for i, r := range record {
		if plain && isPlain(r) {
			size += len(d.SiteDir) + 1 + len(r)
		} else {
			ends[i] = -1
		}
	}
	var b strings.Builder
	b.Grow(size)
	for i, r := range record {
		if ends[i] == 0 {
			b.WriteString(d.SiteDir)
			b.WriteByte('/')
			b.WriteString(r)
			ends[i] = b.Len()
		} else {
			out[i] = d.path(r)
		}
	}
	all := b.String()
	start := 0
	for i, end := range ends {
		if end > 0 {
			out[i] = all[start:end]
			start = end
		}
	}
	return out
}

// MayBeObject reports whether the file at path may be an ELF object: every
// name but those of Python sources and bytecode, C and CUDA sources and
// headers, and text formats, which make up most of an environment.
func MayBeObject(path string) bool {
	base := path[strings.LastIndexByte(path, '/')+1:]
	dot := strings.LastIndexByte(base, '.')
	return dot <= 0 || !textExtension(base[dot+1:])
}

// mayBeObjectName is MayBeObject of a path's bytes, without a copy.
func mayBeObjectName(path []byte) bool {
	base := path[bytes.LastIndexByte(path, '/')+1:]
	dot := bytes.LastIndexByte(base, '.')
	return dot <= 0 || !textExtension(string(base[dot+1:]))
}

// textExtension reports the extensions of files that are never ELF
// objects (see MayBeObject).
func textExtension(ext string) bool {
	switch ext {
	case "py", "pyc", "pyi", "pyx", "pxd", "pxi", "typed",
		"h", "hh", "hpp", "hxx", "cuh", "inl", "c", "cc", "cpp", "cxx", "cu",
		"txt", "rst", "md", "cmake", "json", "yaml", "yml", "toml", "cfg", "ini", "csv", "html", "css", "js":
		return true
	}
	return false
}

// path is the absolute path of a RECORD path.
func (d *Dist) path(p string) string {
	if isPlain(p) && d.SiteDir != "" && !strings.HasSuffix(d.SiteDir, "/") {
		return d.SiteDir + "/" + p // what Join would make, without cleaning
	}
	p = filepath.FromSlash(p)
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.SiteDir, p)
	}
	return filepath.Clean(p)
}

// isPlain reports a relative slash-separated path that cleaning leaves as
// it is: no empty, "." or ".." element. Most RECORD paths are.
func isPlain(p string) bool {
	if p == "" || p[0] == '/' || p[len(p)-1] == '/' || strings.Contains(p, "//") {
		return false
	}
	if p[0] != '.' && !strings.Contains(p, "/.") {
		return true // no element can be "." or ".."
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if el := p[start:i]; el == "" || el == "." || el == ".." {
			return false
		}
		start = i + 1
	}
	return true
}
