package resolver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/internal/shquote"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// DefaultCheckTimeout bounds the import check and each probe or check
// command when Options.CheckTimeout is zero. A first CUDA call compiles
// and caches kernels, which takes minutes on some machines.
const DefaultCheckTimeout = 5 * time.Minute

// Verification is the outcome of running the package: its import, then
// the probes of the frameworks it is or requires, or the user's own check
// command instead.
type Verification struct {
	Ran bool `json:"ran"`
	// OK: the import and every probe (or the check command) passed.
	OK bool `json:"ok"`
	// ImportOK: the import passed (true when there was none to run).
	ImportOK bool     `json:"import_ok"`
	Command  []string `json:"command,omitempty"`
	// LDLibraryPath is the LD_LIBRARY_PATH the import ran with (from the activation
	// script), empty when none was needed.
	LDLibraryPath string `json:"ld_library_path,omitempty"`
	Output        string `json:"output,omitempty"`
	// Missing are sonames the import could not open (libraries the package
	// dlopen's, which no static scan sees).
	Missing []string `json:"missing,omitempty"`
	// VersionErrors are version requirements the import tripped on.
	VersionErrors []string `json:"version_errors,omitempty"`
	// Probes are what ran after the import: one probe per framework, or
	// the check command.
	Probes []Probe `json:"probes"`
}

// Probe is one run after the import: a framework's probe, or the user's
// check command.
type Probe struct {
	// Name is the framework probed ("torch", "cupy", "jax",
	// "onnxruntime", "tensorflow"), or "check" for the user's command.
	Name    string   `json:"name"`
	Command []string `json:"command"`
	// Script is the probe's file under the prefix; empty for a check.
	Script string `json:"script,omitempty"`
	// Reproduce is a shell command line that runs it again as it ran
	// (same interpreter, same LD_LIBRARY_PATH).
	Reproduce string `json:"reproduce"`
	OK        bool   `json:"ok"`
	// ExitCode is the process's exit status; -1 when it did not exit
	// (killed, timed out, could not start).
	ExitCode int  `json:"exit_code"`
	TimedOut bool `json:"timed_out,omitempty"`
	// Error says why it did not run or did not finish.
	Error string      `json:"error,omitempty"`
	Steps []ProbeStep `json:"steps"`
	// Failures are the libraries its output blames.
	Failures []ProbeFailure `json:"failures"`
	Output   string         `json:"output,omitempty"`
}

// ProbeStep is one line of a probe's report.
type ProbeStep struct {
	Name string `json:"name"`
	// Status is "ok", "failed" or "skipped" (no GPU).
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// The statuses of a probe step.
const (
	StepOK      = "ok"
	StepFailed  = "failed"
	StepSkipped = "skipped"
)

var (
	reVersion = regexp.MustCompile("version [`']([^'`]+)' not found \\(required by ([^)]+)\\)")
)

// checkRunner runs the import check and what follows it, each in a new
// process with the environment a new shell would have: this one's, plus
// the activation script's LD_LIBRARY_PATH.
type checkRunner struct {
	t       *Target
	envDirs []string
	prefix  *activation.Prefix
	check   string
	timeout time.Duration
}

// run verifies the target: the import for a Python target, then, once it
// passes, the probes or the check command.
func (c *checkRunner) run(ctx context.Context) *Verification {
	v := &Verification{Ran: true, ImportOK: true, Probes: []Probe{}}
	if c.python() != "" {
		c.importCheck(ctx, v)
	}
	if v.ImportOK {
		switch {
		case c.check != "":
			v.Probes = append(v.Probes, c.runCheck(ctx))
		case c.python() != "":
			for _, name := range probeNames(c.t) {
				v.Probes = append(v.Probes, c.runProbe(ctx, name))
			}
		}
	}
	v.OK = v.ImportOK
	for _, p := range v.Probes {
		v.OK = v.OK && p.OK
	}
	return v
}

// python is the target's interpreter, "" when it has none to run.
func (c *checkRunner) python() string {
	if c.t.Kind != KindPython || c.t.Python == nil || !c.t.Python.FromPython {
		return ""
	}
	return c.t.Python.Executable
}

// importCheck imports the target's module in a fresh interpreter.
func (c *checkRunner) importCheck(ctx context.Context, v *Verification) {
	code := fmt.Sprintf("import %s", c.t.Module)
	v.Command = []string{c.python(), "-c", code}
	v.LDLibraryPath = strings.Join(c.envDirs, ":")
	res := runBounded(ctx, v.Command, c.environ(), c.timeout)
	v.Output = tail(res.out, 4000)
	if res.err == nil && res.code == 0 {
		return
	}
	v.ImportOK = false
	if res.err != nil {
		v.Output = strings.TrimSpace(v.Output + "\n" + res.err.Error())
	}
	for _, m := range reCannotOpen.FindAllStringSubmatch(res.out, -1) {
		v.Missing = uniq.Append(v.Missing, m[2])
	}
	for _, m := range reVersion.FindAllStringSubmatch(res.out, -1) {
		v.VersionErrors = uniq.Append(v.VersionErrors, m[0])
	}
}

// runProbe writes the named framework's probe under the prefix, where it
// stays so that the printed command can run it again, and runs it with
// the target's interpreter.
func (c *checkRunner) runProbe(ctx context.Context, name string) Probe {
	p := Probe{Name: name, ExitCode: -1, Steps: []ProbeStep{}, Failures: []ProbeFailure{}}
	script, err := c.writeProbe(name)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	p.Script = script
	p.Command = []string{c.python(), script}
	return c.finish(ctx, p)
}

// runCheck runs the user's command through sh -c.
func (c *checkRunner) runCheck(ctx context.Context) Probe {
	p := Probe{Name: "check", ExitCode: -1, Steps: []ProbeStep{}, Failures: []ProbeFailure{},
		Command: []string{"sh", "-c", c.check}}
	return c.finish(ctx, p)
}

// finish runs p.Command and reads what it printed.
func (c *checkRunner) finish(ctx context.Context, p Probe) Probe {
	p.Reproduce = reproduceLine(c.envDirs, c.pathDir(), p.Command)
	res := runBounded(ctx, p.Command, c.environ(), c.timeout)
	p.ExitCode, p.TimedOut = res.code, res.timedOut
	if res.err != nil {
		p.Error = res.err.Error()
	}
	p.OK = res.err == nil && res.code == 0
	p.Steps = append(p.Steps, probeSteps(res.out)...)
	if !p.OK {
		for _, f := range parseProbeOutput(res.out) {
			if isSoname(f.Library) {
				p.Failures = append(p.Failures, f)
			}
		}
	}
	p.Output = tail(res.out, 4000)
	return p
}

// pathDir is the directory of the target's interpreter, put first on PATH
// as a venv's activation does, so that "python" in a check command is the
// target's.
func (c *checkRunner) pathDir() string {
	if py := c.python(); py != "" {
		return filepath.Dir(py)
	}
	return ""
}

// environ is this process's environment with the activation script's
// LD_LIBRARY_PATH and the interpreter's directory first on PATH.
func (c *checkRunner) environ() []string {
	env := os.Environ()
	if len(c.envDirs) > 0 {
		llp := strings.Join(c.envDirs, ":")
		if old := os.Getenv("LD_LIBRARY_PATH"); old != "" {
			llp += ":" + old
		}
		env = append(env, "LD_LIBRARY_PATH="+llp)
	}
	if d := c.pathDir(); d != "" {
		path := d
		if old := os.Getenv("PATH"); old != "" {
			path += ":" + old
		}
		env = append(env, "PATH="+path)
	}
	return env
}

// reproduceLine is argv as a shell command line with the environment the
// run added, in the form env.sh uses.
func reproduceLine(envDirs []string, pathDir string, argv []string) string {
	var b strings.Builder
	if len(envDirs) > 0 {
		b.WriteString("LD_LIBRARY_PATH=" + shquote.Quote(strings.Join(envDirs, ":")) + "${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ")
	}
	if pathDir != "" {
		b.WriteString("PATH=" + shquote.Quote(pathDir) + "${PATH:+:$PATH} ")
	}
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shquote.Quote(a))
	}
	return b.String()
}

// probeNames are the probes for the frameworks the target is or requires,
// each once, in that order.
func probeNames(t *Target) []string {
	if t.Kind != KindPython || t.Dist == nil {
		return nil
	}
	var out []string
	for _, d := range append([]*pyenv.Dist{t.Dist}, t.Requires...) {
		if name, ok := probeName(d.Name); ok {
			out = uniq.Append(out, name)
		}
	}
	return out
}

// writeProbe writes the named framework's probe under the prefix and
// returns its path.
func (c *checkRunner) writeProbe(name string) (string, error) {
	script, ok := probeScript(name)
	if !ok {
		return "", fmt.Errorf("no probe named %s", name)
	}
	if c.prefix == nil {
		return "", errors.New("no prefix to write the probe in")
	}
	return c.prefix.WriteProbe(name, script)
}

// probeSteps reads a probe's report lines.
func probeSteps(out string) []ProbeStep {
	var steps []ProbeStep
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		var st ProbeStep
		switch {
		case strings.HasPrefix(line, "ok: "):
			st.Status = StepOK
			st.Name, st.Detail, _ = strings.Cut(line[len("ok: "):], ": ")
		case strings.HasPrefix(line, "FAILED: "):
			st.Status = StepFailed
			st.Name, st.Detail, _ = strings.Cut(line[len("FAILED: "):], ": ")
		case strings.HasPrefix(line, "no GPU: skipped "):
			st = ProbeStep{Status: StepSkipped, Name: line[len("no GPU: skipped "):], Detail: "no GPU"}
		default:
			continue
		}
		steps = append(steps, st)
	}
	return steps
}

// isSoname tells a library name from a path or a message fragment.
func isSoname(s string) bool {
	return s != "" && !strings.ContainsAny(s, "/ ") && strings.Contains(s, ".so")
}

// Blamed are the libraries the import and the probes found missing or
// wrong, each once: what a further round may fix.
func (v *Verification) Blamed() []string {
	if v == nil {
		return nil
	}
	out := append([]string(nil), v.Missing...)
	for _, p := range v.Probes {
		for _, f := range p.Failures {
			out = uniq.Append(out, f.Library)
		}
	}
	return out
}

// BlamesLibrary reports whether the failure names a library (missing, too
// old, a symbol version absent), as opposed to anything else.
func (v *Verification) BlamesLibrary() bool {
	return v != nil && (len(v.Blamed()) > 0 || len(v.VersionErrors) > 0)
}

// stopped says why a loop that ends on this verification ended.
func (v *Verification) stopped() StopReason {
	switch {
	case v.OK:
		return StopNothingMissing
	case !v.ImportOK:
		return StopImportFails
	default:
		return StopCheckFails
	}
}

// ran is one bounded run of a command.
type ran struct {
	out      string
	code     int
	timedOut bool
	err      error
}

// runBounded runs argv with env, its output (stdout and stderr together)
// kept, and kills its whole process group when timeout passes or ctx ends,
// so that a child it started cannot keep it running.
func runBounded(ctx context.Context, argv []string, env []string, timeout time.Duration) ran {
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Output a killed group's stray process still holds open is given up
	// on after this.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	res := ran{out: out.String(), code: -1}
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		res.code = cmd.ProcessState.ExitCode()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.timedOut = true
		res.err = fmt.Errorf("killed after %s (the time limit; see --check-timeout)", timeout)
	case ctx.Err() != nil:
		res.err = fmt.Errorf("interrupted: %w", ctx.Err())
	case errors.As(err, &ee):
		if res.code < 0 {
			res.err = fmt.Errorf("%s", ee.ProcessState.String()) // "signal: segmentation fault"
		}
	default:
		res.err = err
	}
	return res
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// verifies reports whether the loop ends with a verification: an import
// for a Python target with an interpreter, or the user's check command.
func (s *session) verifies() bool {
	if !s.opts.Verify || s.opts.DryRun || s.t.Kind == KindWheel {
		return false
	}
	c := checkRunner{t: s.t}
	return c.python() != "" || s.opts.Check != ""
}

// feedRuntime hands the next round the libraries a verification blamed,
// each with who found it missing.
func (s *session) feedRuntime(v *Verification, fresh []string) {
	if s.runtimeBy == nil {
		s.runtimeBy = map[string]string{}
	}
	for _, m := range fresh {
		s.runtime = uniq.Append(s.runtime, m)
		if slices.Contains(v.Missing, m) {
			delete(s.runtimeBy, m) // the import's: "import MODULE"
			continue
		}
		for _, p := range v.Probes {
			for _, f := range p.Failures {
				if f.Library == m {
					s.runtimeBy[m] = p.describe()
				}
			}
		}
	}
}

// describe names a probe for the needs it blames.
func (p *Probe) describe() string {
	if p.Name == "check" {
		return "check: " + strings.Join(p.Command[2:], " ")
	}
	for _, st := range p.Steps {
		if st.Status == StepFailed {
			return "probe " + p.Name + " (" + st.Name + ")"
		}
	}
	return "probe " + p.Name
}
