// Package resolver runs scan → plan → fetch → activate → rescan until everything a target needs loads.
package resolver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/loader/bind"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/runtimeopen"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// Kind says what a target is.
type Kind string

// The kinds of target.
const (
	KindPython Kind = "python" // an installed distribution, by name
	KindDir    Kind = "dir"
	KindFile   Kind = "file"
	KindWheel  Kind = "wheel" // scanned and planned, never installed
)

// Target is what to make loadable.
type Target struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"` // the argument as given
	// For Python targets: the distribution and the Python environment
	// that holds it.
	Dist     *pyenv.Dist   `json:"dist,omitempty"`
	Python   *pyenv.Env    `json:"python,omitempty"`
	Requires []*pyenv.Dist `json:"-"`
	// Pins are the requirements that select the versions of the required
	// distributions, by normalized name.
	Pins   map[string]Pinned `json:"-"`
	Module string            `json:"module,omitempty"` // what verify imports
	// Path is the absolute path for file, directory and wheel targets.
	Path string `json:"path,omitempty"`

	// cache keeps what the interpreter said and the answers of the
	// symbol binding (TargetOptions.Cache).
	cache factcache.Dir
	// installed are the environment's distributions as the last
	// resolveRequirements read them; base is baseRequirements' answer
	// over them, made once.
	installed map[string]*pyenv.Dist
	base      *pymeta.Resolution
}

// baseRequirements are what the distribution requires without the extras
// counted because their distributions are installed (triton[tutorials]
// brings pandas), over the distributions the last resolveRequirements
// read: no second reading of the environment. nil when it cannot be told.
func (t *Target) baseRequirements() *pymeta.Resolution {
	if t.Kind != KindPython || t.Dist == nil || t.Python == nil || t.installed == nil {
		return nil
	}
	if t.base == nil {
		metas := make(map[string]*pymeta.Metadata, len(t.installed))
		for n, d := range t.installed {
			metas[n] = d.Metadata
		}
		res, err := pymeta.Resolve(metas, t.Dist.Name, t.Python.Markers)
		if err != nil {
			return nil
		}
		t.base = res
	}
	return t.base
}

// Pinned is a requirement on a distribution and who states it.
type Pinned struct {
	Requirement string // as written: "nvidia-cudnn-cu13==9.19.0.56"
	By          string // "torch 2.11.0"
	// Exact is the version an == specifier names, "" when none does.
	Exact string
}

// TargetOptions say how to find a Python distribution.
type TargetOptions struct {
	// Python is the interpreter to ask (default: the active environment's);
	// under Root, one inside the root is read, never run (findEnv).
	Python string
	// SiteDir, when set, reads distributions from this site-packages
	// directory without running an interpreter (a foreign architecture's
	// tree, an image being prepared).
	SiteDir string
	// Root is the system the target belongs to (--root; "" for this
	// host): SiteDir's files are read as that system sees them, and
	// without SiteDir the environment is the root's own (findEnv).
	Root string
	// Cache keeps what the interpreter said, and what binding the
	// target's symbols answered, while nothing it depends on changes (the
	// zero Dir: ask and bind every time).
	Cache factcache.Dir
}

// FindTarget decides what arg names: a wheel file, a directory, an ELF file,
// or else an installed Python distribution.
func FindTarget(ctx context.Context, arg string, opts TargetOptions) (*Target, error) {
	if st, err := os.Stat(arg); err == nil {
		abs, err := filepath.Abs(arg)
		if err != nil {
			return nil, err
		}
		switch {
		case st.IsDir():
			return &Target{Kind: KindDir, Name: arg, Path: abs}, nil
		case strings.HasSuffix(arg, ".whl"):
			return &Target{Kind: KindWheel, Name: arg, Path: abs}, nil
		default:
			if err := isELF(abs); err != nil {
				if errors.Is(err, elfscan.ErrNotELF) {
					return nil, fmt.Errorf("%s: not an ELF file, a directory, a wheel or a distribution name", arg)
				}
				return nil, err
			}
			return &Target{Kind: KindFile, Name: arg, Path: abs}, nil
		}
	}
	if strings.ContainsAny(arg, "/") {
		return nil, fmt.Errorf("%s: no such file or directory", arg)
	}
	env, err := findEnv(ctx, arg, opts)
	if err != nil {
		return nil, err
	}
	dist, err := env.Find(arg)
	if err != nil {
		return nil, err
	}
	t := &Target{Kind: KindPython, Name: arg, Dist: dist, Python: env, Pins: map[string]Pinned{}, cache: opts.Cache}
	if err := t.resolveRequirements(); err != nil {
		return nil, err
	}
	t.Module = importName(dist)
	return t, nil
}

// findEnv chooses the Python environment that holds the distribution
// name: the SiteDir given; under a Root other than "/", the root's own,
// read from its files (pyenv.InRoot), unless Python names an interpreter
// outside the root, which is asked as without a root (a program of the
// root is never run: it may be another architecture's); else the
// interpreter's.
func findEnv(ctx context.Context, name string, opts TargetOptions) (*pyenv.Env, error) {
	root := opts.Root
	if root != "" && filepath.Clean(root) == "/" {
		root = ""
	}
	switch {
	case opts.SiteDir != "":
		return pyenv.FromSiteDir(opts.SiteDir, root)
	case root != "" && (opts.Python == "" || pyenv.Holds(root, opts.Python)):
		return pyenv.InRoot(root, opts.Python, name)
	}
	return pyenv.DiscoverCached(ctx, opts.Python, opts.Cache)
}

// resolveRequirements finds what the distribution requires, transitively
// and through extras, and the requirements that pin each version. pip does
// not record which extras of the package itself were asked for
// (jax-cuda13-plugin[with-cuda]): an extra counts when a distribution it
// names is installed.
func (t *Target) resolveRequirements() error {
	res, err := t.Python.Resolve(t.Python.Spec(t.Dist))
	if err != nil {
		return err
	}
	t.installed = res.Dists
	for _, dep := range res.Dependencies {
		d := res.Dist(dep.Name)
		if d == nil {
			continue
		}
		t.Requires = append(t.Requires, d)
		for _, e := range dep.RequiredBy {
			p := Pinned{Requirement: e.Requirement.Name + e.Requirement.Specifier.String(), By: e.By + " " + e.ByVersion}
			for _, sp := range e.Requirement.Specifier {
				if sp.Op == "==" && !strings.Contains(sp.Version, "*") {
					p.Exact = sp.Version
				}
			}
			if old, ok := t.Pins[dep.Name]; !ok || (old.Exact == "" && p.Exact != "") {
				t.Pins[dep.Name] = p
			}
		}
	}
	return nil
}

// refreshRequirements reads the required distributions again: a round may
// have installed some.
func (t *Target) refreshRequirements() error {
	if t.Kind != KindPython || t.Dist == nil {
		return nil
	}
	t.Requires, t.Pins, t.installed, t.base = nil, map[string]Pinned{}, nil, nil
	return t.resolveRequirements()
}

// siteDirs are a Python target's site-packages directories (nil for other
// targets).
func (t *Target) siteDirs() []string {
	if t.Kind != KindPython || t.Python == nil {
		return nil
	}
	return t.Python.SiteDirs
}

// installSite is the site-packages directory declared distributions that
// are not installed are restored in: the target's own when this user may
// write it, else the user's site directory when the interpreter enables
// one, else "" (the activation script makes them found).
func (t *Target) installSite() string {
	if t.Dist == nil {
		return ""
	}
	if writable(t.Dist.SiteDir) {
		return t.Dist.SiteDir
	}
	if t.Python != nil && t.Python.UserSite != "" && t.Python.UserSiteEnabled {
		return t.Python.UserSite
	}
	return ""
}

// importName guesses the top-level module to import: top_level.txt when the
// distribution has one, else the package directory named like it.
func importName(d *pyenv.Dist) string {
	want := strings.ReplaceAll(pymeta.NormalizeName(d.Name), "-", "_")
	if data, err := os.ReadFile(filepath.Join(d.InfoDir, "top_level.txt")); err == nil {
		var first string
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "_") {
				continue
			}
			if line == want {
				return line
			}
			if first == "" {
				first = line
			}
		}
		if first != "" {
			return first
		}
	}
	for _, f := range d.Files {
		rel, err := filepath.Rel(d.SiteDir, f)
		if err != nil {
			continue
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) == 2 && parts[1] == "__init__.py" && strings.EqualFold(strings.ReplaceAll(parts[0], "-", "_"), want) {
			return parts[0]
		}
	}
	return want
}

// Scan computes what the loader would do for the target now, with what
// its objects open at run time when rt is set.
func (t *Target) Scan(ctx context.Context, l *ldso.Loader, mount string, rt *runtimeopen.Resolver) (*scan.Report, error) {
	switch t.Kind {
	case KindPython:
		return t.scanPython(ctx, l, rt)
	default:
		return scan.Run(ctx, l, []string{t.Path}, scan.Options{WheelMount: mount, RuntimeOpens: rt})
	}
}

// scanPython loads each shared object of the distribution the way an import
// does (scan.Importer): into the interpreter's process, after what the
// import of the distributions it requires, and of its own package, loads.
func (t *Target) scanPython(ctx context.Context, l *ldso.Loader, rt *runtimeopen.Resolver) (*scan.Report, error) {
	python := ""
	if t.Python.FromPython {
		python = t.Python.Executable
	}
	// What binding answered is kept by the stamps of the files it read:
	// a scan of files unchanged since reads no symbol table.
	kept := bind.LoadKept(t.cache, time.Now(), append([]string{t.Dist.InfoDir, python, l.Root()}, t.Python.SiteDirs...)...)
	binder := bind.NewWithPages(l.Pages()).Keeping(kept)
	// The libraries of the distributions it requires are read beside its
	// own objects: the imports load most of them, one after the other.
	var required []string
	for _, d := range t.Requires {
		required = append(required, d.Files...)
	}
	prefetched := make(chan struct{})
	go func() {
		defer close(prefetched)
		scan.ReadAhead(l, required)
	}()
	files := scan.LoadableFiles(l, t.Dist.Files)
	im := scan.NewImporter(l, t.Python, scan.ImportOptions{Python: python, RuntimeOpens: rt, Symbols: true, Binder: binder})
	roots, errs, err := im.ImportAll(ctx, files, 0)
	<-prefetched
	if err != nil {
		return nil, err
	}
	_ = kept.Save() // a cache that cannot be written only costs the next run the binding
	rep := scan.NewReport(roots)
	rep.Errors = errs
	return rep, nil
}

// isExtensionModule tells a Python extension module from a shared library
// by its name alone (a wheel's RECORD path).
func isExtensionModule(name string) bool { return scan.HasABITag(name) }

// Describe names the target for humans.
func (t *Target) Describe() string {
	switch t.Kind {
	case KindPython:
		if t.Python != nil && t.Python.Installation != "" {
			return fmt.Sprintf("%s %s (%s: the root's %s)", t.Dist.Name, t.Dist.Version, t.Dist.SiteDir, t.Python.Installation)
		}
		return fmt.Sprintf("%s %s (%s)", t.Dist.Name, t.Dist.Version, t.Dist.SiteDir)
	}
	return t.Path
}

// Key identifies the target in activation records.
func (t *Target) Key() string {
	if t.Kind == KindPython {
		return "python:" + pymeta.NormalizeName(t.Dist.Name) + "@" + t.Dist.SiteDir
	}
	return string(t.Kind) + ":" + t.Path
}

// isELF reports why the file at path is no ELF object, or nil.
func isELF(path string) error {
	_, err := elfscan.ReadInfo(path)
	return err
}
