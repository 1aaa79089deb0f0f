package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
)

// TestImportScanThroughFetch runs `catalog import --scan` against a local
// mirror: the archives are downloaded and unpacked by the fetch code, and the
// sonames recorded are exactly those of the ELF files inside.
func TestImportScanThroughFetch(t *testing.T) {
	arch := mirrortest.Archive{
		Component: "libcudss", Product: "cudss", Version: "0.9.0.1", Platform: "linux-x86_64", Variant: "cuda13",
		Libs: map[string]elfwrite.Spec{
			"libcudss.so.0.9.0":         {Soname: "libcudss.so.0"},
			"libcudss_extra.so.0.9.0":   {Soname: "libcudss_extra.so.0"},
			"stubs/libcudss_stub.so":    {Soname: "libcudss_stub_only.so"},
			"libcudss_static_helper.so": {},
		},
		Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.0", "libcudss.so": "libcudss.so.0"},
	}
	m := mirrortest.Serve(t, []mirrortest.Archive{arch})
	sum, size := archiveFacts(t, m.Dir, arch.RelativePath())
	manifest := map[string]any{
		"release_date": "2026-01-01", "release_label": "0.9.0", "release_product": "cudss",
		"libcudss": map[string]any{
			"name": "NVIDIA cuDSS library", "license": "cuDSS library", "version": "0.9.0.1",
			"cuda_variant": []string{"13"},
			"linux-x86_64": map[string]any{"cuda13": map[string]any{"relative_path": arch.RelativePath(), "sha256": sum, "size": size}},
		},
	}
	data, _ := json.Marshal(manifest)
	mf := filepath.Join(t.TempDir(), "redistrib_0.9.0.json")
	if err := os.WriteFile(mf, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "scanned.yaml")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, stdout, stderr := runCLI(t, "catalog", "import", "--scan", "--quiet", "--mirror", m.URL, "--platform", "linux-x86_64", "-o", out, mf)
	if code != exitOK {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	body, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	for _, want := range []string{"libcudss.so.0", "libcudss_extra.so.0"} {
		if !strings.Contains(text, want) {
			t.Errorf("scanned catalog lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "libcudss_stub_only.so") {
		t.Errorf("a link-time stub was recorded as provided:\n%s", text)
	}
	if m.Total() == 0 {
		t.Errorf("the mirror served nothing")
	}
	// The scanned catalog is a valid layer that answers which.
	code, stdout, stderr = runCLI(t, "catalog", "which", "libcudss_extra.so.0", "--catalog", out, "--platform", "linux-x86_64", "--cuda", "13", "--json")
	if code != exitOK || !strings.Contains(stdout, `"version": "0.9.0.1"`) {
		t.Fatalf("which on the scanned catalog: exit %d\n%s%s", code, stdout, stderr)
	}
}

func archiveFacts(t *testing.T, dir, rel string) (string, string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return sha256Hex(data), itoa(len(data))
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func itoa(n int) string { return strconv.Itoa(n) }
