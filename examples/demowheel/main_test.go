package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// TestCommittedWheelIsGenerated keeps the example wheel what the generator
// writes (regenerate with go run ./examples/demowheel).
func TestCommittedWheelIsGenerated(t *testing.T) {
	want, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", Wheel))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what go run ./examples/demowheel writes", Wheel)
	}
}

// TestWheelInstallsAndFailsAsACUDAWheelFails follows a user from the demo
// wheel to a real resolve: pip installs it into a new venv, `import demo`
// then fails because the loader cannot open a CUDA library, and cudadeps,
// asked about the installed distribution by name through that venv's
// interpreter, plans what it lacks.
func TestWheelInstallsAndFailsAsACUDAWheelFails(t *testing.T) {
	lddtest.Need(t, runtime.GOARCH == "amd64", "the demo wheel is built for x86_64; pip would not install it on %s", runtime.GOARCH)
	py := lddtest.Venv(t)
	whl, err := filepath.Abs(filepath.Join("..", "..", Wheel))
	if err != nil {
		t.Fatal(err)
	}
	lddtest.PipInstall(t, py, whl)
	out, err := exec.Command(py, "-c", "import demo").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot open shared object file") {
		t.Fatalf("import demo after pip install: %v\n%s", err, out)
	}

	bin := filepath.Join(t.TempDir(), "cudadeps")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/cudadeps/cudadeps/cmd/cudadeps").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "resolve", "demo", "--python", py, "--dry-run", "--ld-library-path", "", "--platform", "linux-x86_64")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "PIP_CONFIG_FILE="+os.DevNull)
	plan, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 3 {
		t.Fatalf("resolve demo --dry-run: exit %d (want 3: libraries are missing): %v\n%s", code, err, plan)
	}
	// The two pinned distributions come back at their pins; cuDSS, which
	// nothing declares, by its soname.
	for _, what := range []string{"nvidia-cublas 13.1.0.3", "nvidia-cuda-runtime 13.0.96", "libcudss.so.0"} {
		if !strings.Contains(string(plan), what) {
			t.Errorf("the plan does not name %s:\n%s", what, plan)
		}
	}
}
