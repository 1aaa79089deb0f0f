package torchenv

import (
	"bufio"
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/testkit/indextest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// Packed is an installed distribution's files, read back to be served as
// its wheel or NVIDIA's archive of the same release.
type Packed struct {
	Name, Version string
	Tags          string            // the wheel's tags
	Metadata      string            // its Requires-Dist and Provides-Extra lines
	Files         map[string][]byte // by RECORD path, the .dist-info left out
}

// Pack reads distributions of site as they are installed (before they are
// uninstalled).
func Pack(t testing.TB, site string, names ...string) []Packed {
	t.Helper()
	env, err := pyenv.FromSiteDir(site, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []Packed
	for _, n := range names {
		d, err := env.Find(n)
		if err != nil {
			t.Fatal(err)
		}
		p := Packed{Name: pymeta.NormalizeName(d.Name), Version: d.Version, Tags: "py3-none-manylinux_2_27_x86_64", Files: map[string][]byte{}}
		p.Metadata, p.Tags = headerLines(t, d.InfoDir)
		for _, e := range d.Record {
			if first, _, _ := strings.Cut(e.Path, "/"); strings.HasSuffix(first, ".dist-info") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(site, filepath.FromSlash(e.Path)))
			if err != nil {
				t.Fatal(err)
			}
			p.Files[e.Path] = data
		}
		out = append(out, p)
	}
	return out
}

// headerLines reads the METADATA lines that matter to resolution and the
// WHEEL's tags.
func headerLines(t testing.TB, info string) (meta, tags string) {
	t.Helper()
	f, err := os.Open(filepath.Join(info, "METADATA"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		if strings.HasPrefix(line, "Requires-Dist:") || strings.HasPrefix(line, "Provides-Extra:") {
			b.WriteString(line + "\n")
		}
	}
	data, err := os.ReadFile(filepath.Join(info, "WHEEL"))
	if err != nil {
		t.Fatal(err)
	}
	var tl []string
	for _, line := range strings.Split(string(data), "\n") {
		if tag, ok := strings.CutPrefix(line, "Tag:"); ok {
			tl = append(tl, strings.TrimSpace(tag))
		}
	}
	return b.String(), strings.Join(tl, ".")
}

// Wheel is the packed distribution as a wheel on an index.
func (p Packed) Wheel() indextest.Wheel {
	return indextest.Wheel{Project: p.Name, Version: p.Version, Tags: wheelTag(p.Tags), Files: p.Files, Metadata: p.Metadata}
}

// wheelTag is the compressed tag set of a wheel's file name (PEP 425) for
// the WHEEL file's tags: py2-none-any and py3-none-any are
// py2.py3-none-any, as cuda-toolkit's wheel is named.
func wheelTag(tags string) string {
	if tags == "" {
		return "py3-none-any"
	}
	var parts [3][]string
	for _, tag := range strings.Split(tags, ".") {
		fields := strings.SplitN(tag, "-", 3)
		if len(fields) != 3 {
			return tag
		}
		for i, f := range fields {
			if !slices.Contains(parts[i], f) {
				parts[i] = append(parts[i], f)
			}
		}
	}
	return strings.Join(parts[0], ".") + "-" + strings.Join(parts[1], ".") + "-" + strings.Join(parts[2], ".")
}

// Archive is the packed distribution's libraries as NVIDIA's archive of
// the same release for platform (the catalog's component version: the
// wheel's version, or the full one it shortens); ok is false for a
// distribution NVIDIA publishes no archive of (NCCL, NVSHMEM).
func (p Packed) Archive(t testing.TB, platform string) (mirrortest.Archive, bool) {
	t.Helper()
	dists, err := catalog.EmbeddedDistributions()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(context.Background(), catalog.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dd, ok := dists.Lookup(p.Name)
	if !ok {
		return mirrortest.Archive{}, false
	}
	comp, ok := cat.Component(dd.Components[0])
	if !ok {
		return mirrortest.Archive{}, false
	}
	a := mirrortest.Archive{Component: comp.Name, Product: comp.Product, Platform: platform, Raw: map[string][]byte{}}
	for _, r := range comp.Releases {
		if !dd.MatchesVersion(p.Version, r.Version) {
			continue
		}
		a.Version = r.Version
		for _, ar := range r.Archives {
			if ar.Platform == platform && ar.CUDAVariant != "" && dd.CUDA != 0 {
				a.Variant = "cuda" + strconv.Itoa(dd.CUDA)
			}
		}
		break
	}
	published := slices.ContainsFunc(comp.Releases, func(r *catalog.Release) bool {
		return slices.ContainsFunc(r.Archives, func(ar *catalog.Archive) bool { return ar.Platform == platform })
	})
	if !published {
		return mirrortest.Archive{}, false // NVIDIA publishes no archive of it
	}
	if a.Version == "" {
		// A release the built-in catalog lacks: the mirror's catalog layer
		// adds it, at the wheel's version.
		a.Version = p.Version
		if dd.CUDA != 0 && slices.ContainsFunc(comp.Releases, func(r *catalog.Release) bool {
			return slices.ContainsFunc(r.Archives, func(ar *catalog.Archive) bool { return ar.CUDAVariant != "" })
		}) {
			a.Variant = "cuda" + strconv.Itoa(dd.CUDA)
		}
	}
	for rel, data := range p.Files {
		if catalog.IsSharedLibrary(path.Base(rel)) {
			a.Raw[path.Base(rel)] = data
		}
	}
	return a, len(a.Raw) > 0
}
