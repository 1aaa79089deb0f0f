package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/platform"
)

// Manifest is one of NVIDIA's redistrib_<version>.json files, reduced to
// the Linux platforms a catalog knows.
type Manifest struct {
	Name       string // file name, for messages
	Date       string // release_date
	Label      string // release_label
	Product    string // release_product: cuda, cudss, nvpl…
	Components []*ManifestComponent
}

// ManifestComponent is one component key of a manifest.
type ManifestComponent struct {
	Key      string // libcudss
	Title    string // name: "NVIDIA cuDSS library"
	License  string
	Version  string
	Archives []*ManifestArchive
}

// ManifestArchive is one archive of a component.
type ManifestArchive struct {
	Platform     string
	CUDAVariant  string // cuda12, or "" when the platform entry is not split by CUDA variant
	RelativePath string
	SHA256       string
	Size         int64
}

// Component keys that describe a manifest or a component rather than a
// platform; everything else in a component is a platform.
var manifestComponentFields = []string{"name", "license", "license_path", "version", "cuda_variant"}

// ParseManifest reads NVIDIA's redistrib JSON as published: top-level
// release_date, release_label and release_product, then one object per
// component whose platform entries hold {relative_path, sha256, md5, size}
// (size a string) directly or split by CUDA variant ({"cuda12": {...}}).
// Platforms other than Linux x86_64, SBSA and aarch64 (windows-x86_64,
// linux-ppc64le, linux-all, source) are skipped.
func ParseManifest(data []byte, name string) (*Manifest, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%s: not a redistrib manifest: %w", name, err)
	}
	m := &Manifest{Name: name}
	for key, dst := range map[string]*string{"release_date": &m.Date, "release_label": &m.Label, "release_product": &m.Product} {
		raw, ok := top[key]
		if !ok {
			return nil, fmt.Errorf("%s: %s is missing: not a redistrib manifest", name, key)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, key, err)
		}
		delete(top, key)
	}
	if !nameRE.MatchString(m.Product) {
		return nil, fmt.Errorf("%s: release_product %q is not a product name", name, m.Product)
	}
	if bad := badVersion(m.Label); bad != "" {
		return nil, fmt.Errorf("%s: release_label: %s", name, bad)
	}
	if m.Date != "" && !dateRE.MatchString(m.Date) {
		return nil, fmt.Errorf("%s: release_date %q is not YYYY-MM-DD", name, m.Date)
	}
	keys := slices.Sorted(maps.Keys(top))
	for _, key := range keys {
		if bytes.HasPrefix(bytes.TrimSpace(top[key]), []byte("{")) {
			c, err := parseManifestComponent(name, key, top[key])
			if err != nil {
				return nil, err
			}
			m.Components = append(m.Components, c)
		}
		// Other top-level scalars (none are known today) say nothing about archives.
	}
	return m, nil
}

func parseManifestComponent(file, key string, raw json.RawMessage) (*ManifestComponent, error) {
	if !nameRE.MatchString(key) {
		return nil, fmt.Errorf("%s: component key %q is not a component name", file, key)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", file, key, err)
	}
	c := &ManifestComponent{Key: key}
	for field, dst := range map[string]*string{"name": &c.Title, "license": &c.License, "version": &c.Version} {
		if raw, ok := fields[field]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, fmt.Errorf("%s: %s.%s: %w", file, key, field, err)
			}
		}
	}
	if bad := badVersion(c.Version); bad != "" {
		return nil, fmt.Errorf("%s: %s: version: %s", file, key, bad)
	}
	plats := make([]string, 0, len(fields))
	for f := range fields {
		if !slices.Contains(manifestComponentFields, f) && platform.Valid(f) {
			plats = append(plats, f)
		}
	}
	slices.Sort(plats)
	for _, plat := range plats {
		var entry map[string]json.RawMessage
		if err := json.Unmarshal(fields[plat], &entry); err != nil {
			return nil, fmt.Errorf("%s: %s.%s: %w", file, key, plat, err)
		}
		if _, direct := entry["relative_path"]; direct {
			a, err := parseManifestArchive(file, key, plat, "", fields[plat])
			if err != nil {
				return nil, err
			}
			c.Archives = append(c.Archives, a)
			continue
		}
		variants := slices.Sorted(maps.Keys(entry))
		for _, v := range variants {
			if !variantRE.MatchString(v) {
				return nil, fmt.Errorf("%s: %s.%s: %q is neither an archive field nor a CUDA variant", file, key, plat, v)
			}
			a, err := parseManifestArchive(file, key, plat, v, entry[v])
			if err != nil {
				return nil, err
			}
			c.Archives = append(c.Archives, a)
		}
	}
	sortManifestArchives(c.Archives)
	return c, nil
}

func parseManifestArchive(file, key, plat, variant string, raw json.RawMessage) (*ManifestArchive, error) {
	where := fmt.Sprintf("%s: %s.%s", file, key, plat)
	if variant != "" {
		where += "." + variant
	}
	var d struct {
		RelativePath string          `json:"relative_path"`
		SHA256       string          `json:"sha256"`
		Size         json.RawMessage `json:"size"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if !pathRE.MatchString(d.RelativePath) || hasDotSegment(d.RelativePath) {
		return nil, fmt.Errorf("%s: relative_path %q is not a relative path", where, d.RelativePath)
	}
	if !sha256RE.MatchString(d.SHA256) {
		return nil, fmt.Errorf("%s: sha256 %q is not 64 lower-case hex digits", where, d.SHA256)
	}
	// NVIDIA writes the size as a string; accept a number too.
	sizeText := strings.Trim(string(bytes.TrimSpace(d.Size)), `"`)
	size, err := strconv.ParseInt(sizeText, 10, 64)
	if err != nil || size <= 0 || size > maxArchiveSize {
		return nil, fmt.Errorf("%s: size %s is not a positive number of bytes up to %d", where, string(d.Size), int64(maxArchiveSize))
	}
	return &ManifestArchive{Platform: plat, CUDAVariant: variant, RelativePath: d.RelativePath, SHA256: d.SHA256, Size: size}, nil
}

func sortManifestArchives(as []*ManifestArchive) {
	slices.SortStableFunc(as, func(a, b *ManifestArchive) int {
		if c := platform.Rank(a.Platform) - platform.Rank(b.Platform); c != 0 {
			return c
		}
		return strings.Compare(a.CUDAVariant, b.CUDAVariant)
	})
}

// badVersion says why v is no version the catalog takes: longer than any
// real one, or not letters, digits and ". _ + -" starting with a letter or
// a digit; "" when it is one.
func badVersion(v string) string {
	switch {
	case len(v) > dotted.MaxLen:
		return fmt.Sprintf("a version of %d characters (at most %d)", len(v), dotted.MaxLen)
	case !versionRE.MatchString(v):
		return fmt.Sprintf("%q is missing or not a version", v)
	}
	return ""
}
