package pyenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// A pyenv-like shim (a shell script that execs the interpreter) stands for
// the interpreter it runs; a script that runs no Python is refused in one
// line; the interpreter itself is taken as it is.
func TestInterpreterBehindAShim(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	real, err := Interpreter(context.Background(), py)
	if err != nil {
		t.Fatal(err)
	}
	if !isProgram(real) {
		t.Fatalf("%s is not an ELF program", real)
	}
	dir := t.TempDir()
	shim := filepath.Join(dir, "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec "+real+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := Interpreter(context.Background(), shim)
	if err != nil || got != real {
		t.Errorf("behind the shim: %q, %v; want %q", got, err, real)
	}
	broken := filepath.Join(dir, "python-broken")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho no python here >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Interpreter(context.Background(), broken)
	if err == nil || !strings.Contains(err.Error(), "wrapper") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a shim that runs nothing: %v", err)
	}
	if got, err := Interpreter(context.Background(), real); err != nil || got != real {
		t.Errorf("the interpreter itself: %q, %v", got, err)
	}
}
