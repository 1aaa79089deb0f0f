// Command cudadeps finds the shared libraries a CUDA Python package cannot
// load, fetches them from NVIDIA's redistributable archives and makes the
// dynamic loader find them, without root.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	exitOK      = 0
	exitError   = 1
	exitUsage   = 2
	exitMissing = 3
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code; main is a thin
// shell around it so that tests can drive the whole CLI in-process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(stdin, stdout, stderr)
	root := app.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ce *codeError
	if errors.As(err, &ce) {
		if ce.err != nil {
			fmt.Fprintf(stderr, "cudadeps: %v\n", ce.err)
		}
		return ce.code
	}
	fmt.Fprintf(stderr, "cudadeps: %v\n", err)
	if isUsageError(err) {
		return exitUsage
	}
	return exitError
}

// codeError carries a specific exit code out of a command. A nil err means
// the command already reported everything and only the code matters.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *codeError) Unwrap() error { return e.err }

// usageError marks a mistake in the command line (exit code 2).
func usageError(format string, a ...any) error {
	return &codeError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// exitWith ends a command with code after it has printed its own report.
func exitWith(code int) error {
	if code == exitOK {
		return nil
	}
	return &codeError{code: code}
}

// isUsageError recognises cobra's own flag, argument and command errors.
func isUsageError(err error) bool {
	var fe *flagError
	if errors.As(err, &fe) {
		return true
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.Contains(msg, "required flag(s)")
}

type flagError struct{ err error }

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// app holds the process-wide streams and the options every command shares.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	opts           globalOptions
	logger         *slog.Logger
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{stdin: stdin, stdout: stdout, stderr: stderr}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "cudadeps",
		Short: "Make CUDA Python wheels import: find, fetch and activate missing shared libraries",
		Long: `cudadeps reads the ELF dependency graph of an installed package the way glibc's
dynamic loader does, finds every shared library the loader would not find,
matches it against a catalog of NVIDIA's redistributable archives, downloads
and verifies it, installs it under a user prefix without root and makes the
loader find it.

  cudadeps scan /path/to/site-packages/torch     what would the loader do?
  cudadeps why libcudss.so.0 --from libtorch_cuda.so
  cudadeps resolve torch --dry-run               the plan, nothing changed
  cudadeps resolve torch                         fix it
  cudadeps doctor                                why CUDA fails on this host`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.logger = newLogger(a.stderr, a.opts.verbose, a.opts.quiet)
			return nil
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &flagError{err: fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())}
	})
	a.opts.register(root)
	root.AddCommand(a.commands()...)
	usageArgs(root)
	return root
}

// usageArgs makes every command's argument check a usage error (exit 2),
// whichever validator the command uses.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				var fe *flagError
				if errors.As(err, &fe) {
					return err
				}
				return &flagError{err: fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// newLogger writes structured logs to stderr; stdout stays for results.
func newLogger(w io.Writer, verbose, quiet bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	if quiet {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// progressWriter is where downloads report progress: stderr (a bar on a
// terminal, plain lines elsewhere), or nowhere under --quiet.
func (a *app) progressWriter() io.Writer {
	if a.opts.quiet {
		return nil
	}
	return a.stderr
}
