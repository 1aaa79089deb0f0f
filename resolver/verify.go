package resolver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// Verification is the outcome of really importing the package.
type Verification struct {
	Ran     bool     `json:"ran"`
	OK      bool     `json:"ok"`
	Command []string `json:"command,omitempty"`
	// Env is the LD_LIBRARY_PATH the import ran with (from the activation
	// script), empty when none was needed.
	Env    string `json:"ld_library_path,omitempty"`
	Output string `json:"output,omitempty"`
	// Missing are sonames the import could not open (libraries the package
	// dlopen's, which no static scan sees).
	Missing []string `json:"missing,omitempty"`
	// VersionErrors are version requirements the import tripped on.
	VersionErrors []string `json:"version_errors,omitempty"`
}

var (
	reCannotOpen = regexp.MustCompile(`([A-Za-z0-9_.+-]+\.so[A-Za-z0-9_.+-]*): cannot open shared object file`)
	reVersion    = regexp.MustCompile("version [`']([^'`]+)' not found \\(required by ([^)]+)\\)")
)

// verify imports the target's module in a fresh interpreter with the
// environment a new shell would have: this one's, plus the activation
// script's LD_LIBRARY_PATH when the activation needed one.
func verify(ctx context.Context, t *Target, envDirs []string) Verification {
	v := Verification{Ran: true}
	if t.Kind != KindPython || t.Env == nil || !t.Env.FromPython {
		return Verification{}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	code := fmt.Sprintf("import %s", t.Module)
	v.Command = []string{t.Env.Executable, "-c", code}
	cmd := exec.CommandContext(ctx, t.Env.Executable, "-c", code)
	env := os.Environ()
	if len(envDirs) > 0 {
		v.Env = strings.Join(envDirs, ":")
		llp := v.Env
		if old := os.Getenv("LD_LIBRARY_PATH"); old != "" {
			llp += ":" + old
		}
		env = append(env, "LD_LIBRARY_PATH="+llp)
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	v.Output = tail(out.String(), 4000)
	if err == nil {
		v.OK = true
		return v
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		v.Output = err.Error()
	}
	for _, m := range reCannotOpen.FindAllStringSubmatch(out.String(), -1) {
		v.Missing = appendUnique(v.Missing, m[1])
	}
	for _, m := range reVersion.FindAllStringSubmatch(out.String(), -1) {
		v.VersionErrors = appendUnique(v.VersionErrors, m[0])
	}
	return v
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
