// Package pyenv finds a Python environment's site-packages, its installed distributions and their files.
//
// The interpreter is asked once, without importing anything but the
// standard library, where its site-packages are; distributions are then
// read from their *.dist-info folders (METADATA for requirements, RECORD
// for files), never by importing them.
package pyenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
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
}

// Markers are the PEP 508 marker variables of an environment.
type Markers map[string]string

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
try:
    u = site.getusersitepackages()
    if site.ENABLE_USER_SITE and os.path.isdir(u):
        dirs.append(os.path.abspath(u))
except Exception:
    pass
print(json.dumps({
    "executable": sys.executable,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "version": platform.python_version(),
    "machine": platform.machine(),
    "site_dirs": dirs,
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
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// No -I or -E: the environment (PYTHONPATH, user site) is the one the
	// import would see.
	cmd := exec.CommandContext(ctx, exe, "-c", probeScript)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
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
	env.SiteDirs = uniqueDirs(env.SiteDirs)
	if real, err := filepath.EvalSymlinks(env.Executable); err == nil {
		env.RealExec = real
	}
	return &env, nil
}

// FromSiteDir describes an environment known only by a site-packages
// directory (a foreign architecture's tree, an image being prepared): no
// interpreter is run, and markers are unknown.
func FromSiteDir(dir string) (*Env, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	return &Env{SiteDirs: []string{abs}, Markers: Markers{}}, nil
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
	// Files are the absolute paths listed in RECORD, in its order.
	Files []string `json:"-"`
}

// Normalize is the PEP 503 normalised form of a project name.
func Normalize(name string) string {
	return strings.ToLower(normRE.ReplaceAllString(name, "-"))
}

var normRE = regexp.MustCompile(`[-_.]+`)

// Find locates an installed distribution by name ("torch", "cupy-cuda13x").
func (e *Env) Find(name string) (*Dist, error) {
	want := Normalize(name)
	for _, site := range e.SiteDirs {
		entries, err := os.ReadDir(site)
		if err != nil {
			continue
		}
		for _, ent := range entries {
			n := ent.Name()
			if !ent.IsDir() || !strings.HasSuffix(n, ".dist-info") {
				continue
			}
			base := strings.TrimSuffix(n, ".dist-info")
			project, _, _ := strings.Cut(base, "-")
			if Normalize(project) != want {
				continue
			}
			return readDist(filepath.Join(site, n), site, e.Markers)
		}
	}
	return nil, fmt.Errorf("no installed distribution %q in %s", name, strings.Join(e.SiteDirs, ", "))
}

// Closure returns the distributions that dist requires, transitively, that
// are installed (a requirement that is not installed is skipped: pip would
// have said so).
func (e *Env) Closure(dist *Dist) []*Dist {
	var out []*Dist
	seen := map[string]bool{Normalize(dist.Name): true}
	queue := append([]string(nil), dist.Requires...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		n := Normalize(name)
		if seen[n] {
			continue
		}
		seen[n] = true
		d, err := e.Find(name)
		if err != nil {
			continue
		}
		out = append(out, d)
		queue = append(queue, d.Requires...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func readDist(infoDir, site string, markers Markers) (*Dist, error) {
	d := &Dist{InfoDir: infoDir, SiteDir: site}
	meta, err := os.ReadFile(filepath.Join(infoDir, "METADATA"))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(infoDir, "METADATA"), err)
	}
	for _, h := range parseHeaders(meta) {
		switch strings.ToLower(h[0]) {
		case "name":
			d.Name = h[1]
		case "version":
			d.Version = h[1]
		case "requires-dist":
			req, marker, _ := strings.Cut(h[1], ";")
			if marker != "" {
				ok, err := EvalMarker(marker, markers)
				if err != nil || !ok {
					// A marker we cannot evaluate without an interpreter
					// counts as met: better to consider a library loaded
					// than to invent a missing one.
					if err == nil || len(markers) > 0 {
						continue
					}
				}
			}
			if name := requirementName(req); name != "" {
				d.Requires = append(d.Requires, name)
			}
		}
	}
	rec, err := os.Open(filepath.Join(infoDir, "RECORD"))
	if err != nil {
		return nil, fmt.Errorf("%s has no RECORD (installed by a tool that keeps no file list): %w", infoDir, err)
	}
	defer rec.Close()
	r := csv.NewReader(bufio.NewReader(rec))
	r.FieldsPerRecord = -1
	r.LazyQuotes = true
	for {
		row, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Join(infoDir, "RECORD"), err)
		}
		if len(row) == 0 || row[0] == "" {
			continue
		}
		p := row[0]
		if !filepath.IsAbs(p) {
			p = filepath.Join(site, p)
		}
		d.Files = append(d.Files, filepath.Clean(p))
	}
	return d, nil
}

// parseHeaders reads the RFC 822 style headers of METADATA (up to the body).
func parseHeaders(data []byte) [][2]string {
	var out [][2]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		if (line[0] == ' ' || line[0] == '\t') && len(out) > 0 {
			out[len(out)-1][1] += " " + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return out
}

var reqNameRE = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)`)

func requirementName(req string) string {
	m := reqNameRE.FindStringSubmatch(req)
	if m == nil {
		return ""
	}
	return m[1]
}
