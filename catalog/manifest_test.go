package catalog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/platform"
)

func TestParseManifestShapes(t *testing.T) {
	text := `{
  "release_date": "2025-08-04",
  "release_label": "13.0.0",
  "release_product": "cuda",
  "libfoo": {
    "name": "Foo", "license": "CUDA Toolkit", "license_path": "libfoo/LICENSE.txt", "version": "13.0.1.2",
    "linux-x86_64": {"relative_path": "libfoo/linux-x86_64/libfoo-13.0.1.2-archive.tar.xz", "sha256": "` + sha1 + `", "md5": "x", "size": "1487372"},
    "linux-ppc64le": {"relative_path": "libfoo/linux-ppc64le/x.tar.xz", "sha256": "` + sha1 + `", "size": "1"},
    "windows-x86_64": {"relative_path": "libfoo/windows-x86_64/x.zip", "sha256": "` + sha1 + `", "size": "1"}
  },
  "libvar": {
    "name": "Var", "version": "0.8.0.10", "cuda_variant": ["12", "13"],
    "linux-sbsa": {
      "cuda13": {"relative_path": "libvar/linux-sbsa/libvar-0.8.0.10_cuda13-archive.tar.xz", "sha256": "` + sha3 + `", "size": "30"},
      "cuda12": {"relative_path": "libvar/linux-sbsa/libvar-0.8.0.10_cuda12-archive.tar.xz", "sha256": "` + sha2 + `", "size": 20}
    },
    "linux-aarch64": {"cuda12": {"relative_path": "libvar/linux-aarch64/a.tar.xz", "sha256": "` + sha1 + `", "size": "10"}}
  },
  "driver_assistant": {"name": "x", "version": "0.22", "linux-all": {"relative_path": "a/b", "sha256": "` + sha1 + `", "size": "1"}},
  "cudnn_samples": {"name": "x", "version": "9.12", "source": {"relative_path": "a/b", "sha256": "` + sha1 + `", "size": "1"}}
}`
	m, err := ParseManifest([]byte(text), "redistrib_13.0.0.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.Product != "cuda" || m.Label != "13.0.0" || m.Date != "2025-08-04" || len(m.Components) != 4 {
		t.Fatalf("manifest %+v", m)
	}
	byKey := map[string]*ManifestComponent{}
	for _, c := range m.Components {
		byKey[c.Key] = c
	}
	foo := byKey["libfoo"]
	if foo.Title != "Foo" || foo.License != "CUDA Toolkit" || foo.Version != "13.0.1.2" || len(foo.Archives) != 1 {
		t.Fatalf("libfoo %+v", foo)
	}
	if a := foo.Archives[0]; a.Platform != platform.LinuxX86_64 || a.Size != 1487372 || a.CUDAVariant != "" {
		t.Errorf("libfoo archive %+v", a)
	}
	v := byKey["libvar"]
	if len(v.Archives) != 3 {
		t.Fatalf("libvar archives %d", len(v.Archives))
	}
	got := []string{}
	for _, a := range v.Archives {
		got = append(got, a.Platform+"/"+a.CUDAVariant+"/"+strconv.FormatInt(a.Size, 10))
	}
	if strings.Join(got, " ") != "linux-sbsa/cuda12/20 linux-sbsa/cuda13/30 linux-aarch64/cuda12/10" {
		t.Errorf("libvar archives %v", got)
	}
	if len(byKey["driver_assistant"].Archives)+len(byKey["cudnn_samples"].Archives) != 0 {
		t.Error("linux-all and source entries must be skipped")
	}
}

func TestParseManifestRejects(t *testing.T) {
	base := `{"release_date": "2025-01-01", "release_label": "1.0", "release_product": "p",
  "c": {"version": "1.0", "linux-x86_64": {"relative_path": "c/x.tar.xz", "sha256": "` + sha1 + `", "size": "10"}}}`
	for name, bad := range map[string]string{
		"size":      strings.Replace(base, `"size": "10"`, `"size": "10 MB"`, 1),
		"zero size": strings.Replace(base, `"size": "10"`, `"size": "0"`, 1),
		"sha256":    strings.Replace(base, sha1, "abc", 1),
		"path":      strings.Replace(base, "c/x.tar.xz", "../x.tar.xz", 1),
		"product":   strings.Replace(base, `"release_product": "p",`, ``, 1),
		"variant":   strings.Replace(base, `"linux-x86_64": {"relative_path"`, `"linux-x86_64": {"cu12": {"relative_path"`, 1) + "}",
		"json":      base[:40],
		"version":   strings.Replace(base, `"version": "1.0"`, `"version": ""`, 1),
	} {
		if _, err := ParseManifest([]byte(bad), "bad.json"); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.HasPrefix(err.Error(), "bad.json") {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
}

// Every Linux archive of every copied manifest comes out of ParseManifest
// with its size, checked against a plain JSON walk.
func TestParseManifestRealFiles(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), "catalog", "manifests", "*.json"))
	if len(files) < 20 {
		t.Fatalf("only %d manifests in catalog/manifests", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ParseManifest(data, filepath.Base(f))
		if err != nil {
			t.Fatal(err)
		}
		parsed := map[string]int64{}
		for _, c := range m.Components {
			for _, a := range c.Archives {
				parsed[a.RelativePath] = a.Size
			}
		}
		var raw map[string]any
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatal(err)
		}
		want := 0
		var walk func(v any, linux bool)
		walk = func(v any, linux bool) {
			obj, ok := v.(map[string]any)
			if !ok {
				return
			}
			if p, ok := obj["relative_path"].(string); ok {
				if !linux {
					return
				}
				want++
				size, _ := strconv.ParseInt(obj["size"].(string), 10, 64)
				if got, ok := parsed[p]; !ok || got != size {
					t.Errorf("%s: %s: parsed size %d (present %v), manifest %d", m.Name, p, got, ok, size)
				}
				return
			}
			for k, child := range obj {
				walk(child, linux || platform.Valid(k))
			}
		}
		walk(raw, false)
		if want != len(parsed) || want == 0 {
			t.Errorf("%s: %d Linux archives in the JSON, %d parsed", m.Name, want, len(parsed))
		}
	}
}

// Shapes of NVIDIA's 2025-2026 manifests: a leading newline, a
// windows-arm64 entry holding both cudaN keys and a flat archive, a
// cuda_variant with a minor ("13.1", cuda_compat), a renamed component.
func TestParseManifestNewerShapes(t *testing.T) {
	text := "\n" + `{
  "release_date": "2026-01-12", "release_label": "13.1.1", "release_product": "cuda",
  "cudnn": {
    "name": "cuDNN", "version": "9.27.0.42", "cuda_variant": ["12", "13"],
    "linux-x86_64": {"cuda13": {"relative_path": "cudnn/linux-x86_64/c13.tar.xz", "sha256": "` + sha1 + `", "size": "5"}},
    "windows-arm64": {
      "cuda13": {"relative_path": "cudnn/windows-arm64/a.zip", "sha256": "` + sha2 + `", "size": "7"},
      "relative_path": "cudnn/windows-arm64/b.zip", "sha256": "` + sha3 + `", "md5": "x", "size": "8"
    }
  },
  "cuda_compat": {
    "name": "compat", "version": "590.48.01", "cuda_variant": ["13.1"],
    "linux-sbsa": {"cuda13.1": {"relative_path": "cuda_compat/linux-sbsa/x.tar.xz", "sha256": "` + sha2 + `", "size": "9"}}
  },
  "cccl": {"name": "CCCL", "version": "3.1.0", "linux-x86_64": {"relative_path": "cccl/linux-x86_64/y.tar.xz", "sha256": "` + sha3 + `", "size": "3"}}
}`
	m, err := ParseManifest([]byte(text), "redistrib_13.1.1.json")
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]*ManifestComponent{}
	for _, c := range m.Components {
		byKey[c.Key] = c
	}
	if c := byKey["cudnn"]; len(c.Archives) != 1 || c.Archives[0].Platform != platform.LinuxX86_64 || c.Archives[0].CUDAVariant != "cuda13" {
		t.Errorf("cudnn: windows-arm64 must be ignored: %+v", c.Archives)
	}
	compat := byKey["cuda_compat"]
	if len(compat.Archives) != 1 || compat.Archives[0].CUDAVariant != "cuda13.1" {
		t.Fatalf("cuda_compat archives %+v", compat.Archives)
	}
	a := &Archive{CUDAVariant: compat.Archives[0].CUDAVariant}
	if got := a.CUDAMajor(&Release{}); got != 13 {
		t.Errorf("cuda13.1 is CUDA major %d, want 13", got)
	}
	if c := byKey["cccl"]; c == nil || len(c.Archives) != 1 {
		t.Errorf("cccl: %+v", c)
	}
	// Imported with the embedded table: the renamed header-only component is
	// skipped like its old name, and cuda_compat holds no library.
	c, err := Import(t.Context(), []*Manifest{m}, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cccl", "cuda_compat"} {
		if _, ok := c.Component(name); ok {
			t.Errorf("%s imported", name)
		}
	}
	if comp, ok := c.Component("cudnn"); !ok || len(comp.Releases) != 1 || comp.Releases[0].Archives[0].CUDAMajor(comp.Releases[0]) != 13 {
		t.Errorf("cudnn imported as %+v", comp)
	}
}
