package catalog

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/platform"
)

func TestEmbeddedTable(t *testing.T) {
	tab, err := builtinTable()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range tab.Components {
		for i, r := range tc.Provides {
			if strings.TrimSpace(r.Source) == "" {
				t.Errorf("%s rule %d has no source", name, i)
			}
		}
	}
	// The brief's coverage: every listed library family has a rule.
	for _, comp := range []string{"cuda_cudart", "libcublas", "libcufft", "libcurand", "libcusolver", "libcusparse",
		"libnvjitlink", "cuda_nvrtc", "cuda_cupti", "cuda_nvtx", "libnpp", "libnvjpeg", "libcufile", "libnvfatbin",
		"libcudla", "cudnn", "libcudss", "libcusparse_lt", "libcutensor", "nvpl_blas", "nvpl_lapack", "nvpl_fft",
		"nvpl_rand", "nvpl_sparse", "nvpl_scalapack", "nvpl_tensor"} {
		if _, ok := tab.Components[comp]; !ok {
			t.Errorf("no rule for %s", comp)
		}
	}
	nvrtc := tab.Components["cuda_nvrtc"]
	if got := strings.Join(nvrtc.sonames("13.0.48", 13, platform.LinuxX86_64), " "); got != "libnvrtc-builtins.alt.so.13.0 libnvrtc-builtins.so.13.0 libnvrtc.alt.so.13 libnvrtc.so.13" {
		t.Errorf("nvrtc 13.0.48: %s", got)
	}
	if got := strings.Join(nvrtc.sonames("12.2.140", 12, platform.LinuxX86_64), " "); got != "libnvrtc-builtins.so.12.2 libnvrtc.so.12" {
		t.Errorf("nvrtc 12.2.140: %s", got)
	}
	nvtx := tab.Components["cuda_nvtx"]
	if got := nvtx.sonames("12.8.90", 12, platform.LinuxSBSA); !slices.Equal(got, []string{"libnvToolsExt.so.1"}) {
		t.Errorf("nvtx 12.8: %v", got)
	}
	if got := nvtx.sonames("12.9.79", 12, platform.LinuxSBSA); !slices.Equal(got, []string{"libnvtx3interop.so.1"}) {
		t.Errorf("nvtx 12.9: %v", got)
	}
}

func TestParseTableRejects(t *testing.T) {
	good := "format: 1\nproducts: {p: P}\ncomponents:\n  c:\n    product: p\n    provides:\n      - sonames: [libc.so.1]\n        source: here\n"
	if _, err := ParseTable([]byte(good), "t.yaml"); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"no source":     strings.Replace(good, "        source: here\n", "", 1),
		"unknown key":   strings.Replace(good, "source: here", "source: here\n        sources: x", 1),
		"bad platform":  strings.Replace(good, "- sonames", "- platforms: [windows-x86_64]\n        sonames", 1),
		"bad product":   strings.Replace(good, "product: p", "product: q", 1),
		"bad soname":    strings.Replace(good, "libc.so.1", "libc", 1),
		"skip and rule": good + "skip: [c]\n",
	} {
		_, err := ParseTable([]byte(bad), "t.yaml")
		if err == nil || !strings.HasPrefix(err.Error(), "t.yaml:") {
			t.Errorf("%s: got %v, want a t.yaml:LINE error", name, err)
		}
	}
}

const importTable = `format: 1
products: {cuda: CUDA, lone: Lone}
drivers:
  libcuda.so.1: {advice: install the driver}
skip: [cuda_docs]
components:
  libfoo:
    product: cuda
    provides:
      - cuda: 12
        sonames: [libfoo.so.12]
        source: test
      - cuda: 13
        sonames: [libfoo.so.13, "libfoo-extra.so.{major.minor}"]
        source: test
      - cuda: 13
        platforms: [linux-sbsa]
        sonames: [libfoo_sbsa.so.1]
        source: test
      - cuda: 11
        sonames: [libfoo.so.11]
        source: test
  libvar:
    product: cuda
    provides:
      - since: "2"
        sonames: [libvar.so.2]
        source: test
  lonely:
    product: lone
    provides:
      - sonames: [liblonely.so.1]
        source: test
`

func manifestJSON(product, label, date string, comps map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"release_date": %q, "release_label": %q, "release_product": %q`, date, label, product)
	keys := make([]string, 0, len(comps))
	for k := range comps {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, ",\n%q: %s", k, comps[k])
	}
	return b.String() + "}"
}

func archiveJSON(path, sha string, size int64) string {
	return fmt.Sprintf(`{"relative_path": %q, "sha256": %q, "md5": "0", "size": "%d"}`, path, sha, size)
}

func TestImportFromTable(t *testing.T) {
	tab, err := ParseTable([]byte(importTable), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m13, err := ParseManifest([]byte(manifestJSON("cuda", "13.0.0", "2025-08-04", map[string]string{
		"libfoo": `{"name": "Foo", "license": "L13", "version": "13.0.48",
			"linux-x86_64": ` + archiveJSON("libfoo/x86.tar.xz", sha1, 10) + `,
			"linux-sbsa": ` + archiveJSON("libfoo/sbsa.tar.xz", sha2, 20) + `}`,
		"cuda_docs": `{"name": "Docs", "version": "13.0", "linux-x86_64": ` + archiveJSON("docs/x.tar.xz", sha3, 1) + `}`,
		"mystery":   `{"name": "?", "version": "1.0", "linux-x86_64": ` + archiveJSON("mystery/x.tar.xz", sha3, 1) + `}`,
	})), "cuda_13.0.0.json")
	if err != nil {
		t.Fatal(err)
	}
	m12, err := ParseManifest([]byte(manifestJSON("cuda", "12.9.1", "2025-06-05", map[string]string{
		"libfoo": `{"name": "Foo old", "license": "L12", "version": "12.9.79",
			"linux-aarch64": ` + archiveJSON("libfoo/aarch64.tar.xz", sha3, 30) + `}`,
		"libvar": `{"name": "Var", "version": "2.1.0", "cuda_variant": ["12", "13"],
			"linux-x86_64": {"cuda12": ` + archiveJSON("libvar/12.tar.xz", sha1, 40) + `, "cuda13": ` + archiveJSON("libvar/13.tar.xz", sha2, 50) + `}}`,
	})), "cuda_12.9.1.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Import(t.Context(), []*Manifest{m13, m12}, ImportOptions{Table: tab})
	if err != nil {
		t.Fatal(err)
	}
	foo, ok := c.Component("libfoo")
	if !ok || len(foo.Releases) != 2 {
		t.Fatalf("libfoo: %+v", foo)
	}
	if foo.Title != "Foo" || foo.License != "L13" {
		t.Errorf("title and license come from the newest release: %q %q", foo.Title, foo.License)
	}
	r13 := foo.Releases[0]
	if r13.Version != "13.0.48" || r13.Label != "13.0.0" || r13.CUDA != 13 || len(r13.Archives) != 2 {
		t.Fatalf("release 13: %+v", r13)
	}
	if got := strings.Join(r13.Archives[0].Sonames, " "); got != "libfoo-extra.so.13.0 libfoo.so.13" {
		t.Errorf("x86_64 sonames %q", got)
	}
	if got := strings.Join(r13.Archives[1].Sonames, " "); got != "libfoo-extra.so.13.0 libfoo.so.13 libfoo_sbsa.so.1" {
		t.Errorf("sbsa sonames %q", got)
	}
	if r12 := foo.Releases[1]; r12.CUDA != 12 || r12.Archives[0].Platform != platform.LinuxAarch64 || !slices.Equal(r12.Archives[0].Sonames, []string{"libfoo.so.12"}) {
		t.Errorf("release 12: %+v %+v", r12, r12.Archives[0])
	}
	// Known sonames include the generation without archives.
	if !slices.Contains(foo.Sonames, "libfoo.so.11") {
		t.Errorf("libfoo.so.11 missing from %v", foo.Sonames)
	}
	v, _ := c.Component("libvar")
	if len(v.Releases) != 1 || v.Releases[0].CUDA != 0 || len(v.Releases[0].Archives) != 2 {
		t.Fatalf("libvar: %+v", v.Releases[0])
	}
	// The table-only component and the driver come along; skipped and unknown components do not.
	if l, ok := c.Component("lonely"); !ok || len(l.Releases) != 0 || !slices.Equal(l.Sonames, []string{"liblonely.so.1"}) {
		t.Errorf("lonely: %+v", l)
	}
	for _, gone := range []string{"cuda_docs", "mystery"} {
		if _, ok := c.Component(gone); ok {
			t.Errorf("%s imported", gone)
		}
	}
	if _, ok := c.Driver("libcuda.so.1"); !ok {
		t.Error("driver missing")
	}
	if p, _ := c.Product("cuda"); p.BaseURL != "https://developer.download.nvidia.com/compute/cuda/redist/" || p.Title != "CUDA" {
		t.Errorf("product cuda %+v", p)
	}
	if p, _ := c.Product("lone"); p.BaseURL != "" {
		t.Errorf("a product without archives has no base URL: %+v", p)
	}
	// The result encodes to a catalog that parses back to the same bytes.
	out, err := c.Encode("x")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := mustParse(t, string(out), "x.yaml").Encode("x")
	if !bytes.Equal(out, again) {
		t.Error("imported catalog does not round-trip")
	}

	// Platform and component filters.
	c, err = Import(t.Context(), []*Manifest{m13, m12}, ImportOptions{Table: tab, Platforms: []string{platform.LinuxSBSA}, Components: []string{"libfoo"}})
	if err != nil {
		t.Fatal(err)
	}
	if names := len(c.Components()); names != 1 {
		t.Errorf("%d components with --component libfoo", names)
	}
	foo, _ = c.Component("libfoo")
	if len(foo.Releases) != 1 || foo.Releases[0].Archives[0].Platform != platform.LinuxSBSA {
		t.Errorf("platform filter: %+v", foo.Releases)
	}
}

// --- import --scan against a local HTTP mirror of generated archives --------

type fileSpec struct {
	name    string // below the archive's top directory
	elf     *elfwrite.Spec
	text    string // non-ELF content
	symlink string // link target
}

// buildTarXZ writes an NVIDIA-style archive: one top directory NAME-archive/.
func buildTarXZ(t *testing.T, top string, files []fileSpec) []byte {
	t.Helper()
	var buf bytes.Buffer
	xw, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(xw)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := filepath.Dir(top + "/" + f.name); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	sorted := make([]string, 0, len(dirs))
	for d := range dirs {
		sorted = append(sorted, d)
	}
	slices.Sort(sorted)
	for _, d := range sorted {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		name := top + "/" + f.name
		if f.symlink != "" {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: f.symlink, Mode: 0o777}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data := []byte(f.text)
		if f.elf != nil {
			if data, err = elfwrite.Build(*f.elf); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := xw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testExtractor downloads over HTTP, checks size and sha256, and unpacks
// a .tar.xz: a stand-in for the fetch package with the same contract.
func testExtractor(fetched *[]string) Extractor {
	return func(ctx context.Context, a ArchiveRef, dir string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", a.URL, resp.Status)
		}
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != a.Size || hex.EncodeToString(sum[:]) != a.SHA256 {
			return fmt.Errorf("%s: size or sha256 mismatch", a.URL)
		}
		*fetched = append(*fetched, a.URL)
		xr, err := xz.NewReader(bytes.NewReader(data))
		if err != nil {
			return err
		}
		tr := tar.NewReader(xr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			p := filepath.Join(dir, filepath.FromSlash(h.Name))
			switch h.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(p, 0o755)
			case tar.TypeSymlink:
				err = os.Symlink(h.Linkname, p)
			case tar.TypeReg:
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, b, 0o755)
				}
			}
			if err != nil {
				return err
			}
		}
	}
}

func TestImportScanRecordsSonamesInside(t *testing.T) {
	x86 := buildTarXZ(t, "libfoo-linux-x86_64-13.0.1-archive", []fileSpec{
		{name: "lib/libfoo.so.13.0.1", elf: &elfwrite.Spec{Soname: "libfoo.so.13", Needed: []string{"libc.so.6"}}},
		{name: "lib/libfoo.so.13", symlink: "libfoo.so.13.0.1"},
		{name: "lib/libfoo.so", symlink: "libfoo.so.13"},
		{name: "lib/libfooLt.so.13.0.1", elf: &elfwrite.Spec{Soname: "libfooLt.so.13"}},
		{name: "lib/libfooLt.so.13", symlink: "libfooLt.so.13.0.1"},
		{name: "lib/libfoo_static.a", text: "!<arch>\n"},
		{name: "lib/stubs/libcuda.so", elf: &elfwrite.Spec{Soname: "libcuda.so.1"}},
		{name: "lib/cross/libwrong.so.1", elf: &elfwrite.Spec{Soname: "libwrong.so.1", Machine: elf.EM_AARCH64}},
		{name: "bin/footool", elf: &elfwrite.Spec{Type: elf.ET_EXEC, Interp: "/lib64/ld-linux-x86-64.so.2"}},
		{name: "include/foo.h", text: "#define FOO 1\n"},
		{name: "LICENSE", text: "license text\n"},
	})
	sbsa := buildTarXZ(t, "libfoo-linux-sbsa-13.0.1-archive", []fileSpec{
		{name: "lib/libfoo.so.13.0.1", elf: &elfwrite.Spec{Soname: "libfoo.so.13", Machine: elf.EM_AARCH64}},
		{name: "lib/libfoo.so.13", symlink: "libfoo.so.13.0.1"},
		{name: "lib/libcuda.so.1", elf: &elfwrite.Spec{Soname: "libcuda.so.1", Machine: elf.EM_AARCH64}}, // a driver library is never offered
		{name: "lib/plugin.so", elf: &elfwrite.Spec{Machine: elf.EM_AARCH64}},                            // no SONAME
	})
	files := map[string][]byte{
		"/mirror/libfoo/linux-x86_64/libfoo-linux-x86_64-13.0.1-archive.tar.xz": x86,
		"/mirror/libfoo/linux-sbsa/libfoo-linux-sbsa-13.0.1-archive.tar.xz":     sbsa,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	defer srv.Close()

	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	man, err := ParseManifest([]byte(manifestJSON("cuda", "13.0.0", "2025-08-04", map[string]string{
		"libfoo": `{"name": "Foo", "version": "13.0.1",
			"linux-x86_64": ` + archiveJSON("libfoo/linux-x86_64/libfoo-linux-x86_64-13.0.1-archive.tar.xz", sum(x86), int64(len(x86))) + `,
			"linux-sbsa": ` + archiveJSON("libfoo/linux-sbsa/libfoo-linux-sbsa-13.0.1-archive.tar.xz", sum(sbsa), int64(len(sbsa))) + `}`,
		"cuda_docs": `{"name": "Docs", "version": "13.0", "linux-x86_64": ` + archiveJSON("docs/not-served.tar.xz", sha1, 1) + `}`,
	})), "cuda_13.0.0.json")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ParseTable([]byte(importTable), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fetched []string
	work := t.TempDir()
	c, err := Import(t.Context(), []*Manifest{man}, ImportOptions{
		Table: tab, Extract: testExtractor(&fetched), Mirror: srv.URL + "/mirror", WorkDir: work,
	})
	if err != nil {
		t.Fatal(err)
	}
	foo, ok := c.Component("libfoo")
	if !ok || len(foo.Releases) != 1 {
		t.Fatalf("libfoo: %+v", foo)
	}
	as := foo.Releases[0].Archives
	if len(as) != 2 {
		t.Fatalf("%d archives", len(as))
	}
	if got := strings.Join(as[0].Sonames, " "); as[0].Platform != platform.LinuxX86_64 || got != "libfoo.so.13 libfooLt.so.13" {
		t.Errorf("x86_64 archive records %q", got)
	}
	if got := strings.Join(as[1].Sonames, " "); as[1].Platform != platform.LinuxSBSA || got != "libfoo.so.13" {
		t.Errorf("sbsa archive records %q", got)
	}
	if len(fetched) != 2 || !strings.HasPrefix(fetched[0], srv.URL+"/mirror/libfoo/") {
		t.Errorf("fetched %v: the mirror must be used and skipped components left alone", fetched)
	}
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Errorf("scan left %d entries in its work directory", len(left))
	}
	// The table's view of the same component does not leak into a scan.
	if slices.Contains(as[1].Sonames, "libfoo_sbsa.so.1") {
		t.Error("table sonames mixed into scanned ones")
	}

	// A failing download is an error that names the archive.
	delete(files, "/mirror/libfoo/linux-sbsa/libfoo-linux-sbsa-13.0.1-archive.tar.xz")
	_, err = Import(t.Context(), []*Manifest{man}, ImportOptions{Table: tab, Extract: testExtractor(&fetched), Mirror: srv.URL + "/mirror/", WorkDir: work})
	if err == nil || !strings.Contains(err.Error(), "libfoo-linux-sbsa-13.0.1-archive.tar.xz") {
		t.Errorf("want an error naming the archive, got %v", err)
	}
}
