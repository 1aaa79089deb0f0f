package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Catalog files that are not regular files, or are too large, are refused
// at once with one line naming the file; none is read to its end.
func TestLoadRefusesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "huge.yaml")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4 << 30); err != nil { // 4 GiB, no block written
		t.Fatal(err)
	}
	f.Close()
	for _, tc := range []struct{ path, want string }{
		{"/dev/zero", "not a regular file (a character device)"},
		{fifo, "not a regular file (a FIFO)"},
		{dir, "not a regular file (a directory)"},
		{sparse, "4294967296 bytes, more than the 16777216 this file may hold"},
	} {
		_, err := Load(t.Context(), LoadOptions{Extra: []string{tc.path}})
		if err == nil {
			t.Errorf("%s: loaded", tc.path)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.path) || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q, want one line naming the file and %q", tc.path, msg, tc.want)
		}
	}
}

// A size no archive can have is refused, in a catalog and in a manifest.
func TestAbsurdSizesRefused(t *testing.T) {
	text := strings.Replace(testCatalog, "size: 300", "size: 9223372036854775807", 1)
	if text == testCatalog {
		t.Fatal("replacement did not apply")
	}
	_, err := Parse([]byte(text), "big.yaml")
	if err == nil || !strings.Contains(err.Error(), "big.yaml:") || !strings.Contains(err.Error(), "at most") {
		t.Errorf("size 2^63-1 in a catalog: %v", err)
	}
	manifest := `{"release_date": "2026-01-01", "release_label": "1.0.0", "release_product": "cuda",
  "libfoo": {"version": "1.0.0", "linux-x86_64": {"relative_path": "libfoo/a.tar.xz", "sha256": "` + sha1 + `", "size": "9223372036854775807"}}}`
	if _, err := ParseManifest([]byte(manifest), "redistrib_1.0.0.json"); err == nil || !strings.Contains(err.Error(), "redistrib_1.0.0.json") {
		t.Errorf("size 2^63-1 in a manifest: %v", err)
	}
	// The largest real archive is far below the bound.
	if _, err := ParseManifest([]byte(strings.Replace(manifest, "9223372036854775807", "3721239763", 1)), "m.json"); err != nil {
		t.Errorf("TensorRT's 3.7 GB archive refused: %v", err)
	}
}
