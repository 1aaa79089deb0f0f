package catalog

import (
	"bytes"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

//go:embed distributions.yaml
var embeddedDistributions []byte

// Distribution is one of NVIDIA's Python distributions (a PyPI wheel) and
// the redist components whose libraries it carries.
type Distribution struct {
	Name       string   // PEP 503 normalized: nvidia-cudnn-cu13
	Components []string // catalog component names: [cudnn]
	CUDA       int      // the CUDA major it is built for; 0: not tied to one (NVPL)
	// LibDir is where its shared libraries install, relative to
	// site-packages: nvidia/cu13/lib, nvidia/cudnn/lib, nvpl/lib.
	LibDir string
	// VersionRule says how the wheel's version corresponds to the
	// component's version in NVIDIA's manifests: VersionExact or VersionPrefix.
	VersionRule string
	Source      string
}

// How a wheel's version corresponds to its component's.
const (
	VersionExact  = "exact"  // nvidia-cudnn-cu13 9.19.0.56 <-> cudnn 9.19.0.56
	VersionPrefix = "prefix" // nvidia-cusparselt-cu13 0.8.0 <-> libcusparse_lt 0.8.0.4
)

// MatchesVersion reports whether a component version from a manifest is
// the one a wheel of version wheel carries.
func (d *Distribution) MatchesVersion(wheel, component string) bool {
	switch d.VersionRule {
	case VersionExact:
		return dotted.Compare(wheel, component) == 0
	case VersionPrefix:
		return dotted.Compare(wheel, component) == 0 || strings.HasPrefix(component, wheel+".")
	}
	return false
}

// Distributions is the curated table of NVIDIA's Python distributions.
type Distributions struct {
	byName map[string]*Distribution
	// ToolkitName is the meta-distribution whose extras pin toolkit wheels (cuda-toolkit).
	ToolkitName string
	// ToolkitExtras maps each of its extras to the distribution it pins: cublas → nvidia-cublas.
	ToolkitExtras map[string]string
}

type distributionsDoc struct {
	Format        int                         `yaml:"format"`
	Distributions map[string]*distributionDoc `yaml:"distributions"`
	Toolkit       struct {
		Name   string            `yaml:"name"`
		Extras map[string]string `yaml:"extras"`
		Source string            `yaml:"source"`
	} `yaml:"toolkit"`
}

type distributionDoc struct {
	Components []string `yaml:"components"`
	CUDA       int      `yaml:"cuda"`
	LibDir     string   `yaml:"lib_dir"`
	Version    string   `yaml:"version"`
	Source     string   `yaml:"source"`
}

// EmbeddedDistributions returns the table built into the binary.
func EmbeddedDistributions() (*Distributions, error) {
	return parseDistributions(embeddedDistributions, "catalog/distributions.yaml")
}

// parseDistributions reads a distribution table strictly.
func parseDistributions(data []byte, name string) (*Distributions, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc distributionsDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, yamlError(name, err)
	}
	if doc.Format != formatVersion {
		return nil, fmt.Errorf("%s: format must be %d (got %d)", name, formatVersion, doc.Format)
	}
	t := &Distributions{byName: map[string]*Distribution{}, ToolkitName: doc.Toolkit.Name, ToolkitExtras: doc.Toolkit.Extras}
	for n, d := range doc.Distributions {
		if d == nil || pymeta.NormalizeName(n) != n {
			return nil, fmt.Errorf("%s: distribution %q: empty, or not a normalized name", name, n)
		}
		if strings.TrimSpace(d.Source) == "" {
			return nil, fmt.Errorf("%s: distribution %s: no source", name, n)
		}
		if len(d.Components) == 0 || slices.ContainsFunc(d.Components, func(c string) bool { return !nameRE.MatchString(c) }) {
			return nil, fmt.Errorf("%s: distribution %s: components %v", name, n, d.Components)
		}
		if !pathRE.MatchString(d.LibDir) || hasDotSegment(d.LibDir) {
			return nil, fmt.Errorf("%s: distribution %s: lib_dir %q is not a relative path", name, n, d.LibDir)
		}
		if d.Version != VersionExact && d.Version != VersionPrefix {
			return nil, fmt.Errorf("%s: distribution %s: version must be %s or %s", name, n, VersionExact, VersionPrefix)
		}
		if d.CUDA < 0 {
			return nil, fmt.Errorf("%s: distribution %s: cuda %d", name, n, d.CUDA)
		}
		t.byName[n] = &Distribution{Name: n, Components: d.Components, CUDA: d.CUDA, LibDir: d.LibDir, VersionRule: d.Version, Source: d.Source}
	}
	if t.ToolkitName != "" && strings.TrimSpace(doc.Toolkit.Source) == "" {
		return nil, fmt.Errorf("%s: toolkit: no source", name)
	}
	for extra, dist := range t.ToolkitExtras {
		if _, ok := t.byName[dist]; !ok {
			return nil, fmt.Errorf("%s: toolkit extra %s names %s, which is not in the table", name, extra, dist)
		}
	}
	return t, nil
}

// Lookup returns the distribution called name (any spelling PEP 503 accepts).
func (t *Distributions) Lookup(name string) (*Distribution, bool) {
	d, ok := t.byName[pymeta.NormalizeName(name)]
	return d, ok
}

// all returns every distribution, sorted by name.
func (t *Distributions) all() []*Distribution {
	return slices.SortedFunc(maps.Values(t.byName), func(a, b *Distribution) int { return strings.Compare(a.Name, b.Name) })
}

// ForComponent lists the distributions that carry component for CUDA
// major cuda (those not tied to a CUDA major always qualify), sorted.
func (t *Distributions) ForComponent(component string, cuda int) []string {
	var out []string
	for _, d := range t.all() {
		if slices.Contains(d.Components, component) && (d.CUDA == 0 || d.CUDA == cuda) {
			out = append(out, d.Name)
		}
	}
	return out
}
