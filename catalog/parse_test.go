package catalog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/fuzzseed"
	"github.com/cudadeps/cudadeps/platform"
)

// lineIn is the 1-based line of the first occurrence of marker in text.
func lineIn(t *testing.T, text, marker string) int {
	t.Helper()
	i := strings.Index(text, marker)
	if i < 0 {
		t.Fatalf("marker %q not in text", marker)
	}
	return strings.Count(text[:i], "\n") + 1
}

func TestParseRejectsWithLine(t *testing.T) {
	cases := []struct {
		name     string
		old, new string // replacement applied to testCatalog
		marker   string // the line the error must point at
		msg      string
	}{
		{"unknown key", "    license: Foo\n", "    license: Foo\n    licence: Foo\n", "licence:", `unknown key "licence"`},
		{"bad sha256", "sha256: " + sha3, "sha256: ABC" + sha3[3:], "sha256: ABC", "not 64 lower-case hex digits"},
		{"short sha256", "sha256: " + sha3, "sha256: abc", "sha256: abc", "not 64 lower-case hex digits"},
		{"negative size", "size: 300", "size: -3", "size: -3", "positive number of bytes"},
		{"size as text", "size: 300", "size: lots", "size: lots", "cannot unmarshal"},
		{"unknown platform", "platform: linux-aarch64", "platform: linux-ppc64le", "platform: linux-ppc64le", `unknown platform "linux-ppc64le"`},
		{"duplicate release", "- version: 13.0.0", "- version: 12.9.1", "- version: 12.9.1\n        release: 13.0.0", "release 12.9.1 is listed twice"},
		{"duplicate archive", "platform: linux-aarch64", "platform: linux-x86_64", "platform: linux-x86_64\n            path: libfoo/linux-aarch64", "two archives for linux-x86_64"},
		{"duplicate component", "  nvpl_bar:\n", "  libfoo:\n", "  libfoo:\n    product: nvpl", `already defined`},
		{"bad soname", "sonames: [libfoo.so.13]", "sonames: [lib/foo.so.13]", "sonames: [lib/foo", "is not a soname"},
		{"soname twice", "sonames: [libfoo.so.13]", "sonames: [libfoo.so.13, libfoo.so.13]", "sonames: [libfoo.so.13, libfoo", "listed twice"},
		{"path escapes", "path: libfoo/linux-x86_64/libfoo-13.0.0", "path: ../libfoo/linux-x86_64/libfoo-13.0.0", "path: ../", "must be a relative path"},
		{"absolute path", "path: libfoo/linux-x86_64/libfoo-13.0.0", "path: /libfoo/linux-x86_64/libfoo-13.0.0", "path: /libfoo", "must be a relative path"},
		{"bad variant", "            path: libfoo/linux-x86_64/libfoo-13.0.0", "            cuda_variant: cu13\n            path: libfoo/linux-x86_64/libfoo-13.0.0", "cuda_variant: cu13", `cuda_variant "cu13" is not cudaN`},
		{"variant contradicts release", "            path: libfoo/linux-x86_64/libfoo-13.0.0", "            cuda_variant: cuda12\n            path: libfoo/linux-x86_64/libfoo-13.0.0", "cuda_variant: cuda12", "contradicts the release's cuda 13"},
		{"bad date", `date: "2025-08-04"`, `date: "4 Aug 2025"`, `date: "4 Aug`, "not YYYY-MM-DD"},
		{"wrong format", "format: 1", "format: 2", "format: 2", "format must be 1"},
		{"undefined product", "    product: nvpl\n", "    product: nvpll\n", "  nvpl_bar:", `product "nvpll" is not defined`},
		{"driver inside archive", "sonames: [libnvpl_bar.so.0]\n      - version: 0.10.0", "sonames: [libcuda.so.1]\n      - version: 0.10.0", "          - platform: linux-sbsa\n            path: nvpl_bar/linux-sbsa/nvpl_bar-0.4.0", "libcuda.so.1 is a driver library"},
		{"http base without slash", "base_url: https://example.com/nvpl/redist/", "base_url: https://example.com/nvpl/redist", "base_url: https://example.com/nvpl/redist\n", "must end in /"},
		{"ftp base", "base_url: https://example.com/nvpl/redist/", "base_url: ftp://example.com/nvpl/", "base_url: ftp:", "https://, http:// or file:///"},
		{"driver without advice", "    advice: install the driver\n", "    advice: \"\"\n", "  libcuda.so.1:", "advice is missing"},
		{"archive without sonames", "sonames: [libnvpl_bar.so.0]\n      - version: 0.10.0", "sonames: []\n      - version: 0.10.0", "sonames: []", "lists no sonames"},
		{"endless version", "- version: 12.9.1", "- version: " + strings.Repeat("1.", 50_000) + "1", "- version: 1.1.1", "a version of 100001 characters (at most 128)"},
		{"syntax", "  nvpl_bar:\n    product: nvpl\n", "  nvpl_bar:\n    product: [nvpl\n", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(testCatalog, tc.old, tc.new, 1)
			if text == testCatalog {
				t.Fatalf("replacement %q did not apply", tc.old)
			}
			_, err := Parse([]byte(text), "extra.yaml")
			if err == nil {
				t.Fatal("Parse accepted a bad catalog")
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("want *ParseError, got %T %v", err, err)
			}
			if pe.Pos.File != "extra.yaml" {
				t.Errorf("error names %q, want extra.yaml: %v", pe.Pos.File, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if tc.marker == "" {
				if pe.Pos.Line == 0 {
					t.Errorf("syntax error without a line: %v", err)
				}
				return
			}
			if want := lineIn(t, text, tc.marker); pe.Pos.Line != want {
				t.Errorf("line %d, want %d: %v", pe.Pos.Line, want, err)
			}
			wantContains(t, err.Error(), tc.msg)
		})
	}
}

func TestParseReadsEverything(t *testing.T) {
	c := mustParse(t, testCatalog, "t.yaml")
	foo, ok := c.Component("libfoo")
	if !ok {
		t.Fatal("libfoo missing")
	}
	if foo.Title != "Foo library" || foo.License != "Foo" || foo.Product != "cuda" {
		t.Errorf("fields: %+v", foo)
	}
	// Component sonames unite the declared ones and what archives provide.
	if got := strings.Join(foo.Sonames, " "); got != "libfoo.so.11 libfoo.so.12 libfoo.so.13" {
		t.Errorf("sonames %q", got)
	}
	if foo.Releases[0].Version != "13.0.0" || foo.Releases[1].Version != "12.9.1" {
		t.Errorf("releases not newest first: %s, %s", foo.Releases[0].Version, foo.Releases[1].Version)
	}
	a := foo.Releases[1].Archives[1]
	if a.Platform != platform.LinuxAarch64 || a.Size != 200 || a.SHA256 != sha2 || a.CUDAMajor(foo.Releases[1]) != 12 {
		t.Errorf("archive: %+v", a)
	}
	bar, _ := c.Component("nvpl_bar")
	if bar.Releases[0].Version != "0.10.0" {
		t.Errorf("0.10.0 must sort above 0.4.0, got %s first", bar.Releases[0].Version)
	}
	if got := strings.Join(foo.platforms(), ","); got != "linux-x86_64,linux-aarch64" {
		t.Errorf("platforms %q", got)
	}
	if d, ok := c.Driver("libcuda.so.1"); !ok || d.Advice != "install the driver" {
		t.Errorf("driver: %+v", d)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	c := mustParse(t, testCatalog, "t.yaml")
	first, err := c.Encode("header line")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(first, []byte("# header line\nformat: 1\n")) {
		t.Errorf("header missing: %.60q", first)
	}
	again, err := mustParse(t, string(first), "re.yaml").Encode("header line")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Errorf("encode → parse → encode changed the catalog:\n%s\n---\n%s", first, again)
	}
}

const layerText = `format: 1
products:
  nvpl:
    base_url: https://mirror.example/nvpl/
drivers:
  libnvidia-foo.so.1:
    advice: comes with the driver
components:
  nvpl_bar:
    product: nvpl
    releases:
      - version: 0.10.0
        archives:
          - platform: linux-sbsa
            path: nvpl_bar/linux-sbsa/nvpl_bar-0.10.0-fixed.tar.xz
            sha256: ` + sha3 + `
            size: 21
            sonames: [libnvpl_bar.so.0]
      - version: 0.11.0
        archives:
          - platform: linux-sbsa
            path: nvpl_bar/linux-sbsa/nvpl_bar-0.11.0-archive.tar.xz
            sha256: ` + sha1 + `
            size: 30
            sonames: [libnvpl_bar.so.0, libnvpl_bar_extra.so.0]
`

func TestLayerLaterWins(t *testing.T) {
	base := mustParse(t, testCatalog, "base.yaml")
	layer, err := parseUnchecked([]byte(layerText), "layer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(layerText), "layer.yaml"); err != nil {
		t.Fatalf("a layer that defines its products also parses alone: %v", err)
	}
	out, err := Layer(base, layer)
	if err != nil {
		t.Fatal(err)
	}
	bar, _ := out.Component("nvpl_bar")
	if len(bar.Releases) != 3 || bar.Releases[0].Version != "0.11.0" {
		t.Fatalf("releases after layering: %d, newest %s", len(bar.Releases), bar.Releases[0].Version)
	}
	if a := bar.Releases[1].Archives[0]; a.SHA256 != sha3 || a.Size != 21 {
		t.Errorf("release 0.10.0 not replaced by the layer: %+v", a)
	}
	m, err := out.Which("libnvpl_bar_extra.so.0", Query{Platform: platform.LinuxSBSA})
	if err != nil {
		t.Fatal(err)
	}
	if m.URL != "https://mirror.example/nvpl/nvpl_bar/linux-sbsa/nvpl_bar-0.11.0-archive.tar.xz" {
		t.Errorf("layer's base_url not used: %s", m.URL)
	}
	if _, ok := out.Driver("libnvidia-foo.so.1"); !ok {
		t.Error("layer's driver missing")
	}
	if p, _ := out.Product("nvpl"); p.Title != "NVPL" {
		t.Errorf("a layer without a title keeps the base's: %q", p.Title)
	}
	// The base is not changed by layering.
	if b, _ := base.Component("nvpl_bar"); len(b.Releases) != 2 || b.Releases[0].Archives[0].Size != 20 {
		t.Error("Layer modified its base")
	}
	if p, _ := base.Product("nvpl"); p.BaseURL != "https://example.com/nvpl/redist/" {
		t.Error("Layer modified the base's product")
	}
}

func TestLayerNeedsProducts(t *testing.T) {
	layer := `format: 1
components:
  libnew:
    product: nowhere
    sonames: [libnew.so.1]
`
	l, err := parseUnchecked([]byte(layer), "l.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := mustParse(t, testCatalog, "base.yaml")
	_, err = Layer(base, l)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Pos.File != "l.yaml" || pe.Pos.Line != 3 {
		t.Fatalf("Layer: want l.yaml:3 error, got %v", err)
	}
	c, err := ValidateLayer(base, []byte(layer), "l.yaml")
	if c != nil || !errors.As(err, &pe) || pe.Pos.File != "l.yaml" || pe.Pos.Line != 3 {
		t.Fatalf("ValidateLayer: want l.yaml:3 error and no catalog, got %v, %v", c, err)
	}
}

func TestNormalizeMirror(t *testing.T) {
	good := map[string]string{
		"https://mirror.internal/nvidia":  "https://mirror.internal/nvidia/",
		"http://127.0.0.1:8080/redist/":   "http://127.0.0.1:8080/redist/",
		"file:///srv/nvidia":              "file:///srv/nvidia/",
		"file://localhost/srv/nvidia/":    "file://localhost/srv/nvidia/",
		"https://mirror.internal/a/b/c//": "https://mirror.internal/a/b/c//",
	}
	for in, want := range good {
		got, err := NormalizeMirror(in)
		if err != nil || got != want {
			t.Errorf("NormalizeMirror(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://x/", "/srv/nvidia", "srv", "file://host/srv", "file:srv", "https:///x", "https://x/?a=b", ""} {
		if got, err := NormalizeMirror(bad); err == nil {
			t.Errorf("NormalizeMirror(%q) = %q, want an error", bad, got)
		}
	}
}

func TestLoadLayersFilesAndMirror(t *testing.T) {
	dir := t.TempDir()
	extra := filepath.Join(dir, "site.yaml")
	text := `format: 1
components:
  libcudss:
    product: cudss
    releases:
      - version: 99.0.0.1
        date: "2099-01-01"
        archives:
          - platform: linux-sbsa
            cuda_variant: cuda13
            path: libcudss/linux-sbsa/libcudss-linux-sbsa-99.0.0.1_cuda13-archive.tar.xz
            sha256: ` + sha1 + `
            size: 1234
            sonames: [libcudss.so.0]
`
	if err := os.WriteFile(extra, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	c := loadDefault(t, LoadOptions{Extra: []string{extra}, Mirror: "file:///srv/nvidia"})
	m, err := c.Which("libcudss.so.0", Query{Platform: platform.LinuxSBSA, CUDAMajor: 13})
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != "99.0.0.1" || m.Size != 1234 {
		t.Errorf("the extra catalog's newer release was not chosen: %s %d", m.Version, m.Size)
	}
	if m.URL != "file:///srv/nvidia/libcudss/linux-sbsa/libcudss-linux-sbsa-99.0.0.1_cuda13-archive.tar.xz" {
		t.Errorf("mirror not applied: %s", m.URL)
	}
	// The default's own archives are still there for CUDA 12.
	if m12, err := c.Which("libcudss.so.0", Query{Platform: platform.LinuxSBSA, CUDAMajor: 12}); err != nil || m12.Version == "99.0.0.1" {
		t.Errorf("CUDA 12 cuDSS: %+v, %v", m12, err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(text, "size: 1234", "size: 0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(t.Context(), LoadOptions{Extra: []string{extra, bad}})
	if err == nil || !strings.HasPrefix(err.Error(), bad+":13: ") {
		t.Errorf("want %s:13: …, got %v", bad, err)
	}
	if _, err := Load(t.Context(), LoadOptions{Extra: []string{filepath.Join(dir, "absent.yaml")}}); err == nil {
		t.Error("a missing catalog file must be an error")
	}
	if _, err := Load(t.Context(), LoadOptions{Mirror: "ftp://x/"}); err == nil {
		t.Error("a bad mirror must be an error")
	}
}

// parseSeeds are FuzzParse's seed corpus (testdata/fuzz/FuzzParse): a
// whole catalog in few bytes (flow style), YAML anchors and aliases, and
// documents of the wrong shape. Small, so that the fuzzer mutates rather
// than minimises.
func parseSeeds() map[string][]byte {
	return map[string][]byte{
		"catalog": []byte("format: 1\nproducts: {p: {title: P, base_url: \"https://x/\"}}\ndrivers: {libcuda.so.1: {advice: a}}\n" +
			"components: {c: {product: p, sonames: [libc.so.1], releases: [{version: 1.2, release: 13.0.2, cuda: 13, archives: [{platform: linux-x86_64, cuda_variant: cuda13, path: a, sha256: " + sha1 + ", size: 1, sonames: [libc.so.1]}]}]}}\n"),
		"alias":    []byte("format: 1\ncomponents:\n  a:\n    product: b\n    releases: *x\n"),
		"anchor":   []byte("format: 1\nproducts: &p {a: {title: x}}\ncomponents: {c: {product: a, releases: [{version: 1, archives: [null]}]}}\n"),
		"sequence": []byte("- 1\n- 2\n"),
	}
}

// TestFuzzParseSeeds keeps the committed seed corpus what parseSeeds makes
// (CUDADEPS_UPDATE_SEEDS=1 rewrites it).
func TestFuzzParseSeeds(t *testing.T) {
	seeds := parseSeeds()
	fuzzseed.Check(t, "FuzzParse", seeds)
	if _, err := Parse(seeds["catalog"], "seed.yaml"); err != nil {
		t.Errorf("the catalog seed must parse, so that mutations start from a valid catalog: %v", err)
	}
}

// FuzzParse: a catalog that parses encodes, re-parses and encodes to the
// same bytes; an error names the file.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		out, err := c.Encode("")
		if err != nil {
			t.Fatalf("Encode of a parsed catalog: %v", err)
		}
		c2, err := Parse(out, "again.yaml")
		if err != nil {
			t.Fatalf("re-parse of encoded catalog: %v\n%s", err, out)
		}
		out2, _ := c2.Encode("")
		if !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not stable:\n%s\n---\n%s", out, out2)
		}
	})
}
