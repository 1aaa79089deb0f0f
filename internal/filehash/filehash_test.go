package filehash

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// TestSHA256AgainstSha256sum: the digest is the one sha256sum prints, and a
// missing file's error says so.
func TestSHA256AgainstSha256sum(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(strings.Repeat("cudadeps\n", 10000)), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := SHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sha256sum", p).Output()
	lddtest.Need(t, err == nil, "no sha256sum to compare with: %v", err)
	if want := strings.Fields(string(out))[0]; got != want {
		t.Errorf("SHA256 = %s, sha256sum says %s", got, want)
	}
	if _, err := SHA256(p + ".absent"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
