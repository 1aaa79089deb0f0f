package catalog

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/platform"
)

// baseURL is where NVIDIA publishes the archives of a product.
func baseURL(product string) string {
	return "https://developer.download.nvidia.com/compute/" + product + "/redist/"
}

// ArchiveRef names one archive to fetch for a scan.
type ArchiveRef struct {
	Component    string
	Version      string
	Platform     string
	CUDAVariant  string
	URL          string // the mirror's when one is set
	RelativePath string
	SHA256       string
	Size         int64
}

// Extractor brings archive a in, verified against its sha256 and size, and
// unpacks it into the empty directory dir. The fetch code provides it; the
// catalog only reads what lands in dir.
type Extractor func(ctx context.Context, a ArchiveRef, dir string) error

// ImportOptions shape Import.
type ImportOptions struct {
	Table      *Table   // nil: the embedded curated table
	Platforms  []string // only these platforms; nil: all
	Components []string // only these components; nil: all
	// Extract, when set, makes Import read the sonames of the ELF files
	// inside each archive instead of taking them from the table.
	Extract Extractor
	Mirror  string // fetch scanned archives from here instead of NVIDIA
	WorkDir string // where one archive at a time is unpacked; "" for the system's temporary directory
	Logger  *slog.Logger
}

// Import builds a catalog from NVIDIA's manifests: every archive of a
// Linux platform, with the sonames the table (or, with Extract, the archive
// itself) says it provides; archives that provide nothing known are left
// out. The table's driver libraries and its knowledge of components without
// archives are carried along, so the result stands on its own.
func Import(ctx context.Context, manifests []*Manifest, opts ImportOptions) (*Catalog, error) {
	im, err := newImporter(opts)
	if err != nil {
		return nil, err
	}
	ordered := slices.Clone(manifests)
	slices.SortStableFunc(ordered, func(a, b *Manifest) int {
		if c := strings.Compare(a.Product, b.Product); c != 0 {
			return c
		}
		return dotted.Compare(a.Label, b.Label)
	})
	for _, m := range ordered {
		for _, mc := range m.Components {
			if err := im.component(ctx, m, mc); err != nil {
				return nil, err
			}
		}
	}
	im.addTableComponents()
	c := im.c
	for _, comp := range c.components {
		sortReleases(comp.Releases)
		for _, r := range comp.Releases {
			for _, a := range r.Archives {
				comp.Sonames = append(comp.Sonames, a.Sonames...)
			}
		}
		comp.Sonames = sortedUnique(comp.Sonames)
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

// tableName is where what the soname table says is said to come from.
const tableName = "soname table"

// importer builds a catalog from manifests, one component at a time.
type importer struct {
	opts   ImportOptions
	log    *slog.Logger
	table  *Table
	mirror string
	c      *Catalog
	newest map[string]string // component → version whose title and license it carries
}

// newImporter checks the options and starts the catalog with the table's
// driver libraries.
func newImporter(opts ImportOptions) (*importer, error) {
	im := &importer{opts: opts, log: opts.Logger, table: opts.Table, newest: map[string]string{},
		c: &Catalog{products: map[string]*Product{}, drivers: map[string]*Driver{}, components: map[string]*Component{}}}
	if im.log == nil {
		im.log = slog.New(slog.DiscardHandler)
	}
	if im.table == nil {
		var err error
		if im.table, err = builtinTable(); err != nil {
			return nil, err
		}
	}
	for _, p := range opts.Platforms {
		if !platform.Valid(p) {
			return nil, fmt.Errorf("unknown platform %q (want one of %s)", p, strings.Join(platform.All(), ", "))
		}
	}
	if opts.Mirror != "" {
		var err error
		if im.mirror, err = NormalizeMirror(opts.Mirror); err != nil {
			return nil, err
		}
	}
	for soname, advice := range im.table.Drivers {
		im.c.drivers[soname] = &Driver{Soname: soname, Advice: advice, Pos: Pos{File: tableName}}
	}
	return im, nil
}

func (im *importer) wanted(comp string) bool {
	return len(im.opts.Components) == 0 || slices.Contains(im.opts.Components, comp)
}

func (im *importer) onPlatform(p string) bool {
	return len(im.opts.Platforms) == 0 || slices.Contains(im.opts.Platforms, p)
}

func (im *importer) addProduct(name string) *Product {
	if p, ok := im.c.products[name]; ok {
		return p
	}
	p := &Product{Name: name, Title: im.table.Products[name], Pos: Pos{File: tableName}}
	im.c.products[name] = p
	return p
}

// component adds one manifest component's release, with the archives that
// provide a known soname; a component the table skips or knows nothing of
// (without Extract) is left out.
func (im *importer) component(ctx context.Context, m *Manifest, mc *ManifestComponent) error {
	if !im.wanted(mc.Key) {
		return nil
	}
	tc := im.table.Components[mc.Key]
	switch {
	case im.table.skipped(mc.Key):
		im.log.Debug("holds no shared library", "component", mc.Key, "manifest", m.Name)
		return nil
	case tc == nil && im.opts.Extract == nil:
		im.log.Info("no sonames known for this component: left out (import --scan reads them from the archives)", "component", mc.Key, "manifest", m.Name)
		return nil
	}
	rel, err := im.release(ctx, m, mc, tc)
	if err != nil || len(rel.Archives) == 0 {
		return err
	}
	comp, ok := im.c.components[mc.Key]
	if !ok {
		comp = &Component{Name: mc.Key, Product: m.Product, Pos: Pos{File: m.Name}}
		im.c.components[mc.Key] = comp
	}
	if comp.Product != m.Product {
		return fmt.Errorf("%s: component %s belongs to product %s in another manifest", m.Name, mc.Key, comp.Product)
	}
	if err := addRelease(comp, rel); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	if v, seen := im.newest[mc.Key]; !seen || dotted.Compare(mc.Version, v) >= 0 {
		im.newest[mc.Key] = mc.Version
		comp.Title, comp.License = mc.Title, mc.License
	}
	im.addProduct(m.Product).BaseURL = baseURL(m.Product)
	return nil
}

// release is a manifest component's release with its archives for the
// platforms asked, each with the sonames it provides.
func (im *importer) release(ctx context.Context, m *Manifest, mc *ManifestComponent, tc *TableComponent) (*Release, error) {
	releaseCUDA := 0
	if m.Product == "cuda" {
		// A CUDA toolkit release builds all its archives for its own major.
		major, _, _ := strings.Cut(m.Label, ".")
		releaseCUDA, _ = strconv.Atoi(major)
	}
	rel := &Release{Version: mc.Version, Label: m.Label, Date: m.Date, CUDA: releaseCUDA, Pos: Pos{File: m.Name}}
	if slices.ContainsFunc(mc.Archives, func(a *ManifestArchive) bool { return a.CUDAVariant != "" }) {
		rel.CUDA = 0 // the variants say it per archive
	}
	for _, ma := range mc.Archives {
		if !im.onPlatform(ma.Platform) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a := &Archive{Platform: ma.Platform, CUDAVariant: ma.CUDAVariant, RelativePath: ma.RelativePath,
			SHA256: ma.SHA256, Size: ma.Size, Pos: Pos{File: m.Name}}
		var err error
		if a.Sonames, err = im.sonames(ctx, m, mc, tc, ma, a.CUDAMajor(rel)); err != nil {
			return nil, err
		}
		if len(a.Sonames) == 0 {
			im.log.Debug("archive provides no known soname: left out", "archive", ma.RelativePath)
			continue
		}
		rel.Archives = append(rel.Archives, a)
	}
	sortArchives(rel.Archives)
	return rel, nil
}

// sonames are what one archive provides: read from its ELF files with
// Extract, else from the table; never a driver library.
func (im *importer) sonames(ctx context.Context, m *Manifest, mc *ManifestComponent, tc *TableComponent, ma *ManifestArchive, cudaMajor int) ([]string, error) {
	var sonames []string
	if im.opts.Extract != nil {
		var err error
		sonames, err = scanArchive(ctx, im.opts, im.log, ArchiveRef{
			Component: mc.Key, Version: mc.Version, Platform: ma.Platform, CUDAVariant: ma.CUDAVariant,
			URL: urlFor(im.mirror, m.Product, ma.RelativePath), RelativePath: ma.RelativePath,
			SHA256: ma.SHA256, Size: ma.Size,
		})
		if err != nil {
			return nil, err
		}
	} else {
		sonames = tc.sonames(mc.Version, cudaMajor, ma.Platform)
	}
	return slices.DeleteFunc(sonames, func(s string) bool {
		if _, driver := im.table.Drivers[s]; driver {
			im.log.Warn("a driver library inside an archive is not offered", "soname", s, "archive", ma.RelativePath)
			return true
		}
		return false
	}), nil
}

// addTableComponents carries the table's knowledge of components that
// have no archives (and the sonames it knows of those that have), so that
// the result stands on its own.
func (im *importer) addTableComponents() {
	for name, tc := range im.table.Components {
		if !im.wanted(name) {
			continue
		}
		comp, ok := im.c.components[name]
		if !ok {
			comp = &Component{Name: name, Product: tc.Product, Title: tc.Title, Pos: Pos{File: tableName}}
			im.c.components[name] = comp
			im.addProduct(tc.Product)
		}
		comp.Sonames = append(comp.Sonames, tc.known()...)
	}
}

// addRelease adds rel to comp; the same version from two manifests (a
// component unchanged between toolkit releases) must name the same files.
func addRelease(comp *Component, rel *Release) error {
	i := slices.IndexFunc(comp.Releases, func(r *Release) bool { return r.Version == rel.Version })
	if i < 0 {
		comp.Releases = append(comp.Releases, rel)
		return nil
	}
	old := comp.Releases[i]
	for _, a := range rel.Archives {
		j := slices.IndexFunc(old.Archives, func(o *Archive) bool {
			return o.Platform == a.Platform && o.CUDAVariant == a.CUDAVariant
		})
		if j < 0 {
			old.Archives = append(old.Archives, a)
			continue
		}
		if o := old.Archives[j]; o.SHA256 != a.SHA256 || o.Size != a.Size || o.RelativePath != a.RelativePath {
			return fmt.Errorf("component %s %s %s: two different archives of one version", comp.Name, rel.Version, a.Platform)
		}
	}
	sortArchives(old.Archives)
	// The later release label names the newer manifest that still ships it.
	if dotted.Compare(rel.Label, old.Label) > 0 {
		old.Label, old.Date = rel.Label, rel.Date
	}
	return nil
}

func urlFor(mirror, product, rel string) string {
	if mirror != "" {
		return mirror + rel
	}
	return baseURL(product) + rel
}

func scanArchive(ctx context.Context, opts ImportOptions, log *slog.Logger, ref ArchiveRef) ([]string, error) {
	dir, err := os.MkdirTemp(opts.WorkDir, "cudadeps-scan-*")
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", ref.RelativePath, err)
	}
	defer os.RemoveAll(dir)
	log.Info("scanning archive", "component", ref.Component, "version", ref.Version, "platform", ref.Platform, "variant", ref.CUDAVariant, "url", ref.URL)
	if err := opts.Extract(ctx, ref, dir); err != nil {
		return nil, fmt.Errorf("scan %s: %w", ref.RelativePath, err)
	}
	return scanDir(dir, ref.Platform, log)
}

// scanDir lists the SONAMEs of the ELF shared objects under dir that run on
// platform. Files in stubs/ directories (link-time stand-ins such as the
// toolkit's stub libcuda.so) are not libraries anyone should load, so they
// are skipped, as are symbolic links (their targets are scanned), files
// that are not ELF, and objects built for another machine.
func scanDir(dir, plat string, log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	want := elf.EM_X86_64
	if plat != platform.LinuxX86_64 {
		want = elf.EM_AARCH64
	}
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "stubs" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := elfscan.ReadInfo(path)
		if errors.Is(err, elfscan.ErrNotELF) {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		if err != nil {
			log.Warn("unreadable ELF file skipped", "file", rel, "err", err)
			return nil
		}
		if info.Soname == "" {
			return nil
		}
		if info.Machine != want {
			log.Warn("ELF file for another machine skipped", "file", rel, "machine", info.Machine, "platform", plat)
			return nil
		}
		out = append(out, info.Soname)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", dir, err)
	}
	return sortedUnique(out), nil
}

// Encode writes the catalog as YAML, with header as leading comment lines.
// The output is deterministic: the same catalog gives the same bytes.
func (c *Catalog) Encode(header string) ([]byte, error) {
	doc := fileDoc{
		Format:     formatVersion,
		Products:   map[string]*productDoc{},
		Drivers:    map[string]*driverDoc{},
		Components: map[string]*componentDoc{},
	}
	for name, p := range c.products {
		doc.Products[name] = &productDoc{Title: p.Title, BaseURL: p.BaseURL}
	}
	for name, d := range c.drivers {
		doc.Drivers[name] = &driverDoc{Advice: d.Advice}
	}
	for name, comp := range c.components {
		cd := &componentDoc{Product: comp.Product, Title: comp.Title, License: comp.License, Sonames: comp.Sonames}
		for _, r := range comp.Releases {
			rd := &releaseDoc{Version: r.Version, Release: r.Label, Date: r.Date, CUDA: r.CUDA}
			for _, a := range r.Archives {
				rd.Archives = append(rd.Archives, &archiveDoc{
					Platform: a.Platform, CUDAVariant: a.CUDAVariant, Path: a.RelativePath,
					SHA256: a.SHA256, Size: a.Size, Sonames: a.Sonames,
				})
			}
			cd.Releases = append(cd.Releases, rd)
		}
		doc.Components[name] = cd
	}
	var buf bytes.Buffer
	for _, line := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		if header == "" {
			break
		}
		buf.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("encode catalog: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode catalog: %w", err)
	}
	return buf.Bytes(), nil
}
