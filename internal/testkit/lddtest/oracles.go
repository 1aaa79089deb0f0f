package lddtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RequireOracles reports whether missing oracle tools must fail the tests
// (CI) instead of skipping them.
func RequireOracles() bool { return os.Getenv("CUDADEPS_REQUIRE_ORACLES") == "1" }

// Need skips (or, under CUDADEPS_REQUIRE_ORACLES=1, fails) a test when an
// oracle it depends on is missing. Every test that cannot run for want of a
// tool, a package or data goes through here, so that under the variable no
// coverage disappears silently.
func Need(t testing.TB, ok bool, format string, a ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, a...)
	if RequireOracles() {
		t.Fatalf("oracle unavailable (CUDADEPS_REQUIRE_ORACLES=1): %s", msg)
	}
	t.Skipf("oracle unavailable: %s", msg)
}

// Venv creates a Python virtual environment with pip in a new temporary
// directory and returns its interpreter, or skips (fails) the test where
// python3 or its venv module is missing.
func Venv(t testing.TB) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	Need(t, err == nil, "python3 is not installed")
	venv := filepath.Join(t.TempDir(), "venv")
	out, err := exec.Command(py, "-m", "venv", venv).CombinedOutput()
	Need(t, err == nil, "python3 -m venv with pip failed (Debian: python3-venv): %s", out)
	return filepath.Join(venv, "bin", "python")
}

// PipInstall installs the wheel file whl into the venv of python, offline
// and without its dependencies, and fails the test when pip refuses it.
func PipInstall(t testing.TB, python, whl string) {
	t.Helper()
	pip := exec.Command(python, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", "--no-cache-dir", whl)
	pip.Env = append(os.Environ(), "PIP_CONFIG_FILE="+os.DevNull)
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install %s: %v\n%s", filepath.Base(whl), err, out)
	}
}

// LargeDebs is the folder where ../shared/corpus/debian/fetch-large.sh put
// the larger real CUDA packages (libcublas11, libcusolver11), named by
// CUDADEPS_LARGE_DEBS; they are optional (they come from the network). When
// they are absent the test says what they would have added, so that the
// coverage they bring is never lost without a word.
func LargeDebs(t testing.TB, adds string) string {
	t.Helper()
	dir := os.Getenv("CUDADEPS_LARGE_DEBS")
	if dir == "" {
		t.Logf("CUDADEPS_LARGE_DEBS is not set: %s also checks %s once ../shared/corpus/debian/fetch-large.sh DIR has fetched them into DIR", t.Name(), adds)
	}
	return dir
}
