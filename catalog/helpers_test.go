package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// repoRoot walks up from the test's directory to the directory with go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// sharedDir is the shared data beside the repository (<repo>/../shared).
// Tests that need it skip without it, unless CUDADEPS_REQUIRE_ORACLES=1.
func sharedDir(t testing.TB, sub string) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(repoRoot(t)), "shared", sub)
	_, err := os.Stat(dir)
	lddtest.Need(t, err == nil, "shared data %s is absent: %v", dir, err)
	return dir
}

// loadDefault is the embedded catalog as Load gives it.
func loadDefault(t testing.TB, opts LoadOptions) *Catalog {
	t.Helper()
	c, err := Load(t.Context(), opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

const sha1 = "1111111111111111111111111111111111111111111111111111111111111111"
const sha2 = "2222222222222222222222222222222222222222222222222222222222222222"
const sha3 = "3333333333333333333333333333333333333333333333333333333333333333"

// testCatalog is a small valid catalog; lines matter to the parse tests.
const testCatalog = `format: 1
products:
  cuda:
    title: CUDA
    base_url: https://example.com/cuda/redist/
  nvpl:
    title: NVPL
    base_url: https://example.com/nvpl/redist/
drivers:
  libcuda.so.1:
    advice: install the driver
components:
  libfoo:
    product: cuda
    title: Foo library
    license: Foo
    sonames: [libfoo.so.11]
    releases:
      - version: 12.9.1
        release: 12.9.1
        date: "2025-06-05"
        cuda: 12
        archives:
          - platform: linux-x86_64
            path: libfoo/linux-x86_64/libfoo-12.9.1-archive.tar.xz
            sha256: ` + sha1 + `
            size: 100
            sonames: [libfoo.so.12]
          - platform: linux-aarch64
            path: libfoo/linux-aarch64/libfoo-12.9.1-archive.tar.xz
            sha256: ` + sha2 + `
            size: 200
            sonames: [libfoo.so.12]
      - version: 13.0.0
        release: 13.0.0
        date: "2025-08-04"
        cuda: 13
        archives:
          - platform: linux-x86_64
            path: libfoo/linux-x86_64/libfoo-13.0.0-archive.tar.xz
            sha256: ` + sha3 + `
            size: 300
            sonames: [libfoo.so.13]
  nvpl_bar:
    product: nvpl
    releases:
      - version: 0.4.0
        archives:
          - platform: linux-sbsa
            path: nvpl_bar/linux-sbsa/nvpl_bar-0.4.0-archive.tar.xz
            sha256: ` + sha1 + `
            size: 10
            sonames: [libnvpl_bar.so.0]
      - version: 0.10.0
        archives:
          - platform: linux-sbsa
            path: nvpl_bar/linux-sbsa/nvpl_bar-0.10.0-archive.tar.xz
            sha256: ` + sha2 + `
            size: 20
            sonames: [libnvpl_bar.so.0]
`

func mustParse(t testing.TB, text, name string) *Catalog {
	t.Helper()
	c, err := Parse([]byte(text), name)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func asNotFound(t testing.TB, err error) *NotFoundError {
	t.Helper()
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("want a *NotFoundError, got %v", err)
	}
	return nf
}

func wantContains(t testing.TB, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%q does not contain %q", got, want)
	}
}
