// Package catalog knows which NVIDIA archive provides a soname for a platform and CUDA major.
package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/platform"
)

// formatVersion is the schema version this package reads and writes.
const formatVersion = 1

// Pos says where an entry was defined, for messages.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// Catalog is a loaded, checked set of products (with their base URL),
// driver sonames that are never downloaded, and components (NVIDIA's
// redistrib keys such as libcudss) whose releases list one archive per
// platform and CUDA variant with the sonames inside it. It is not modified
// after loading and is safe for concurrent use.
type Catalog struct {
	products   map[string]*Product
	drivers    map[string]*Driver
	components map[string]*Component
	mirror     string // "" or a URL ending in "/"
}

// Product is an NVIDIA product line with one redist base URL (cuda, cudss, nvpl…).
type Product struct {
	Name    string
	Title   string // for people: "CUDA", "cuDSS", "NVPL"
	BaseURL string // ends in "/"; empty for products the catalog has no archive of
	Pos     Pos
}

// DisplayName is the title, or the name when there is none.
func (p *Product) DisplayName() string {
	if p.Title != "" {
		return p.Title
	}
	return p.Name
}

// Driver is a library that comes with the NVIDIA driver and is never downloaded.
type Driver struct {
	Soname string
	Advice string
	Pos    Pos
}

// Component is one NVIDIA redistributable component (a manifest key such as libcudss).
type Component struct {
	Name    string
	Product string
	Title   string // NVIDIA's name for it: "NVIDIA cuDSS library"
	License string
	// Sonames are all the sonames the component is known to provide in any
	// version, including versions the catalog has no archive of; they let a
	// miss be explained ("part of nccl, but no archive…").
	Sonames  []string
	Releases []*Release // newest first
	Pos      Pos
}

// Release is one version of a component.
type Release struct {
	Version string // the component's own version: 0.8.0.10
	Label   string // the manifest's release_label: 0.8.0
	Date    string // the manifest's release_date
	// CUDA is the CUDA major all archives of this release are built for when
	// the release belongs to a CUDA toolkit; 0 when a cuda_variant says it
	// per archive or the release is not tied to CUDA.
	CUDA     int
	Archives []*Archive
	Pos      Pos
}

// Archive is one downloadable file of a release.
type Archive struct {
	Platform     string
	CUDAVariant  string // "cuda12", "cuda13" or ""
	RelativePath string // below the product's base URL (or the mirror)
	SHA256       string
	Size         int64
	Sonames      []string // what the archive provides
	Pos          Pos
}

// CUDAMajor is the CUDA major the archive is built for (0: not tied to one).
func (a *Archive) CUDAMajor(r *Release) int {
	if n, ok := variantMajor(a.CUDAVariant); ok {
		return n
	}
	return r.CUDA
}

func variantMajor(v string) (int, bool) {
	s, ok := strings.CutPrefix(v, "cuda")
	// A variant may name a minor too (cuda13.1); its major decides.
	s, _, _ = strings.Cut(s, ".")
	if !ok || s == "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// LoadOptions choose what Load layers on the embedded default catalog.
type LoadOptions struct {
	// UserLayer is the catalog file `catalog update` writes (UserLayerFile),
	// layered over the embedded default before Extra; a missing file is no
	// layer.
	UserLayer string
	// Extra are catalog files layered over the embedded default in order;
	// a later file wins (see Merge).
	Extra []string
	// Mirror, when set, replaces every product's base URL: archives are
	// fetched from Mirror + relative path (https://, http:// or file:///).
	Mirror string
}

// DefaultName names the embedded catalog in messages.
const DefaultName = "catalog.yaml (embedded)"

// Load returns the embedded default catalog with opts.Extra layered on top
// and the mirror applied, checked as a whole. The embedded catalog comes
// compiled into the binary (compiled.go, which TestCompiledCatalog holds
// equal to Parse of catalog.yaml): parsing its YAML cost 30 ms.
func Load(ctx context.Context, opts LoadOptions) (*Catalog, error) {
	c := compiledCatalog()
	extra := opts.Extra
	if opts.UserLayer != "" {
		if _, err := os.Stat(opts.UserLayer); err == nil {
			extra = append([]string{opts.UserLayer}, extra...)
		} else if !regfile.Absent(err) {
			return nil, fmt.Errorf("user catalog layer: %w", err)
		}
	}
	for _, path := range extra {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read catalog: %w", err)
		}
		extra, err := parseUnchecked(data, path)
		if err != nil {
			return nil, err
		}
		c.merge(extra)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if opts.Mirror != "" {
		m, err := NormalizeMirror(opts.Mirror)
		if err != nil {
			return nil, err
		}
		c.mirror = m
	}
	return c, nil
}

// Parse reads one catalog file strictly: unknown keys, wrong types, bad
// sha256 or sizes, unknown platforms, duplicates and dangling product names
// are errors that carry name and line. The error is a Problems: every
// problem of the file.
func Parse(data []byte, name string) (*Catalog, error) {
	c, err := parseUnchecked(data, name)
	if c == nil {
		return nil, err
	}
	if err := joinProblems(name, err, c.check()); err != nil {
		return nil, err
	}
	return c, nil
}

// ValidateLayer reads a catalog file meant to be layered over base and
// returns it with every problem it has: those of the file alone, and those
// that base with the file's sound entries on top shows. The catalog is nil
// when there is any problem; the error is then a Problems.
func ValidateLayer(base *Catalog, data []byte, name string) (*Catalog, error) {
	layer, err := parseUnchecked(data, name)
	if layer == nil {
		return nil, err
	}
	out := base.clone()
	out.merge(layer.clone())
	if err := joinProblems(name, err, out.check()); err != nil {
		return nil, err
	}
	return layer, nil
}

// joinProblems puts the problems of several errors (each nil, a Problems,
// or one problem) into one Problems, those of file first, by line; nil
// when there are none.
func joinProblems(file string, errs ...error) error {
	var all Problems
	for _, err := range errs {
		var ps Problems
		switch {
		case err == nil:
		case errors.As(err, &ps):
			all = append(all, ps...)
		default:
			all = append(all, err)
		}
	}
	slices.SortStableFunc(all, func(a, b error) int {
		pa, pb := problemPos(a, file), problemPos(b, file)
		if (pa.File == file) != (pb.File == file) {
			if pa.File == file {
				return -1
			}
			return 1
		}
		return cmp.Compare(pa.Line, pb.Line)
	})
	return all.orNil()
}

// problemPos is where a problem is; a problem without a line sorts first.
func problemPos(err error, file string) Pos {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe.Pos
	}
	return Pos{File: file}
}

// Layer returns base with each layer merged on top, in order, and checks
// the result. base and layers are not changed.
func Layer(base *Catalog, layers ...*Catalog) (*Catalog, error) {
	out := base.clone()
	for _, l := range layers {
		out.merge(l.clone())
	}
	if err := out.check(); err != nil {
		return nil, err
	}
	return out, nil
}

// merge puts top over c. Products and drivers are replaced by name.
// Components merge: non-empty fields of top win, sonames are united, and a
// release of top replaces the release of the same version.
func (c *Catalog) merge(top *Catalog) {
	for name, p := range top.products {
		old, ok := c.products[name]
		if !ok {
			c.products[name] = p
			continue
		}
		if p.Title != "" {
			old.Title = p.Title
		}
		if p.BaseURL != "" {
			old.BaseURL = p.BaseURL
		}
		old.Pos = p.Pos
	}
	for name, d := range top.drivers {
		c.drivers[name] = d
	}
	for name, comp := range top.components {
		old, ok := c.components[name]
		if !ok {
			c.components[name] = comp
			continue
		}
		if comp.Product != "" {
			old.Product = comp.Product
		}
		if comp.Title != "" {
			old.Title = comp.Title
		}
		if comp.License != "" {
			old.License = comp.License
		}
		old.Sonames = sortedUnique(append(slices.Clone(old.Sonames), comp.Sonames...))
		for _, r := range comp.Releases {
			i := slices.IndexFunc(old.Releases, func(o *Release) bool { return o.Version == r.Version })
			if i >= 0 {
				old.Releases[i] = r
			} else {
				old.Releases = append(old.Releases, r)
			}
		}
		sortReleases(old.Releases)
		old.Pos = comp.Pos
	}
}

func (c *Catalog) clone() *Catalog {
	out := &Catalog{
		products:   map[string]*Product{},
		drivers:    map[string]*Driver{},
		components: map[string]*Component{},
		mirror:     c.mirror,
	}
	for k, p := range c.products {
		cp := *p
		out.products[k] = &cp
	}
	for k, d := range c.drivers {
		cp := *d
		out.drivers[k] = &cp
	}
	for k, comp := range c.components {
		cp := *comp
		cp.Sonames = slices.Clone(comp.Sonames)
		cp.Releases = slices.Clone(comp.Releases) // releases themselves are never modified
		out.components[k] = &cp
	}
	return out
}

// check verifies what only the whole catalog can tell: every component
// names a known product, every product with archives has a base URL, and
// no driver library is offered as a download.
func (c *Catalog) check() error {
	var problems Problems
	for _, comp := range c.sortedComponents() {
		p, ok := c.products[comp.Product]
		if !ok {
			problems = append(problems, &ParseError{Pos: comp.Pos, Msg: fmt.Sprintf("component %s: product %q is not defined in any catalog", comp.Name, comp.Product)})
			continue
		}
		noBase := p.BaseURL == "" // said once per component, at its first archive
		for _, r := range comp.Releases {
			for _, a := range r.Archives {
				if noBase {
					problems = append(problems, &ParseError{Pos: a.Pos, Msg: fmt.Sprintf("component %s has archives but product %s has no base_url", comp.Name, p.Name)})
					noBase = false
				}
				for _, s := range a.Sonames {
					if d, ok := c.drivers[s]; ok {
						problems = append(problems, &ParseError{Pos: a.Pos, Msg: fmt.Sprintf("%s is a driver library (%s) and cannot come from archive %s", s, d.Pos, a.RelativePath)})
					}
				}
			}
		}
	}
	return problems.orNil()
}

// NormalizeMirror checks a mirror URL and makes it end in "/". An oci://
// mirror is only checked for a host and a repository here; package
// fleet/registry reads the rest.
func NormalizeMirror(m string) (string, error) {
	u, err := url.Parse(m)
	if err != nil {
		return "", fmt.Errorf("mirror %q: %w", m, err)
	}
	switch u.Scheme {
	case "https", "http":
		if u.Host == "" {
			return "", fmt.Errorf("mirror %q: no host", m)
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return "", fmt.Errorf("mirror %q: a file URL names a local directory: file:///PATH", m)
		}
		if !strings.HasPrefix(u.Path, "/") {
			return "", fmt.Errorf("mirror %q: a file URL needs an absolute path: file:///PATH", m)
		}
	case "oci":
		// A repository of an OCI registry (package fleet/registry), which
		// serves each archive as the blob of its sha256.
		if u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return "", fmt.Errorf("mirror %q: an OCI mirror names a registry and a repository: oci://HOST/REPOSITORY", m)
		}
	default:
		return "", fmt.Errorf("mirror %q: must be an https://, http://, file:/// or oci:// URL", m)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("mirror %q: no query or fragment allowed", m)
	}
	if !strings.HasSuffix(m, "/") {
		m += "/"
	}
	return m, nil
}

// Mirror is the mirror base URL in use, or "".
func (c *Catalog) Mirror() string { return c.mirror }

// URL is where archive a of component comp is fetched from: the mirror, or
// the product's base URL, followed by the archive's relative path.
func (c *Catalog) URL(comp *Component, a *Archive) string {
	if c.mirror != "" {
		return c.mirror + a.RelativePath
	}
	if p, ok := c.products[comp.Product]; ok {
		return p.BaseURL + a.RelativePath
	}
	return a.RelativePath
}

// Components returns every component, sorted by name.
func (c *Catalog) Components() []*Component { return c.sortedComponents() }

func (c *Catalog) sortedComponents() []*Component {
	return slices.SortedFunc(maps.Values(c.components), func(a, b *Component) int { return strings.Compare(a.Name, b.Name) })
}

// Component returns the component called name.
func (c *Catalog) Component(name string) (*Component, bool) {
	comp, ok := c.components[name]
	return comp, ok
}

// Product returns the product called name.
func (c *Catalog) Product(name string) (*Product, bool) {
	p, ok := c.products[name]
	return p, ok
}

// Drivers returns the driver libraries, sorted by soname.
func (c *Catalog) Drivers() []*Driver {
	return slices.SortedFunc(maps.Values(c.drivers), func(a, b *Driver) int { return strings.Compare(a.Soname, b.Soname) })
}

// Driver returns the driver entry for soname.
func (c *Catalog) Driver(soname string) (*Driver, bool) {
	d, ok := c.drivers[soname]
	return d, ok
}

// platforms lists the platforms the component has archives for, in display order.
func (comp *Component) platforms() []string {
	var out []string
	for _, r := range comp.Releases {
		for _, a := range r.Archives {
			if !slices.Contains(out, a.Platform) {
				out = append(out, a.Platform)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Compare(platform.Rank(a), platform.Rank(b)) })
	return out
}

func sortReleases(rs []*Release) {
	slices.SortStableFunc(rs, func(a, b *Release) int { return dotted.Compare(b.Version, a.Version) })
}

func sortArchives(as []*Archive) {
	slices.SortStableFunc(as, func(a, b *Archive) int {
		if c := cmp.Compare(platform.Rank(a.Platform), platform.Rank(b.Platform)); c != 0 {
			return c
		}
		ma, _ := variantMajor(a.CUDAVariant)
		mb, _ := variantMajor(b.CUDAVariant)
		return cmp.Compare(ma, mb)
	})
}

func sortedUnique(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
