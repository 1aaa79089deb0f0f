package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// interruptWhenMarked runs the built binary, waits until marker exists (the
// step to interrupt has begun), sends SIGINT as Ctrl-C does and checks the
// exit: 130 and a word that a rerun resumes, within bounded time.
func interruptWhenMarked(t *testing.T, marker string, args ...string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = userEnv(t)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("ended before the step to interrupt: exit %d\n%s%s", cmd.ProcessState.ExitCode(), out.String(), errb.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatal("the step to interrupt never began")
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("still running 30 s after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "cudadeps: interrupted; rerun resumes") {
		t.Errorf("stderr does not say a rerun resumes:\n%s", errb.String())
	}
}

// TestCLIInterruptedBeforeDownload checks Ctrl-C in the steps of resolve
// that come before any download or after it: while the Python environment
// is asked for (a slow interpreter), and while the package is imported (an
// import that hangs), the exit is 130 with the word on resuming, as for an
// interrupted download.
func TestCLIInterruptedBeforeDownload(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	dir := t.TempDir()

	t.Run("asking the interpreter", func(t *testing.T) {
		marker := filepath.Join(dir, "asked")
		slow := filepath.Join(dir, "slow-python")
		script := fmt.Sprintf("#!/bin/sh\n: > '%s'\nexec sleep 60\n", marker)
		if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		interruptWhenMarked(t, marker, "resolve", "hangpkg", "--python", slow, "--prefix", t.TempDir(), "--ld-library-path", "")
	})

	t.Run("importing the package", func(t *testing.T) {
		venv := filepath.Join(dir, "venv")
		if out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
			lddtest.Need(t, false, "python3 -m venv failed: %s", out)
		}
		site, err := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages"))
		if err != nil || len(site) != 1 {
			t.Fatalf("site-packages of the venv: %v %v", site, err)
		}
		marker := filepath.Join(dir, "imported")
		files := map[string]string{
			"hangpkg/__init__.py":                 fmt.Sprintf("import time\nopen(%q, 'w').close()\ntime.sleep(60)\n", marker),
			"hangpkg-1.0.dist-info/METADATA":      "Metadata-Version: 2.1\nName: hangpkg\nVersion: 1.0\n",
			"hangpkg-1.0.dist-info/top_level.txt": "hangpkg\n",
			"hangpkg-1.0.dist-info/RECORD":        "hangpkg/__init__.py,,\nhangpkg/_native.so,,\nhangpkg-1.0.dist-info/METADATA,,\nhangpkg-1.0.dist-info/RECORD,,\n",
		}
		for rel, text := range files {
			p := filepath.Join(site[0], rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := elfwrite.Write(filepath.Join(site[0], "hangpkg", "_native.so"), elfwrite.Spec{Soname: "_native.so", Needed: []string{"libc.so.6"}}); err != nil {
			t.Fatal(err)
		}
		interruptWhenMarked(t, marker, "resolve", "hangpkg", "--yes", "--python", filepath.Join(venv, "bin", "python3"), "--prefix", t.TempDir(), "--ld-library-path", "")
	})
}
