package catalog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/platform"
)

// whichCatalog adds, to testCatalog, a component built per CUDA variant and
// one not tied to CUDA, to exercise the choices Which makes.
const whichCatalog = testCatalog + `  libvar:
    product: cuda
    releases:
      - version: 1.0.0
        date: "2025-01-01"
        archives:
          - platform: linux-x86_64
            cuda_variant: cuda12
            path: libvar/linux-x86_64/libvar-1.0.0_cuda12.tar.xz
            sha256: ` + sha1 + `
            size: 1
            sonames: [libvar.so.1]
          - platform: linux-x86_64
            cuda_variant: cuda13
            path: libvar/linux-x86_64/libvar-1.0.0_cuda13.tar.xz
            sha256: ` + sha2 + `
            size: 2
            sonames: [libvar.so.1]
          - platform: linux-aarch64
            cuda_variant: cuda12
            path: libvar/linux-aarch64/libvar-1.0.0_cuda12.tar.xz
            sha256: ` + sha3 + `
            size: 3
            sonames: [libvar.so.1]
      - version: 1.1.0
        date: "2025-02-01"
        archives:
          - platform: linux-x86_64
            path: libvar/linux-x86_64/libvar-1.1.0.tar.xz
            sha256: ` + sha3 + `
            size: 4
            sonames: [libvar.so.1]
  libany:
    product: cuda
    releases:
      - version: 2.0.0
        archives:
          - platform: linux-x86_64
            path: libany/linux-x86_64/libany-2.0.0.tar.xz
            sha256: ` + sha1 + `
            size: 5
            sonames: [libany.so.2]
      - version: 2.0.1
        archives:
          - platform: linux-x86_64
            cuda_variant: cuda12
            path: libany/linux-x86_64/libany-2.0.1_cuda12.tar.xz
            sha256: ` + sha2 + `
            size: 6
            sonames: [libany.so.2]
          - platform: linux-x86_64
            path: libany/linux-x86_64/libany-2.0.1.tar.xz
            sha256: ` + sha3 + `
            size: 7
            sonames: [libany.so.2]
`

func TestWhichChoosesNewestThatFits(t *testing.T) {
	c := mustParse(t, whichCatalog, "w.yaml")
	for _, tc := range []struct {
		soname   string
		q        Query
		wantSize int64
	}{
		{"libfoo.so.12", Query{Platform: platform.LinuxX86_64, CUDAMajor: 12}, 100},
		{"libfoo.so.12", Query{Platform: platform.LinuxX86_64, CUDAMajor: 0}, 100},
		{"libfoo.so.12", Query{Platform: platform.LinuxAarch64, CUDAMajor: 12}, 200},
		{"libfoo.so.13", Query{Platform: platform.LinuxX86_64, CUDAMajor: 13}, 300},
		{"libnvpl_bar.so.0", Query{Platform: platform.LinuxSBSA, CUDAMajor: 13}, 20}, // 0.10.0 beats 0.4.0; not tied to CUDA
		{"libnvpl_bar.so.0", Query{Platform: platform.LinuxSBSA, CUDAMajor: 0}, 20},
		{"libvar.so.1", Query{Platform: platform.LinuxX86_64, CUDAMajor: 12}, 4},  // 1.1.0, not tied to CUDA, is newer than 1.0.0 for cuda12
		{"libvar.so.1", Query{Platform: platform.LinuxAarch64, CUDAMajor: 12}, 3}, // only 1.0.0 on aarch64
		{"libany.so.2", Query{Platform: platform.LinuxX86_64, CUDAMajor: 12}, 6},  // same version: the exact CUDA build beats the generic one
		{"libany.so.2", Query{Platform: platform.LinuxX86_64, CUDAMajor: 13}, 7},  // no cuda13 build: the generic one
	} {
		m, err := c.Which(tc.soname, tc.q)
		if err != nil {
			t.Errorf("Which(%s, %+v): %v", tc.soname, tc.q, err)
			continue
		}
		if m.Size != tc.wantSize {
			t.Errorf("Which(%s, %+v) chose %s %s (size %d), want size %d", tc.soname, tc.q, m.Version, m.RelativePath, m.Size, tc.wantSize)
		}
		if !slices.Contains(m.Sonames, tc.soname) || m.Platform != tc.q.Platform {
			t.Errorf("match does not provide what was asked: %+v", m)
		}
		if !strings.HasPrefix(m.URL, "https://example.com/") || !strings.HasSuffix(m.URL, m.RelativePath) {
			t.Errorf("URL %q", m.URL)
		}
	}
}

func TestWhichExplainsMisses(t *testing.T) {
	c := mustParse(t, whichCatalog, "w.yaml")
	for _, tc := range []struct {
		soname    string
		q         Query
		component string
		reason    string
	}{
		{"libnope.so.1", Query{Platform: platform.LinuxX86_64, CUDAMajor: 12}, "", "no catalog knows libnope.so.1"},
		{"libfoo.so.11", Query{Platform: platform.LinuxX86_64, CUDAMajor: 12}, "libfoo", "libfoo.so.11 is part of libfoo (CUDA), but no catalog has an archive that provides it"},
		{"libnvpl_bar.so.0", Query{Platform: platform.LinuxX86_64, CUDAMajor: 0}, "nvpl_bar", "NVPL is published for linux-sbsa only"},
		{"libfoo.so.13", Query{Platform: platform.LinuxAarch64, CUDAMajor: 13}, "libfoo", "CUDA 13.0.0 has no linux-aarch64 archives"},
		{"libfoo.so.13", Query{Platform: platform.LinuxAarch64, CUDAMajor: 0}, "libfoo", "CUDA 13.0.0 has no linux-aarch64 archives"},
		{"libfoo.so.12", Query{Platform: platform.LinuxX86_64, CUDAMajor: 13}, "libfoo", "built for CUDA 12 only, not CUDA 13"},
		{"libfoo.so.12", Query{Platform: platform.LinuxSBSA, CUDAMajor: 12}, "libfoo", "CUDA 12.9.1 has no linux-sbsa archives"},
		{"libany.so.2", Query{Platform: platform.LinuxAarch64, CUDAMajor: 12}, "libany", "no linux-aarch64 archive provides it; archives that do are for linux-x86_64"},
		{"libany.so.2", Query{Platform: platform.LinuxSBSA, CUDAMajor: 12}, "libany", "CUDA is published for linux-x86_64 and linux-aarch64 only"},
		{"libvar.so.1", Query{Platform: platform.LinuxAarch64, CUDAMajor: 13}, "libvar", "its linux-aarch64 archives are built for CUDA 12 only, not CUDA 13"},
		{"libvar.so.1", Query{Platform: platform.LinuxX86_64, CUDAMajor: 0}, "libvar", "libvar.so.1 has linux-x86_64 archives for CUDA 12 and 13: say which CUDA major"},
	} {
		_, err := c.Which(tc.soname, tc.q)
		nf := asNotFound(t, err)
		if nf.Component != tc.component || nf.Soname != tc.soname {
			t.Errorf("Which(%s, %+v): component %q, want %q", tc.soname, tc.q, nf.Component, tc.component)
		}
		wantContains(t, nf.Reason, tc.reason)
	}
	if _, err := c.Which("libfoo.so.12", Query{Platform: "linux-ppc64le"}); err == nil {
		t.Error("an unknown platform must be an error")
	}
}

func TestWhichDriver(t *testing.T) {
	c := mustParse(t, testCatalog, "t.yaml")
	m, err := c.Which("libcuda.so.1", Query{}) // no platform needed for advice
	if err != nil || !m.Driver || m.Advice != "install the driver" || m.URL != "" {
		t.Fatalf("driver: %+v, %v", m, err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["driver"] != true || got["soname"] != "libcuda.so.1" || got["advice"] != "install the driver" {
		t.Errorf("driver JSON %s", b)
	}
}

func TestProviders(t *testing.T) {
	c := mustParse(t, whichCatalog, "w.yaml")
	ps := c.Providers("libfoo.so.12")
	if len(ps) != 1 || ps[0].Component != "libfoo" || strings.Join(ps[0].Platforms, ",") != "linux-x86_64,linux-aarch64" || !slices.Equal(ps[0].CUDAMajors, []int{12}) {
		t.Errorf("Providers(libfoo.so.12) = %+v", ps)
	}
	ps = c.Providers("libfoo.so.11") // known, no archive
	if len(ps) != 1 || len(ps[0].Platforms) != 0 {
		t.Errorf("Providers(libfoo.so.11) = %+v", ps)
	}
	if ps := c.Providers("libnope.so"); len(ps) != 0 {
		t.Errorf("Providers(libnope.so) = %+v", ps)
	}
}

// manifestArchive reads one archive entry of a manifest with plain JSON,
// independently of ParseManifest.
type rawArchive struct {
	Version, Path, SHA256, Size string
}

func newestRawArchive(t *testing.T, glob, component, platform, variant string) rawArchive {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), "catalog", "manifests", glob))
	if len(files) == 0 {
		t.Fatalf("no manifests %s", glob)
	}
	var best rawArchive
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		var comp map[string]json.RawMessage
		if json.Unmarshal(m[component], &comp) != nil {
			continue
		}
		var version string
		_ = json.Unmarshal(comp["version"], &version)
		var plat map[string]json.RawMessage
		if json.Unmarshal(comp[platform], &plat) != nil {
			continue
		}
		entry := comp[platform]
		if variant != "" {
			if entry = plat[variant]; entry == nil {
				continue
			}
		}
		var a struct {
			RelativePath string `json:"relative_path"`
			SHA256       string `json:"sha256"`
			Size         string `json:"size"`
		}
		if err := json.Unmarshal(entry, &a); err != nil {
			t.Fatal(err)
		}
		if best.Version == "" || dotted.Compare(version, best.Version) > 0 {
			best = rawArchive{version, a.RelativePath, a.SHA256, a.Size}
		}
	}
	if best.Version == "" {
		t.Fatalf("no %s %s %s archive in %s", component, platform, variant, glob)
	}
	return best
}

func TestDefaultCuDSSForThor(t *testing.T) {
	c := loadDefault(t, LoadOptions{})
	want := newestRawArchive(t, "cudss_*.json", "libcudss", platform.LinuxSBSA, "cuda13")
	m, err := c.Which("libcudss.so.0", Query{Platform: platform.LinuxSBSA, CUDAMajor: 13})
	if err != nil {
		t.Fatal(err)
	}
	if m.Component != "libcudss" || m.Product != "cudss" || m.Version != want.Version || m.CUDAVariant != "cuda13" {
		t.Errorf("got %s %s %s %s, want libcudss %s cuda13", m.Component, m.Product, m.Version, m.CUDAVariant, want.Version)
	}
	if m.SHA256 != want.SHA256 || m.RelativePath != want.Path || want.Size != itoa(m.Size) {
		t.Errorf("archive %s %s %d differs from the manifest's %s %s %s", m.RelativePath, m.SHA256, m.Size, want.Path, want.SHA256, want.Size)
	}
	if m.URL != "https://developer.download.nvidia.com/compute/cudss/redist/"+want.Path {
		t.Errorf("URL %s", m.URL)
	}
	// On CUDA 12 the CUDA 12 build of the same release.
	want12 := newestRawArchive(t, "cudss_*.json", "libcudss", platform.LinuxSBSA, "cuda12")
	if m, err := c.Which("libcudss.so.0", Query{Platform: platform.LinuxSBSA, CUDAMajor: 12}); err != nil || m.SHA256 != want12.SHA256 {
		t.Errorf("CUDA 12: %+v %v, want sha256 %s", m, err, want12.SHA256)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestDefaultNVPL(t *testing.T) {
	c := loadDefault(t, LoadOptions{})
	want := newestRawArchive(t, "nvpl_*.json", "nvpl_lapack", platform.LinuxSBSA, "")
	m, err := c.Which("libnvpl_lapack_lp64_gomp.so.0", Query{Platform: platform.LinuxSBSA})
	if err != nil {
		t.Fatal(err)
	}
	if m.Component != "nvpl_lapack" || m.Version != want.Version || m.SHA256 != want.SHA256 {
		t.Errorf("got %s %s %s, want nvpl_lapack %s %s", m.Component, m.Version, m.SHA256, want.Version, want.SHA256)
	}
	_, err = c.Which("libnvpl_lapack_lp64_gomp.so.0", Query{Platform: platform.LinuxX86_64, CUDAMajor: 12})
	nf := asNotFound(t, err)
	if nf.Component != "nvpl_lapack" || nf.Product != "nvpl" {
		t.Errorf("component %q product %q", nf.Component, nf.Product)
	}
	wantContains(t, nf.Reason, "NVPL is published for linux-sbsa only")
}

func TestDefaultJetson(t *testing.T) {
	c := loadDefault(t, LoadOptions{})
	// Jetson Orin on CUDA 12: the linux-aarch64 archives.
	m, err := c.Which("libcublas.so.12", Query{Platform: platform.LinuxAarch64, CUDAMajor: 12})
	if err != nil {
		t.Fatal(err)
	}
	want := newestRawArchive(t, "cuda_12.*.json", "libcublas", platform.LinuxAarch64, "")
	if m.SHA256 != want.SHA256 || m.Version != want.Version {
		t.Errorf("got %s %s, want %s %s", m.Version, m.SHA256, want.Version, want.SHA256)
	}
	if m, err := c.Which("libcudla.so.1", Query{Platform: platform.LinuxAarch64, CUDAMajor: 12}); err != nil || m.Component != "libcudla" {
		t.Errorf("cuDLA: %+v %v", m, err)
	}
	// CUDA 13 publishes nothing for linux-aarch64.
	_, err = c.Which("libcublas.so.13", Query{Platform: platform.LinuxAarch64, CUDAMajor: 13})
	reason := asNotFound(t, err).Reason
	wantContains(t, reason, "CUDA 13.0.0 to ")
	wantContains(t, reason, " has no linux-aarch64 archives")
}

func TestDefaultCatalogHoldsOnlyWhatManifestsSay(t *testing.T) {
	// Every archive of the default catalog is one of a copied manifest, with
	// the manifest's own sha256 and size.
	type key struct{ path, sha string }
	known := map[key]int64{}
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), "catalog", "manifests", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseManifest(data, filepath.Base(f))
		if err != nil {
			t.Fatal(err)
		}
		for _, mc := range m.Components {
			for _, a := range mc.Archives {
				known[key{a.RelativePath, a.SHA256}] = a.Size
			}
		}
	}
	c := loadDefault(t, LoadOptions{})
	n := 0
	for _, comp := range c.Components() {
		for _, r := range comp.Releases {
			for _, a := range r.Archives {
				n++
				if size, ok := known[key{a.RelativePath, a.SHA256}]; !ok || size != a.Size {
					t.Errorf("%s: %s is not in the manifests as cataloged", comp.Name, a.RelativePath)
				}
			}
		}
	}
	if n < 300 {
		t.Errorf("only %d archives in the default catalog", n)
	}
}

// TestWhichToolkitRelease: with the toolkit release the package's other
// CUDA libraries come from, a toolkit component is taken from that release
// (as NVIDIA's manifest of it lists the archive), not the newest; a release
// the catalog lacks, or a component outside the toolkit, falls back to the
// newest.
func TestWhichToolkitRelease(t *testing.T) {
	c := loadDefault(t, LoadOptions{})
	for _, label := range []string{"13.0.2", "13.0.0", "12.9.1", "13.2.1", "12.8.1"} {
		data, err := os.ReadFile(filepath.Join(repoRoot(t), "catalog", "manifests", "cuda_"+label+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var man map[string]json.RawMessage
		var comp struct {
			Version string `json:"version"`
			Linux   struct {
				SHA256 string `json:"sha256"`
			} `json:"linux-x86_64"`
		}
		if err := json.Unmarshal(data, &man); err != nil || json.Unmarshal(man["cuda_nvrtc"], &comp) != nil {
			t.Fatalf("cuda_%s.json: %v", label, err)
		}
		major := int(label[1]-'0') + 10*int(label[0]-'0')
		m, err := c.Which("libnvrtc.so."+label[:2], Query{Platform: platform.LinuxX86_64, CUDAMajor: major, Toolkit: label})
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != comp.Version || m.SHA256 != comp.Linux.SHA256 || !strings.Contains(m.Pin, label) {
			t.Errorf("toolkit %s: got cuda_nvrtc %s (%s, %q), want %s (%s)", label, m.Version, m.SHA256, m.Pin, comp.Version, comp.Linux.SHA256)
		}
	}
	newest, err := c.Which("libnvrtc.so.13", Query{Platform: platform.LinuxX86_64, CUDAMajor: 13})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.Which("libnvrtc.so.13", Query{Platform: platform.LinuxX86_64, CUDAMajor: 13, Toolkit: "13.99.0"}); err != nil || m.SHA256 != newest.SHA256 {
		t.Errorf("a release the catalog lacks: %+v %v, want the newest %s", m, err, newest.Version)
	}
	cudnn, _ := c.Which("libcudnn.so.9", Query{Platform: platform.LinuxX86_64, CUDAMajor: 13})
	if m, err := c.Which("libcudnn.so.9", Query{Platform: platform.LinuxX86_64, CUDAMajor: 13, Toolkit: "13.0.2"}); err != nil || cudnn == nil || m.SHA256 != cudnn.SHA256 {
		t.Errorf("cuDNN is no toolkit component: %+v %v", m, err)
	}
}
