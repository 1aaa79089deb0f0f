// Package redistwrite writes NVIDIA-layout redistributable archives (.tar.xz) of generated ELF libraries, and a catalog layer that names them, the same bytes every time.
package redistwrite

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// Archive is one component archive in NVIDIA's redist layout:
// NAME-archive/lib/..., NAME-archive/LICENSE.
type Archive struct {
	Component string // e.g. "libcudss"
	Product   string // e.g. "cudss"
	Version   string // e.g. "0.8.0.10"
	Platform  string // e.g. "linux-x86_64"
	Variant   string // "cuda13" or ""
	// Libs are the files under lib/, by name; each is written with its
	// machine defaulting to Machine.
	Libs map[string]elfwrite.Spec
	// Links are symlinks under lib/: name → target.
	Links   map[string]string
	Machine elf.Machine
	// Raw are more files under lib/, by name, written as given (libraries
	// taken from an environment); their names are their sonames.
	Raw map[string][]byte
	// ListedAs is the platform the catalog layer lists the archive for,
	// when not Platform: a layer that misnames an archive's platform.
	ListedAs string
}

func (a Archive) name() string {
	n := fmt.Sprintf("%s-%s-%s", a.Component, a.Platform, a.Version)
	if a.Variant != "" {
		n += "_" + a.Variant
	}
	return n + "-archive"
}

// RelativePath is where the archive lies under the mirror.
func (a Archive) RelativePath() string {
	return a.Component + "/" + a.Platform + "/" + a.name() + ".tar.xz"
}

// Sonames are the sonames of the archive's libraries.
func (a Archive) Sonames() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range a.Libs {
		if s.Soname != "" && !seen[s.Soname] {
			seen[s.Soname] = true
			out = append(out, s.Soname)
		}
	}
	for n := range a.Raw {
		if base := path.Base(n); strings.Contains(base, ".so") && !seen[base] {
			seen[base] = true
			out = append(out, base)
		}
	}
	sort.Strings(out)
	return out
}

// Write writes the archives into dir, each at its RelativePath, and a
// catalog layer naming them, dir/catalog.yaml, whose path it returns. The
// layer's products keep NVIDIA's base URLs: a --mirror serving dir stands
// for them.
func Write(dir string, archives []Archive) (catalogPath string, err error) {
	var cat strings.Builder
	cat.WriteString("format: 1\nproducts:\n")
	products := map[string]bool{}
	for _, a := range archives {
		if !products[a.Product] {
			products[a.Product] = true
			fmt.Fprintf(&cat, "  %s:\n    title: %s (test)\n    base_url: https://developer.download.nvidia.com/compute/%s/redist/\n", a.Product, a.Product, a.Product)
		}
	}
	cat.WriteString("components:\n")
	byComp := map[string][]Archive{}
	var comps []string
	for _, a := range archives {
		if _, ok := byComp[a.Component]; !ok {
			comps = append(comps, a.Component)
		}
		byComp[a.Component] = append(byComp[a.Component], a)
	}
	for _, c := range comps {
		as := byComp[c]
		var all []string
		for _, a := range as {
			all = append(all, a.Sonames()...)
		}
		fmt.Fprintf(&cat, "  %s:\n    product: %s\n    title: %s (test)\n    license: test\n    sonames: [%s]\n    releases:\n", c, as[0].Product, c, strings.Join(uniq(all), ", "))
		if err := writeReleases(dir, &cat, as); err != nil {
			return "", err
		}
	}
	catPath := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(catPath, []byte(cat.String()), 0o644); err != nil {
		return "", err
	}
	return catPath, nil
}

// writeReleases writes one component's archives into dir and their
// releases into the catalog layer: one release per version, with an
// archive per platform.
func writeReleases(dir string, cat *strings.Builder, as []Archive) error {
	sort.SliceStable(as, func(i, j int) bool { return as[i].Version < as[j].Version })
	lastVersion := ""
	for _, a := range as {
		data, err := a.Build()
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(a.RelativePath()))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		listed := a.Platform
		if a.ListedAs != "" {
			listed = a.ListedAs
		}
		if a.Version != lastVersion {
			fmt.Fprintf(cat, "      - version: %s\n        archives:\n", a.Version)
			lastVersion = a.Version
		}
		fmt.Fprintf(cat, "          - platform: %s\n", listed)
		if a.Variant != "" {
			fmt.Fprintf(cat, "            cuda_variant: %s\n", a.Variant)
		}
		fmt.Fprintf(cat, "            path: %s\n            sha256: %s\n            size: %d\n            sonames: [%s]\n",
			a.RelativePath(), hex.EncodeToString(sum[:]), len(data), strings.Join(a.Sonames(), ", "))
	}
	return nil
}

func uniq(list []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// Build returns the .tar.xz bytes of the archive.
func (a Archive) Build() ([]byte, error) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	top := a.name() + "/"
	mtime := time.Unix(1700000000, 0)
	var err error
	header := func(h *tar.Header, data []byte) {
		if err != nil {
			return
		}
		h.ModTime = mtime
		if err = tw.WriteHeader(h); err == nil && data != nil {
			_, err = tw.Write(data)
		}
	}
	dir := func(name string) { header(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}, nil) }
	file := func(name string, data []byte, mode int64) {
		header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data)
	}
	dir(top)
	dir(top + "lib/")
	file(top+"LICENSE", []byte("test license\n"), 0o644)
	for _, n := range sortedKeys(a.Libs) {
		spec := a.Libs[n]
		if spec.Machine == elf.EM_NONE {
			spec.Machine = a.Machine
		}
		data, berr := elfwrite.Build(spec)
		if berr != nil {
			return nil, fmt.Errorf("%s: %s: %w", a.name(), n, berr)
		}
		if d := path.Dir(n); d != "." {
			dir(top + "lib/" + d + "/")
		}
		file(top+"lib/"+n, data, 0o755)
	}
	for _, n := range sortedKeys(a.Raw) {
		if d := path.Dir(n); d != "." {
			dir(top + "lib/" + d + "/")
		}
		file(top+"lib/"+n, a.Raw[n], 0o755)
	}
	for _, n := range sortedKeys(a.Links) {
		header(&tar.Header{Typeflag: tar.TypeSymlink, Name: top + "lib/" + n, Linkname: a.Links[n], Mode: 0o777}, nil)
	}
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.name(), err)
	}
	var out bytes.Buffer
	w, err := xz.NewWriter(&out)
	if err == nil {
		_, err = w.Write(tarBuf.Bytes())
	}
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.name(), err)
	}
	return out.Bytes(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
