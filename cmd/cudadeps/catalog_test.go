package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/dotted"
)

// cli runs one cudadeps command line in-process.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The embedded catalog is exactly what `catalog import` makes of the
// manifests in catalog/manifests: regenerate it with `go generate ./catalog`.
func TestDefaultCatalogIsRegenerated(t *testing.T) {
	out := filepath.Join(t.TempDir(), "catalog.yaml")
	_, stderr, code := cli(t, "catalog", "import", "-q", repoFile(t, "catalog/manifests"), "-o", out)
	if code != 0 {
		t.Fatalf("import exited %d: %s", code, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(repoFile(t, "catalog/catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("catalog.yaml is stale: run `go generate ./catalog` (got %d bytes, committed %d)", len(got), len(want))
	}
}

// manifestArchive reads one archive of a manifest with plain JSON.
func manifestArchive(t *testing.T, file, component, platform, variant string) (version, path, sha string, size int64) {
	t.Helper()
	data, err := os.ReadFile(repoFile(t, "catalog/manifests/"+file))
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	var comp map[string]json.RawMessage
	if err := json.Unmarshal(top[component], &comp); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(comp["version"], &version)
	entry := comp[platform]
	if variant != "" {
		var byVariant map[string]json.RawMessage
		if err := json.Unmarshal(entry, &byVariant); err != nil {
			t.Fatal(err)
		}
		entry = byVariant[variant]
	}
	var a struct {
		RelativePath string      `json:"relative_path"`
		SHA256       string      `json:"sha256"`
		Size         json.Number `json:"size"`
	}
	if err := json.Unmarshal(entry, &a); err != nil {
		t.Fatal(err)
	}
	n, err := a.Size.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return version, a.RelativePath, a.SHA256, n
}

func TestWhichCuDSSJSON(t *testing.T) {
	stdout, stderr, code := cli(t, "catalog", "which", "libcudss.so.0", "--platform", "linux-sbsa", "--cuda", "13", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	for _, k := range []string{"soname", "component", "product", "version", "platform", "cuda_variant", "url", "sha256", "size"} {
		if _, ok := got[k]; !ok {
			t.Errorf("key %q missing from %s", k, stdout)
		}
	}
	// cudss_0.8.0.json is the newest cuDSS manifest with a linux-sbsa CUDA 13 build.
	version, path, sha, size := manifestArchive(t, "cudss_0.8.0.json", "libcudss", "linux-sbsa", "cuda13")
	if got["component"] != "libcudss" || got["product"] != "cudss" || got["version"] != version ||
		got["platform"] != "linux-sbsa" || got["cuda_variant"] != "cuda13" || got["sha256"] != sha ||
		got["size"] != float64(size) || got["url"] != "https://developer.download.nvidia.com/compute/cudss/redist/"+path {
		t.Errorf("which gave %s; manifest says %s %s %s %d", stdout, version, path, sha, size)
	}

	// --mirror rewrites the URL to the mirror plus the relative path.
	stdout, _, code = cli(t, "catalog", "which", "libcudss.so.0", "--platform", "linux-sbsa", "--cuda", "13", "--json", "--mirror", "http://127.0.0.1:8080/nv")
	if code != 0 || !strings.Contains(stdout, `"url": "http://127.0.0.1:8080/nv/`+path+`"`) {
		t.Errorf("mirror: exit %d, %s", code, stdout)
	}
}

func TestWhichNVPL(t *testing.T) {
	stdout, _, code := cli(t, "catalog", "which", "libnvpl_lapack_lp64_gomp.so.0", "--platform", "linux-sbsa")
	if code != 0 || !strings.HasPrefix(stdout, "libnvpl_lapack_lp64_gomp.so.0: nvpl_lapack ") {
		t.Errorf("sbsa: exit %d: %s", code, stdout)
	}
	stdout, _, code = cli(t, "catalog", "which", "libnvpl_lapack_lp64_gomp.so.0", "--platform", "linux-x86_64", "--json")
	if code != exitMissing {
		t.Errorf("x86_64: exit %d, want %d", code, exitMissing)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if got["found"] != false || got["component"] != "nvpl_lapack" || !strings.Contains(got["reason"].(string), "NVPL is published for linux-sbsa only") {
		t.Errorf("x86_64: %s", stdout)
	}
}

func TestWhichDriverAndUnknown(t *testing.T) {
	stdout, _, code := cli(t, "catalog", "which", "libcuda.so.1", "--json")
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s", code, err, stdout)
	}
	if len(got) != 4 || got["schema"] != schemaCatalogWhich || got["driver"] != true || got["soname"] != "libcuda.so.1" || !strings.Contains(got["advice"].(string), "driver") {
		t.Errorf("driver JSON: %s", stdout)
	}
	stdout, _, code = cli(t, "catalog", "which", "libnothing.so.7", "--platform", "linux-x86_64")
	if code != exitMissing || !strings.Contains(stdout, "no catalog knows libnothing.so.7") {
		t.Errorf("unknown: exit %d: %s", code, stdout)
	}
	if _, stderr, code := cli(t, "catalog", "which", "libcudss.so.0", "--platform", "linux-ppc64le"); code != exitUsage {
		t.Errorf("bad platform: exit %d: %s", code, stderr)
	}
	if _, stderr, code := cli(t, "catalog", "which", "libcudss.so.0", "--platform", "linux-sbsa", "--mirror", "ftp://x/"); code != exitUsage {
		t.Errorf("bad mirror: exit %d: %s", code, stderr)
	}
}

func TestListAndShow(t *testing.T) {
	stdout, stderr, code := cli(t, "catalog", "list", "--platform", "linux-sbsa", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var list struct {
		Components []struct {
			Component string   `json:"component"`
			Latest    string   `json:"latest"`
			Platforms []string `json:"platforms"`
			Sonames   []string `json:"sonames"`
		} `json:"components"`
		Drivers []struct{ Soname, Advice string } `json:"drivers"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range list.Components {
		names[c.Component] = true
		if len(c.Platforms) != 1 || c.Platforms[0] != "linux-sbsa" || c.Latest == "" {
			t.Errorf("--platform linux-sbsa listed %+v", c)
		}
	}
	// cuDLA is Jetson's: linux-aarch64 up to CUDA 12, linux-sbsa (Thor) from CUDA 13.2.
	if !names["nvpl_lapack"] || !names["libcudss"] || !names["libcudla"] || names["nccl"] {
		t.Errorf("sbsa components: %v", names)
	}
	if len(list.Drivers) == 0 {
		t.Error("no drivers listed")
	}
	stdout, _, code = cli(t, "catalog", "list")
	if code != 0 || !strings.Contains(stdout, "nccl") || !strings.Contains(stdout, "(no archive)") || !strings.Contains(stdout, "libcuda.so.1") {
		t.Errorf("text list: exit %d\n%s", code, stdout)
	}

	stdout, _, code = cli(t, "catalog", "show", "nvpl_lapack", "--json", "--mirror", "file:///srv/nvidia")
	if code != 0 {
		t.Fatalf("show: exit %d", code)
	}
	var show struct {
		Component string `json:"component"`
		Releases  []struct {
			Version  string `json:"version"`
			Archives []struct {
				URL, SHA256 string
				Size        int64
			} `json:"archives"`
		} `json:"releases"`
	}
	if err := json.Unmarshal([]byte(stdout), &show); err != nil {
		t.Fatal(err)
	}
	version, path, sha, size := manifestArchive(t, "nvpl_26.5.json", "nvpl_lapack", "linux-sbsa", "")
	if len(show.Releases) < 3 || show.Releases[0].Version != version {
		t.Fatalf("show releases: %+v", show.Releases)
	}
	if a := show.Releases[0].Archives[0]; a.URL != "file:///srv/nvidia/"+path || a.SHA256 != sha || a.Size != size {
		t.Errorf("show archive %+v, want %s %s %d", a, path, sha, size)
	}
	if _, _, code := cli(t, "catalog", "show", "libnothing"); code != exitMissing {
		t.Errorf("show unknown component: exit %d", code)
	}
	if stdout, _, code := cli(t, "catalog", "show", "libcudss"); code != 0 || !strings.Contains(stdout, "provides libcudss.so.0") {
		t.Errorf("show text: exit %d\n%s", code, stdout)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "site.yaml")
	text := "format: 1\ncomponents:\n  libcudss:\n    product: cudss\n    releases:\n      - version: 9.9.9\n        archives:\n" +
		"          - platform: linux-sbsa\n            cuda_variant: cuda13\n            path: libcudss/x.tar.xz\n" +
		"            sha256: " + strings.Repeat("ab", 32) + "\n            size: 10\n            sonames: [libcudss.so.0]\n"
	if err := os.WriteFile(good, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := cli(t, "catalog", "validate", good)
	if code != 0 || !strings.Contains(stdout, "ok: 1 components, 1 archives") {
		t.Errorf("good file: exit %d: %s%s", code, stdout, stderr)
	}
	// The validated file is used with --catalog: its newer release wins.
	stdout, _, code = cli(t, "catalog", "which", "libcudss.so.0", "--platform", "linux-sbsa", "--cuda", "13", "--catalog", good)
	if code != 0 || !strings.Contains(stdout, "libcudss 9.9.9") {
		t.Errorf("--catalog: exit %d: %s", code, stdout)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(text, strings.Repeat("ab", 32), "xyz", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code = cli(t, "catalog", "validate", bad)
	if code != exitError || stdout != bad+": FAIL: "+bad+":11: libcudss 9.9.9: sha256 \"xyz\" is not 64 lower-case hex digits\n" {
		t.Errorf("bad file: exit %d: %q", code, stdout)
	}
	if _, stderr, code := cli(t, "catalog", "which", "libcudss.so.0", "--platform", "linux-sbsa", "--catalog", bad); code != exitError || !strings.Contains(stderr, bad+":11:") {
		t.Errorf("--catalog bad: exit %d: %s", code, stderr)
	}
	stdout, _, code = cli(t, "catalog", "validate")
	if code != 0 || !strings.HasPrefix(stdout, catalog.DefaultName+": ok") {
		t.Errorf("validate built-in: exit %d: %s", code, stdout)
	}
}

func TestImportOneManifest(t *testing.T) {
	out := filepath.Join(t.TempDir(), "nvpl.yaml")
	_, stderr, code := cli(t, "catalog", "import", repoFile(t, "catalog/manifests/nvpl_26.5.json"), "-o", out, "--platform", "linux-sbsa", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Parse(data, out)
	if err != nil {
		t.Fatalf("import output does not parse: %v", err)
	}
	lapack, ok := c.Component("nvpl_lapack")
	if !ok || len(lapack.Releases) != 1 || lapack.Releases[0].Version != "0.4.0.1" {
		t.Fatalf("nvpl_lapack: %+v", lapack)
	}
	if _, ok := c.Component("libcudss"); !ok {
		t.Error("the table's knowledge of other components is carried along")
	}
	if _, _, code := cli(t, "catalog", "import", filepath.Join(t.TempDir(), "none.json")); code != exitError {
		t.Errorf("missing manifest: exit %d", code)
	}
	if _, _, code := cli(t, "catalog", "import", repoFile(t, "catalog/manifests/nvpl_26.5.json"), "--platform", "windows-x86_64"); code != exitUsage {
		t.Errorf("bad platform: exit %d", code)
	}
}

// newestManifest is the file among catalog/manifests/<product>_*.json with
// the highest release label.
func newestManifest(t *testing.T, product string) (file, label string) {
	t.Helper()
	files, _ := filepath.Glob(repoFile(t, "catalog/manifests/"+product+"_*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var top struct {
			Label string `json:"release_label"`
		}
		if err := json.Unmarshal(data, &top); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if label == "" || dotted.Compare(top.Label, label) > 0 {
			file, label = filepath.Base(f), top.Label
		}
	}
	if file == "" {
		t.Fatalf("no %s manifest", product)
	}
	return file, label
}

// The current data: `catalog which` answers the newest cuDNN, cuSPARSELt
// and TensorRT 10 with the URL, sha256 and size of NVIDIA's manifests.
func TestWhichAnswersCurrentReleases(t *testing.T) {
	tensorrt10 := func(t *testing.T) (string, string) {
		// The newest TensorRT 10 manifest: libnvinfer.so.10 is TensorRT 10's.
		files, _ := filepath.Glob(repoFile(t, "catalog/manifests/tensorrt_10.*.json"))
		best := ""
		for _, f := range files {
			l := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "tensorrt_"), ".json")
			if best == "" || dotted.Compare(l, best) > 0 {
				best = l
			}
		}
		return "tensorrt_" + best + ".json", best
	}
	for _, tc := range []struct {
		soname, product, component, atLeast string
		manifest                            func(t *testing.T) (string, string)
	}{
		{"libcudnn.so.9", "cudnn", "cudnn", "9.27.0", nil},
		{"libcusparseLt.so.0", "cusparselt", "libcusparse_lt", "0.10.0", nil},
		{"libnvinfer.so.10", "tensorrt", "tensorrt", "10.16.1", tensorrt10},
	} {
		t.Run(tc.soname, func(t *testing.T) {
			var file, label string
			if tc.manifest != nil {
				file, label = tc.manifest(t)
			} else {
				file, label = newestManifest(t, tc.product)
			}
			if dotted.Compare(label, tc.atLeast) < 0 {
				t.Fatalf("newest %s manifest is %s, want at least %s", tc.product, label, tc.atLeast)
			}
			version, path, sha, size := manifestArchive(t, file, tc.component, "linux-x86_64", "cuda13")
			stdout, stderr, code := cli(t, "catalog", "which", tc.soname, "--platform", "linux-x86_64", "--cuda", "13", "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var m struct {
				Component, Version, Release, URL, SHA256 string
				Size                                     int64
			}
			if err := json.Unmarshal([]byte(stdout), &m); err != nil {
				t.Fatal(err)
			}
			wantURL := "https://developer.download.nvidia.com/compute/" + tc.product + "/redist/" + path
			if m.Component != tc.component || m.Version != version || m.Release != label || m.URL != wantURL || m.SHA256 != sha || m.Size != size {
				t.Errorf("which %s: %+v\nwant %s %s (%s) %s %s %d", tc.soname, m, tc.component, version, label, wantURL, sha, size)
			}
		})
	}
}

func TestCatalogFlagRefusesDevices(t *testing.T) {
	_, stderr, code := cli(t, "catalog", "which", "libcudnn.so.9", "--platform", "linux-x86_64", "--cuda", "13", "--catalog", "/dev/zero")
	if code != 1 || !strings.Contains(stderr, "/dev/zero: not a regular file") {
		t.Errorf("--catalog /dev/zero: exit %d, %s", code, stderr)
	}
}
