package wheelwrite

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

func demo() Wheel {
	return Wheel{Project: "demo-pkg", Version: "0.1", Tags: "py3-none-any",
		Metadata: "Requires-Dist: nvidia-cublas==13.1.0.3\n",
		Files: map[string][]byte{
			"demo_pkg/__init__.py":     []byte("X = 1\n"),
			"demo_pkg/lib/libdemo.so":  []byte("not really ELF\n"),
			"demo_pkg/data/README.txt": []byte("hello\n"),
		}}
}

// TestRecordMatchesMembers reads the wheel back: every member but RECORD is
// listed in RECORD with its sha256 (urlsafe base64, unpadded) and size, and
// RECORD lists itself without either; METADATA carries the requirements.
func TestRecordMatchesMembers(t *testing.T) {
	w := demo()
	data, err := w.Build()
	if err != nil {
		t.Fatal(err)
	}
	again, _ := w.Build()
	if !bytes.Equal(data, again) {
		t.Error("two builds differ")
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	members := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		members[f.Name] = b
	}
	record := string(members["demo_pkg-0.1.dist-info/RECORD"])
	lines := strings.Split(strings.TrimSpace(record), "\n")
	if len(lines) != len(members) {
		t.Fatalf("RECORD has %d lines for %d members:\n%s", len(lines), len(members), record)
	}
	for _, line := range lines {
		parts := strings.Split(line, ",")
		if len(parts) != 3 {
			t.Fatalf("RECORD line %q", line)
		}
		body, ok := members[parts[0]]
		if !ok {
			t.Errorf("RECORD names %s, which the wheel lacks", parts[0])
			continue
		}
		if parts[0] == "demo_pkg-0.1.dist-info/RECORD" {
			if parts[1] != "" || parts[2] != "" {
				t.Errorf("RECORD's own line %q", line)
			}
			continue
		}
		sum := sha256.Sum256(body)
		if parts[1] != "sha256="+base64.RawURLEncoding.EncodeToString(sum[:]) || parts[2] != strconv.Itoa(len(body)) {
			t.Errorf("RECORD line %q does not match the member", line)
		}
	}
	if !strings.Contains(string(members["demo_pkg-0.1.dist-info/METADATA"]), "Requires-Dist: nvidia-cublas==13.1.0.3\n") {
		t.Errorf("METADATA:\n%s", members["demo_pkg-0.1.dist-info/METADATA"])
	}
	if w.Filename() != "demo_pkg-0.1-py3-none-any.whl" {
		t.Errorf("Filename = %s", w.Filename())
	}
}

// TestPipInstalls is the judge: pip installs the wheel into a new virtual
// environment (offline, no dependencies) and Python imports it.
func TestPipInstalls(t *testing.T) {
	py := lddtest.Venv(t)
	w := demo()
	data, err := w.Build()
	if err != nil {
		t.Fatal(err)
	}
	whl := filepath.Join(t.TempDir(), w.Filename())
	if err := os.WriteFile(whl, data, 0o644); err != nil {
		t.Fatal(err)
	}
	lddtest.PipInstall(t, py, whl)
	if out, err := exec.Command(py, "-c", "import demo_pkg; assert demo_pkg.X == 1").CombinedOutput(); err != nil {
		t.Fatalf("import after pip install: %v\n%s", err, out)
	}
}
