package catalog

import (
	"context"
	"strings"
	"testing"
)

// TestExcerpt takes the excerpt of the embedded catalog for one archive:
// encoded and read back, it holds that release whole (every platform), and
// layered over a catalog that knows nothing of the component it makes the
// archive known with the same path and sha256; layering a second excerpt
// of the same release (another platform's plan) loses nothing.
func TestExcerpt(t *testing.T) {
	base, err := Load(context.Background(), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	comp, ok := base.Component("libcudss")
	if !ok {
		t.Fatal("the embedded catalog has no libcudss")
	}
	var rel *Release
	for _, r := range comp.Releases {
		plats := map[string]bool{}
		for _, a := range r.Archives {
			plats[a.Platform] = true
		}
		if plats["linux-x86_64"] && plats["linux-sbsa"] {
			rel = r
			break
		}
	}
	if rel == nil {
		t.Fatal("no libcudss release with x86_64 and sbsa archives")
	}
	id := func(plat string) ArchiveID {
		for _, a := range rel.Archives {
			if a.Platform == plat {
				return ArchiveID{Component: comp.Name, Version: rel.Version, Platform: plat, CUDAVariant: a.CUDAVariant, SHA256: a.SHA256}
			}
		}
		t.Fatalf("no %s archive", plat)
		return ArchiveID{}
	}
	x86, sbsa := id("linux-x86_64"), id("linux-sbsa")
	ex, err := base.Excerpt([]ArchiveID{x86, x86})
	if err != nil {
		t.Fatal(err)
	}
	data, err := ex.Encode("excerpt")
	if err != nil {
		t.Fatal(err)
	}
	again, err := ex.Encode("excerpt")
	if err != nil || string(again) != string(data) {
		t.Fatal("the excerpt does not encode to the same bytes twice")
	}
	layer, err := Parse(data, "excerpt.yaml")
	if err != nil {
		t.Fatalf("the excerpt does not read back: %v\n%s", err, data)
	}
	if got := len(layer.Components()); got != 1 {
		t.Fatalf("the excerpt holds %d components, want 1:\n%s", got, data)
	}
	bare, err := Parse([]byte("format: 1\n"), "bare.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sbsaEx, err := base.Excerpt([]ArchiveID{sbsa})
	if err != nil {
		t.Fatal(err)
	}
	layered, err := Layer(bare, layer, sbsaEx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []ArchiveID{x86, sbsa} {
		_, _, a, err := layered.Find(want)
		if err != nil {
			t.Fatal(err)
		}
		_, _, orig, _ := base.Find(want)
		if a.RelativePath != orig.RelativePath || a.Size != orig.Size {
			t.Fatalf("%s: %s (%d bytes) in the layer, %s (%d) in the catalog", want, a.RelativePath, a.Size, orig.RelativePath, orig.Size)
		}
		if got := layered.URL(mustComponent(t, layered, want.Component), a); got != base.URL(comp, orig) {
			t.Fatalf("%s: URL %s, want %s", want, got, base.URL(comp, orig))
		}
	}

	wrong := x86
	wrong.SHA256 = strings.Repeat("0", 64)
	if _, err := base.Excerpt([]ArchiveID{wrong}); err == nil || !strings.Contains(err.Error(), "the plan's sha256 is "+wrong.SHA256) {
		t.Fatalf("an archive with another sha256: %v", err)
	}
	unknown := x86
	unknown.Version = "0.0.0.0"
	if _, err := base.Excerpt([]ArchiveID{unknown}); err == nil || !strings.Contains(err.Error(), "libcudss 0.0.0.0 (linux-x86_64") {
		t.Fatalf("an archive the catalog lacks: %v", err)
	}
}

func mustComponent(t *testing.T, c *Catalog, name string) *Component {
	t.Helper()
	comp, ok := c.Component(name)
	if !ok {
		t.Fatalf("no component %s", name)
	}
	return comp
}
