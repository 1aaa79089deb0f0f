package libprobe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

func TestMappedFile(t *testing.T) {
	maps := []byte(`55d0c0a00000-55d0c0a28000 r--p 00000000 08:01 1234 /usr/bin/python3.11
7f1c2a000000-7f1c2a200000 r-xp 00100000 08:01 5678 /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05
7f1c2a200000-7f1c2a210000 rw-p 00000000 00:00 0
7f1c2b000000-7f1c2b001000 r-xp 00000000 08:01 91 /opt/my libs/libx.so (deleted)
`)
	for addr, want := range map[uint64]string{
		0x7f1c2a000000: "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05",
		0x7f1c2a1fffff: "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05",
		0x7f1c2a200000: "", // anonymous
		0x7f1c2b000010: "/opt/my libs/libx.so (deleted)",
		0x1000:         "",
	} {
		if got := mappedFile(maps, addr); got != want {
			t.Errorf("%#x: %q, want %q", addr, got, want)
		}
	}
}

// TestRunCommandReal runs real processes: exit statuses, a signal, a
// process that cannot start, a context that ends.
func TestRunCommandReal(t *testing.T) {
	sh, err := exec.LookPath("sh")
	lddtest.Need(t, err == nil, "no sh")
	run := RunCommand([]string{"FOO=bar"})
	res, err := run(t.Context(), []string{sh, "-c", `echo "stage $FOO"; echo oops >&2; exit 3`})
	if err != nil || string(res.Stdout) != "stage bar\n" || string(res.Stderr) != "oops\n" || res.ExitCode != 3 || res.Signal != "" {
		t.Errorf("exit: %+v %v", res, err)
	}
	res, err = run(t.Context(), []string{sh, "-c", `echo stage cuInit; kill -SEGV $$`})
	if err != nil || res.Signal != "SIGSEGV" || string(res.Stdout) != "stage cuInit\n" {
		t.Errorf("signal: %+v %v", res, err)
	}
	if _, err := run(t.Context(), []string{filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing program started")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, _ = run(ctx, []string{sh, "-c", "sleep 30"})
	if !res.TimedOut {
		t.Errorf("ended context: %+v", res)
	}
}

// TestRunOutcome: how a probe ended, from what it said and how its
// process ended.
func TestRunOutcome(t *testing.T) {
	says := func(out string, res Result) Exec {
		return func(ctx context.Context, argv []string) (Result, error) {
			res.Stdout = []byte(out)
			return res, nil
		}
	}
	cases := []struct {
		name string
		out  string
		res  Result
		want Outcome
	}{
		{"done", "stage a\nloaded /x/lib.so\nkey 1\nstage b\nother two words\ndone\n", Result{},
			Outcome{Stage: "b", Done: true, Loaded: "/x/lib.so", Lines: []Line{{"key", "1"}, {"other", "two words"}}}},
		{"error", "stage dlopen\nerror dlopen lib.so: cannot open shared object file\n", Result{},
			Outcome{Stage: "dlopen", Error: "lib.so: cannot open shared object file"}},
		{"crash", "stage init\n", Result{ExitCode: -1, Signal: "SIGSEGV", Stderr: []byte(" Segmentation fault\n")},
			Outcome{Stage: "init", Died: "SIGSEGV", Stderr: "Segmentation fault"}},
		{"exit", "stage init\n", Result{ExitCode: 3}, Outcome{Stage: "init", Died: "exit status 3"}},
		{"hang", "stage init\n", Result{ExitCode: -1, Signal: "SIGKILL", TimedOut: true},
			Outcome{Stage: "init", Died: "killed after 2s", TimedOut: true}},
	}
	for _, c := range cases {
		o, err := Run(t.Context(), says(c.out, c.res), []string{"probe"}, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if o.Stage != c.want.Stage || o.Done != c.want.Done || o.Error != c.want.Error || o.Loaded != c.want.Loaded ||
			o.Died != c.want.Died || o.TimedOut != c.want.TimedOut || o.Stderr != c.want.Stderr || len(o.Lines) != len(c.want.Lines) {
			t.Errorf("%s: %+v, want %+v", c.name, o, c.want)
			continue
		}
		for i := range o.Lines {
			if o.Lines[i] != c.want.Lines[i] {
				t.Errorf("%s: line %d %+v, want %+v", c.name, i, o.Lines[i], c.want.Lines[i])
			}
		}
	}
	if _, err := Run(t.Context(), RunCommand(nil), []string{filepath.Join(t.TempDir(), "missing")}, time.Second); err == nil ||
		!strings.HasPrefix(err.Error(), "cannot start ") {
		t.Errorf("a missing program: %v", err)
	}
}

// TestPreludeReal runs a script made of Prelude in a real python3: load
// says its stage and why it failed, say_loaded names the file of a
// function, as /proc/self/maps shows it.
func TestPreludeReal(t *testing.T) {
	python, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "no python3")
	libc := "libc.so.6"
	script := Prelude + `lib = load("` + libc + `")
say_loaded(lib.getpid)
say("pid", lib.getpid())
lib = load("libcudadeps-none.so.9")
say("done")
`
	o, err := Run(t.Context(), RunCommand(nil), []string{python, "-c", script}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(o.Loaded)
	if o.Stage != "dlopen" || !strings.Contains(o.Error, "libcudadeps-none.so.9") || o.Done || o.Died != "" ||
		!strings.HasPrefix(filepath.Base(real), "libc") || len(o.Lines) != 1 || o.Lines[0].Key != "pid" {
		t.Errorf("%+v", o)
	}
	if _, err := os.Stat(o.Loaded); err != nil {
		t.Errorf("loaded: %v", err)
	}
}

// TestCommand: a static build runs python3 with the script; a dlopen
// build runs itself.
func TestCommand(t *testing.T) {
	argv, via := Command("/opt/py/bin/python3.12", []string{"doctor", "--probe-child"}, "print(1)")
	if Dlopen {
		exe, _ := os.Executable()
		if len(argv) != 3 || argv[0] != exe || argv[2] != "--probe-child" || via != "cudadeps (purego)" {
			t.Errorf("%q %q", argv, via)
		}
		return
	}
	if len(argv) != 3 || argv[0] != "/opt/py/bin/python3.12" || argv[1] != "-c" || argv[2] != "print(1)" || via != "python3.12 (ctypes)" {
		t.Errorf("%q %q", argv, via)
	}
	t.Setenv("PATH", t.TempDir())
	if argv, via := Command("", nil, "print(1)"); argv != nil || via != "" {
		t.Errorf("no python3 on PATH: %q %q", argv, via)
	}
}
