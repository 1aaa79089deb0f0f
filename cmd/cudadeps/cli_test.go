package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cudadeps/cudadeps/internal/shquote"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
)

// These tests run the built binary as a user would: a separate process,
// real stdin, stdout and stderr, a pseudo-terminal where that matters.

var cliBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	// Commands run in this process keep what they learn in a cache of
	// this run's own, not in the user's.
	cache, err := os.MkdirTemp("", "cudadeps-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	code := m.Run()
	if cliBuild.dir != "" {
		os.RemoveAll(cliBuild.dir)
	}
	os.RemoveAll(cache)
	os.Exit(code)
}

// binary builds cudadeps once for this test binary.
func binary(t testing.TB) string {
	t.Helper()
	cliBuild.once.Do(func() {
		if cliBuild.dir, cliBuild.err = os.MkdirTemp("", "cudadeps-cli-"); cliBuild.err != nil {
			return
		}
		cliBuild.path = filepath.Join(cliBuild.dir, "cudadeps")
		out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", cliBuild.path, ".").CombinedOutput()
		if err != nil {
			cliBuild.err = errors.New(string(out))
		}
	})
	if cliBuild.err != nil {
		t.Fatalf("go build: %v", cliBuild.err)
	}
	return cliBuild.path
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// writeTestFile writes body to path with mode, making its directory.
func writeTestFile(t testing.TB, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

// userEnv is a clean environment: its own store and cache, no colour
// settings, no LD_ variables.
func userEnv(t testing.TB) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_") && !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "XDG_") {
			env = append(env, kv)
		}
	}
	return append(env, "XDG_CACHE_HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir())
}

// runBinary runs cudadeps with stdin from a pipe (not a terminal).
func runBinary(t testing.TB, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cliResult{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
}

// runTerminal runs cudadeps on a pseudo-terminal (util-linux script), typing
// input; stdout and stderr come back mixed, as on a screen.
func runTerminal(t *testing.T, env []string, input string, args ...string) (int, string) {
	t.Helper()
	return runTerminalWith(t, env, input, "", args...)
}

// runTerminalWith is runTerminal with redirect, shell words such as
// "2> FILE", after the command line.
func runTerminalWith(t *testing.T, env []string, input, redirect string, args ...string) (int, string) {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		needScript(t)
	}
	words := []string{shquote.Quote(binary(t))}
	for _, a := range args {
		words = append(words, shquote.Quote(a))
	}
	if redirect != "" {
		words = append(words, redirect)
	}
	cmd := exec.Command(script, "-qec", strings.Join(words, " "), "/dev/null")
	cmd.Env = env
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), strings.ReplaceAll(string(out), "\r\n", "\n")
}

// needScript skips a terminal test where script(1) is absent, or fails it
// where the oracles are required (CI).
func needScript(t *testing.T) {
	t.Helper()
	lddtest.Need(t, false, "script (util-linux, Debian package bsdutils) is needed for a pseudo-terminal")
}

// missingCudss writes a directory whose library needs libcudss.so.0 and a
// mirror that has it.
func missingCudss(t *testing.T) (dir string, m *mirrortest.Mirror) {
	t.Helper()
	dir = t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libapp.so"), elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libcudss.so.0", "libcudart.so.13", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libcudart.so.13"), elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	m = mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}}, Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}}})
	return dir, m
}

func placed(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, "app/lib/libcudss.so.0"))
	return err == nil
}

// Point 1: the plan is shown, then asked about; nobody to ask means no.
func TestCLIResolveAsksAfterThePlan(t *testing.T) {
	dir, m := missingCudss(t)
	env := userEnv(t)
	prefix := filepath.Join(t.TempDir(), "prefix")
	common := []string{"--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", ""}

	// stdin is a pipe and there is no --yes: refuse, change nothing.
	r := runBinary(t, env, "y\n", append([]string{"resolve", dir}, common...)...)
	if r.code != exitUsage || m.Total() != 0 || placed(dir) {
		t.Fatalf("no terminal, no --yes: exit %d, %d downloads, placed=%v\n%s%s", r.code, m.Total(), placed(dir), r.stdout, r.stderr)
	}
	url := m.URL + "libcudss/"
	if !strings.Contains(r.stderr, url) || !strings.Contains(r.stderr, "Total: 1 archive(s)") || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("the refusal should follow the plan (URL, total) and name --yes:\n%s", r.stderr)
	}

	// On a terminal: the plan, then the question; "n" changes nothing.
	for _, extra := range [][]string{nil, {"--json"}} {
		code, screen := runTerminal(t, env, "n\n", append(append([]string{"resolve", dir}, common...), extra...)...)
		q := strings.Index(screen, "[y/N]")
		if q < 0 || !strings.Contains(screen[:q], url) || !strings.Contains(screen[:q], "Total:") || !strings.Contains(screen[:q], prefix) ||
			!strings.Contains(screen[:q], "link into "+filepath.Join(dir, "app/lib")) {
			t.Errorf("%v: the plan (URL, total, store directory, the directory it links into) must come before the question:\n%s", extra, screen)
		}
		if code != exitError || m.Total() != 0 || placed(dir) {
			t.Errorf("%v: answered n: exit %d, %d downloads, placed=%v", extra, code, m.Total(), placed(dir))
		}
	}

	// Answered y on a terminal: done.
	if code, screen := runTerminal(t, env, "y\n", append([]string{"resolve", dir}, common...)...); code != exitOK || !placed(dir) {
		t.Errorf("answered y: exit %d\n%s", code, screen)
	}
}

// On an interactive resolve the plan is on the screen before the question:
// the report after it does not print it again (each archive's URL once),
// it says the plan was followed. With stdout sent to a file the report
// stands on its own and has the plan.
func TestCLIResolvePlanShownOnce(t *testing.T) {
	dir, m := missingCudss(t)
	env := userEnv(t)
	common := []string{"resolve", dir, "--catalog", m.Catalog, "--mirror", m.URL, "--ld-library-path", ""}
	url := m.URL + "libcudss/"

	code, screen := runTerminal(t, env, "y\n", append(common, "--prefix", filepath.Join(t.TempDir(), "prefix"))...)
	if code != exitOK || strings.Count(screen, url) != 1 || !strings.Contains(screen, "as planned above") {
		t.Errorf("interactive: exit %d, the archive's URL %d times (want once, in the plan)\n%s", code, strings.Count(screen, url), screen)
	}

	dir2, m2 := missingCudss(t)
	report := filepath.Join(t.TempDir(), "report")
	code, screen = runTerminalWith(t, env, "y\n", "> "+shquote.Quote(report), "resolve", dir2, "--catalog", m2.Catalog, "--mirror", m2.URL, "--ld-library-path", "", "--prefix", filepath.Join(t.TempDir(), "prefix"))
	out, _ := os.ReadFile(report)
	if code != exitOK || !strings.Contains(string(out), m2.URL+"libcudss/") {
		t.Errorf("stdout to a file: exit %d; the report should name the archive's URL\nreport:\n%s\nscreen:\n%s", code, out, screen)
	}
}

// At a terminal with stderr sent to a file (resolve ... 2> log), the user
// can still answer: the plan and the question go to the terminal, and the
// log keeps the plan. With stdin not a terminal, nobody can answer.
func TestCLIResolveAsksWithStderrToAFile(t *testing.T) {
	dir, m := missingCudss(t)
	env := userEnv(t)
	prefix := filepath.Join(t.TempDir(), "prefix")
	common := []string{"resolve", dir, "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", ""}
	log := filepath.Join(t.TempDir(), "log")

	code, screen := runTerminalWith(t, env, "n\n", "< /dev/null 2> "+shquote.Quote(log), common...)
	stderr, _ := os.ReadFile(log)
	if code != exitUsage || !strings.Contains(string(stderr), "stdin is not a terminal") || placed(dir) {
		t.Errorf("stdin not a terminal: exit %d\nscreen:\n%s\nlog:\n%s", code, screen, stderr)
	}

	code, screen = runTerminalWith(t, env, "y\n", "2> "+shquote.Quote(log), common...)
	stderr, _ = os.ReadFile(log)
	q := strings.Index(screen, "[y/N]")
	if code != exitOK || !placed(dir) || q < 0 || !strings.Contains(screen[:q], "Total: 1 archive(s)") {
		t.Fatalf("stderr to a file, answered y at the terminal: exit %d, placed=%v\nscreen:\n%s\nlog:\n%s", code, placed(dir), screen, stderr)
	}
	if !strings.Contains(string(stderr), "Total: 1 archive(s)") || strings.Contains(string(stderr), "[y/N]") {
		t.Errorf("the log should keep the plan, not the question:\n%s", stderr)
	}
}
