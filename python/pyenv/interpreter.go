package pyenv

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// Interpreter is the real interpreter program behind python: python itself
// when it is a dynamically linked ELF program, else (a pyenv, asdf or conda
// shim: a shell script that runs another program) the sys.executable it
// reports when run. The loader model needs the program the kernel runs, not
// a wrapper; a wrapper whose interpreter cannot be found is refused in one
// line.
func Interpreter(ctx context.Context, python string) (string, error) {
	exe, err := exec.LookPath(python)
	if err != nil {
		return "", fmt.Errorf("python interpreter %q not found: %w", python, err)
	}
	if isProgram(exe) {
		return exe, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "-c", "import sys; print(sys.executable)")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return "", fmt.Errorf("%s is no interpreter program but a wrapper (a pyenv, asdf or conda shim?), and running it failed (%v: %s): give the interpreter itself with --python", exe, err, msg)
	}
	real := strings.TrimSpace(out.String())
	if !filepath.IsAbs(real) || !isProgram(real) {
		return "", fmt.Errorf("%s is no interpreter program but a wrapper, and the interpreter it runs (%q) is not one either: give the interpreter itself with --python", exe, real)
	}
	return real, nil
}

// Selected is the program python (default: DefaultPython) runs: python
// itself, found on PATH, when it is a program; for a wrapper (a pyenv,
// asdf or mise shim), the interpreter it picks now, from what nothing else
// here sees (PYENV_VERSION, a .python-version file up the working
// directory, the manager's global choice), learned by running it. It is
// "" when python is not found or the wrapper runs no interpreter. Cached
// answers about an interpreter are keyed by it.
func Selected(ctx context.Context, python string) string {
	if python == "" {
		python = DefaultPython()
	}
	if k, ok := ctx.Value(selectedKey{}).(selected); ok && k.python == python {
		return k.runs
	}
	real, err := Interpreter(ctx, python)
	if err != nil {
		return ""
	}
	return real
}

// KnowSelected returns ctx carrying what python (default: DefaultPython)
// runs, learned now, for Selected to answer from within the run: a check
// that misses its kept answer asks it for its own key and again for the
// interpreter's, and a wrapper takes tens of milliseconds to run.
func KnowSelected(ctx context.Context, python string) context.Context {
	if python == "" {
		python = DefaultPython()
	}
	return context.WithValue(ctx, selectedKey{}, selected{python: python, runs: Selected(ctx, python)})
}

type selectedKey struct{}

// selected is what Selected answered for python.
type selected struct{ python, runs string }

// isProgram reports a dynamically linked ELF program or library.
func isProgram(p string) bool {
	in, err := elfscan.ReadInfo(p)
	return err == nil && in.Dynamic
}
