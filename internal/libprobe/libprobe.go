// Package libprobe runs a probe: a subprocess that loads a driver library (libcuda.so.1, libnvidia-ml.so.1), calls it and writes one line per step, so that a library that crashes or hangs takes the subprocess down instead of cudadeps and the last line read tells how far it got.
//
// A probe is this binary, where it loads libraries itself (-tags dlprobe:
// purego and the system's dynamic loader), else python3 running a script
// that starts with Prelude (ctypes). Either writes the same protocol, one
// "KEY VALUE" line at a time, flushed:
//
//	stage NAME            a step begins
//	error STAGE MESSAGE   the step failed; the probe stops there
//	loaded PATH           the file the library was loaded from
//	done                  the probe reached its end
//
// and lines of its own between them, which the caller reads.
package libprobe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Result is how a subprocess ended.
type Result struct {
	Stdout, Stderr []byte
	ExitCode       int    // -1 when a signal ended it
	Signal         string // "SIGSEGV" when a signal ended it
	TimedOut       bool
}

// Exec runs argv and waits for it; the error is for a process that could
// not start at all.
type Exec func(ctx context.Context, argv []string) (Result, error)

// RunCommand returns an Exec that runs a real process with env (nil: this
// process's environment), killing it when ctx ends.
func RunCommand(env []string) Exec {
	return func(ctx context.Context, argv []string) (Result, error) {
		if len(argv) == 0 {
			return Result{}, errors.New("empty command")
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.WaitDelay = 5 * time.Second
		err := cmd.Run()
		res := Result{Stdout: out.Bytes(), Stderr: errb.Bytes()}
		if cmd.ProcessState != nil {
			res.ExitCode = cmd.ProcessState.ExitCode()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				res.Signal = signalName(ws.Signal())
			}
		}
		if ctx.Err() != nil {
			res.TimedOut = true
			return res, nil
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return res, err
		}
		return res, nil
	}
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGILL:
		return "SIGILL"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGFPE:
		return "SIGFPE"
	}
	return "signal " + strconv.Itoa(int(s)) + " (" + s.String() + ")"
}

// Command is the command line of a probe and how it reaches the library:
// this binary with childArgs (the hidden flag that makes it the probe)
// where it loads libraries itself, else python (python3 on PATH when
// empty) running script, else nil.
func Command(python string, childArgs []string, script string) (argv []string, via string) {
	if Dlopen {
		if exe, err := os.Executable(); err == nil {
			return append([]string{exe}, childArgs...), "cudadeps (purego)"
		}
	}
	if python == "" {
		if p, err := exec.LookPath("python3"); err == nil {
			python = p
		}
	}
	if python == "" {
		return nil, ""
	}
	return []string{python, "-c", script}, path.Base(python) + " (ctypes)"
}

// Prelude opens every probe script: say() writes a protocol line;
// load(NAME) says the dlopen stage and loads NAME, or says why not and
// ends; say_loaded(FUNCTION) says the file that defines a loaded function,
// from /proc/self/maps.
const Prelude = `import ctypes, sys
def say(*a):
    sys.stdout.write(" ".join(str(x) for x in a) + "\n"); sys.stdout.flush()
def load(name):
    say("stage", "dlopen")
    try:
        return ctypes.CDLL(name)
    except OSError as e:
        say("error", "dlopen", e); sys.exit(0)
def say_loaded(fn):
    addr = ctypes.cast(fn, ctypes.c_void_p).value or 0
    try:
        for line in open("/proc/self/maps"):
            f = line.split(None, 5)
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if lo <= addr < hi and len(f) == 6:
                say("loaded", f[5].strip()); return
    except OSError:
        pass
`

// Line is one of the probe's own lines, cut at its first space.
type Line struct{ Key, Value string }

// Outcome is what a probe said and how it ended.
type Outcome struct {
	// Stage is the last step the probe began, or the one an error line
	// names; Done says it reached its end.
	Stage string
	Done  bool
	// Error is the message of an error line: that step failed.
	Error string
	// Loaded is the file the library was loaded from.
	Loaded string
	// Lines are the probe's own lines, in order.
	Lines []Line
	// Died says how the probe ended when it did not finish: a signal
	// ("SIGSEGV"), "killed after 30s", "exit status 1"; empty when it
	// finished, or stopped at an error it reported.
	Died     string
	TimedOut bool
	// Stderr is what it wrote there, trimmed.
	Stderr string
}

// Run runs the probe argv through run, within timeout, and reads what it
// said; the error is for a probe that could not start.
func Run(ctx context.Context, run Exec, argv []string, timeout time.Duration) (*Outcome, error) {
	if run == nil {
		run = RunCommand(nil)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := run(pctx, argv)
	if err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", argv[0], err)
	}
	o := Parse(res.Stdout)
	o.Stderr = strings.TrimSpace(string(res.Stderr))
	switch {
	case res.TimedOut:
		o.TimedOut = true
		o.Died = fmt.Sprintf("killed after %s", timeout)
	case res.Signal != "":
		o.Died = res.Signal
	case !o.Done && o.Error == "":
		o.Died = fmt.Sprintf("exit status %d", res.ExitCode)
	}
	return o, nil
}

// Parse reads the protocol.
func Parse(out []byte) *Outcome {
	o := &Outcome{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		key, val, _ := strings.Cut(sc.Text(), " ")
		switch key {
		case "stage":
			o.Stage = val
		case "error":
			o.Stage, o.Error, _ = strings.Cut(val, " ")
		case "loaded":
			o.Loaded = val
		case "done":
			o.Done = true
		case "":
		default:
			o.Lines = append(o.Lines, Line{key, val})
		}
	}
	return o
}

// Say writes protocol lines, one unbuffered line per call, for the probe
// this binary runs.
type Say func(a ...any)

// NewSay writes to w.
func NewSay(w io.Writer) Say {
	return func(a ...any) { fmt.Fprintln(w, a...) }
}

// mappedFile finds, in the text of /proc/self/maps, the file mapped at addr.
func mappedFile(maps []byte, addr uint64) string {
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && l <= addr && addr < h {
			return strings.Join(f[5:], " ")
		}
	}
	return ""
}

// SayLoaded says the file mapped at addr (an address inside the library
// just loaded), from /proc/self/maps; nothing when it cannot tell.
func SayLoaded(say Say, addr uintptr) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	if f := mappedFile(maps, uint64(addr)); f != "" {
		say("loaded", f)
	}
}
