package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/urlpolicy"
)

// UserLayerDir is where `catalog update` keeps the user catalog layer:
// $XDG_DATA_HOME/cudadeps, or ~/.local/share/cudadeps. getenv is os.Getenv
// in the program and a map in tests.
func UserLayerDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "cudadeps"), nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", errors.New("no data directory: set XDG_DATA_HOME or HOME")
	}
	return filepath.Join(home, ".local", "share", "cudadeps"), nil
}

// UserLayerFile is the catalog file of the user layer in dir; it may not exist.
func UserLayerFile(dir string) string { return filepath.Join(dir, "current", "catalog.yaml") }

// UpdateOptions shape Update.
type UpdateOptions struct {
	// Dir is the user layer directory (UserLayerDir).
	Dir string
	// Mirror, when set, stands for https://developer.download.nvidia.com/compute/:
	// product P's manifests are listed at Mirror + P + "/redist/", and
	// its archives are fetched from there too.
	Mirror string
	// Products to update; nil: every product of the built-in catalog that has a base URL.
	Products []string
	Client   *http.Client // nil: a client with a 60 s timeout
	Logger   *slog.Logger
}

// NewRelease is a release that the updated layer adds.
type NewRelease struct {
	Component string `json:"component"`
	Product   string `json:"product"`
	Version   string `json:"version"`
	Release   string `json:"release,omitempty"`
}

// UpdateResult says what Update wrote.
type UpdateResult struct {
	Layer     string       `json:"layer"`     // the catalog file now in force
	Manifests []string     `json:"manifests"` // product/redistrib_X.json, each fetched and parsed
	New       []NewRelease `json:"new"`       // releases the catalog in force before did not have
}

var manifestLink = regexp.MustCompile(`redistrib_[0-9][0-9A-Za-z._+-]*\.json`)

// Update fetches every listed manifest of each product, checks that each
// parses, imports them with the embedded soname table, and replaces the
// user layer in opts.Dir at once (a new directory, then one rename of the
// "current" link). On any failure — offline, an HTTP error, a manifest
// that does not parse — nothing is replaced and the last good layer stays.
func Update(ctx context.Context, opts UpdateOptions) (*UpdateResult, error) {
	u, err := newUpdater(ctx, opts)
	if err != nil {
		return nil, err
	}
	for _, product := range u.products() {
		if err := u.fetchProduct(ctx, product); err != nil {
			return nil, err
		}
	}
	if len(u.manifests) == 0 {
		return nil, errors.New("no manifest found: the user layer is unchanged")
	}
	layer, err := Import(ctx, u.manifests, ImportOptions{Logger: u.log})
	if err != nil {
		return nil, err
	}
	for name, p := range layer.products {
		if url, ok := u.listing[name]; ok {
			p.BaseURL = url
		}
	}
	if _, err := Layer(u.base, layer); err != nil {
		return nil, fmt.Errorf("the updated layer does not fit the built-in catalog: %w", err)
	}
	text, err := layer.Encode("cudadeps user catalog layer, written by `cudadeps catalog update`; replaced by the next update.\nManifests: " + strings.Join(u.res.Manifests, ", ") + ".")
	if err != nil {
		return nil, err
	}
	if err := writeLayer(opts.Dir, text, u.raw); err != nil {
		return nil, err
	}
	u.res.New = newReleases(u.old, layer)
	return u.res, nil
}

// updater is the state of one update: the catalogs in force before it,
// and the manifests fetched so far.
type updater struct {
	opts      UpdateOptions
	log       *slog.Logger
	client    *http.Client
	base, old *Catalog // the built-in catalog; with the user layer in force before
	mirror    string
	res       *UpdateResult
	manifests []*Manifest
	raw       map[string][]byte // product/redistrib_X.json → its bytes
	listing   map[string]string // product → its redist URL
}

func newUpdater(ctx context.Context, opts UpdateOptions) (*updater, error) {
	u := &updater{opts: opts, log: opts.Logger, client: opts.Client, raw: map[string][]byte{}, listing: map[string]string{},
		res: &UpdateResult{Layer: UserLayerFile(opts.Dir)}}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	if u.client == nil {
		// A mirror may be a directory (file:///DIR), as for every other
		// command; its listing links the manifests as a web server's does.
		u.client = &http.Client{Timeout: 60 * time.Second, Transport: urlpolicy.Transport(), CheckRedirect: urlpolicy.CheckRedirect(true)}
	}
	var err error
	if u.base, err = Load(ctx, LoadOptions{}); err != nil {
		return nil, err
	}
	u.old = u.base
	if _, err := os.Stat(u.res.Layer); err == nil {
		if u.old, err = Load(ctx, LoadOptions{UserLayer: u.res.Layer}); err != nil {
			u.log.Warn("the current user layer does not load; it will be replaced", "err", err)
			u.old = u.base
		}
	}
	if opts.Mirror != "" {
		if u.mirror, err = NormalizeMirror(opts.Mirror); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// products are those asked for, or every product of the built-in catalog
// that has a base URL; sorted.
func (u *updater) products() []string {
	products := slices.Clone(u.opts.Products)
	if products == nil {
		for name, p := range u.base.products {
			if p.BaseURL != "" {
				products = append(products, name)
			}
		}
	}
	slices.Sort(products)
	return products
}

// fetchProduct reads a product's redist listing and fetches and parses
// every manifest it links; a product the listing's host does not have is
// passed over.
func (u *updater) fetchProduct(ctx context.Context, product string) error {
	if !nameRE.MatchString(product) {
		return fmt.Errorf("product %q is not a product name", product)
	}
	dirURL := baseURL(product)
	if u.mirror != "" {
		dirURL = u.mirror + product + "/redist/"
	} else if p, ok := u.base.products[product]; ok && p.BaseURL != "" {
		dirURL = p.BaseURL
	}
	page, err := fetchBounded(ctx, u.client, dirURL)
	if errors.Is(err, errNotFound) {
		u.log.Warn("no redist directory for this product here", "product", product, "url", dirURL)
		return nil
	}
	if err != nil {
		return err
	}
	names := sortedUnique(manifestLink.FindAllString(string(page), -1))
	if len(names) == 0 {
		return fmt.Errorf("%s lists no redistrib_*.json", dirURL)
	}
	for _, name := range names {
		data, err := fetchBounded(ctx, u.client, dirURL+name)
		if err != nil {
			return err
		}
		m, err := ParseManifest(data, product+"/"+name)
		if err != nil {
			return err
		}
		if m.Product != product {
			return fmt.Errorf("%s%s: release_product is %q, not %s", dirURL, name, m.Product, product)
		}
		u.manifests = append(u.manifests, m)
		u.raw[product+"/"+name] = data
		u.res.Manifests = append(u.res.Manifests, product+"/"+name)
	}
	u.listing[product] = dirURL
	return nil
}

// newReleases are the releases of layer that old did not have.
func newReleases(old, layer *Catalog) []NewRelease {
	var out []NewRelease
	for _, comp := range layer.Components() {
		was, _ := old.Component(comp.Name)
		for _, r := range comp.Releases {
			if was == nil || !slices.ContainsFunc(was.Releases, func(o *Release) bool { return o.Version == r.Version }) {
				out = append(out, NewRelease{Component: comp.Name, Product: comp.Product, Version: r.Version, Release: r.Label})
			}
		}
	}
	return out
}

var errNotFound = errors.New("not found")

func fetchBounded(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("fetch %s: %w", url, errNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("fetch %s: more than %d bytes", url, maxFileSize)
	}
	return data, nil
}

// writeLayer writes the layer into a new directory beside the current one
// and swings the "current" link to it with one rename, so a reader sees
// the old layer or the new one, never a part; then the old one is removed.
func writeLayer(dir string, catalogText []byte, manifests map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("user catalog layer: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, "layer-")
	if err != nil {
		return fmt.Errorf("user catalog layer: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	write := func(rel string, data []byte) error {
		p := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	for rel, data := range manifests {
		if err := write(filepath.Join("manifests", filepath.FromSlash(rel)), data); err != nil {
			return fmt.Errorf("user catalog layer: %w", err)
		}
	}
	if err := write("catalog.yaml", catalogText); err != nil {
		return fmt.Errorf("user catalog layer: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("user catalog layer: %w", err)
	}
	current := filepath.Join(dir, "current")
	previous, _ := os.Readlink(current)
	link := current + ".new"
	os.Remove(link)
	if err := os.Symlink(filepath.Base(tmp), link); err != nil {
		return fmt.Errorf("user catalog layer: %w", err)
	}
	if err := os.Rename(link, current); err != nil {
		os.Remove(link)
		return fmt.Errorf("user catalog layer: %w", err)
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	if previous != "" && previous != filepath.Base(tmp) && !strings.Contains(previous, "/") {
		os.RemoveAll(filepath.Join(dir, previous))
	}
	return nil
}
