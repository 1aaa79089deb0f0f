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
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cudadeps/cudadeps/config"
	"github.com/cudadeps/cudadeps/internal/gcfloor"
)

// Exit codes shared by every command.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitMissing     = 3
	exitInterrupted = 130 // 128 + SIGINT, as shells report it
)

// gcFloor is the heap below which the collector does not run (gcfloor)
// on procs processors: 1.5 MiB each, from 16 to 32 MiB. The collections
// while a scan's heap grows from the runtime's first 4 MB goal stop every
// processor and make every allocating worker assist: on 16 processors they
// cost a fifth of the scan, and 24 MiB made the loader-only scan 14%
// faster than 16 did. The default scans of large trees peak as before; a
// run whose live heap ends under half the floor peaks higher, which on 2
// processors the 16 MiB floor keeps to a few MiB (docs/performance.md).
func gcFloor(procs int) uint64 {
	return min(max(uint64(procs)*3<<19, 16<<20), 32<<20)
}

func main() {
	gcfloor.Set(gcFloor(runtime.GOMAXPROCS(0)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfiles := startProfiles(os.Stderr)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stopProfiles()
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
	if ctx.Err() != nil {
		// A signal came: whatever failed after it (a killed interpreter, an
		// import cut short, a download) failed because of it. Downloads
		// resume from their partial files and installs are all-or-nothing,
		// so running the same command again is safe.
		fmt.Fprintln(stderr, "cudadeps: interrupted; rerun resumes")
		return exitInterrupted
	}
	var ce *codeError
	if errors.As(err, &ce) {
		if ce.err != nil {
			fmt.Fprintf(stderr, "cudadeps: %v\n", ce.err)
		}
		return ce.code
	}
	fmt.Fprintf(stderr, "cudadeps: %v\n", err)
	if hint := app.unwritableHint(err); hint != "" {
		fmt.Fprintf(stderr, "cudadeps: %s\n", hint)
	}
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
	// settings are the defaults from the environment and the config file
	// (nil for commands that use none).
	settings *config.Settings
	// planShown are the rounds whose plan was printed on the screen that
	// stdout also shows (before the question): the report need not repeat
	// them.
	planShown map[int]bool
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
		Version:       buildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if a.logger, err = newLogger(a.stderr, a.opts); err != nil {
				return err
			}
			return a.applySettings(cmd)
		},
	}
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		var bad *pflag.InvalidValueError
		if errors.As(err, &bad) {
			err = fmt.Errorf("--%s: %w", bad.GetFlag().Name, bad.Unwrap())
		}
		return &flagError{err: fmt.Errorf("%w (see '%s --help')", err, cmd.CommandPath())}
	})
	a.opts.register(root)
	root.AddCommand(a.commands()...)
	setUpCompletion(root)
	usageArgs(root)
	return root
}

// groupCommand makes a command that only holds subcommands refuse to run
// by itself: a mistyped subcommand is a usage error, not help and success.
func groupCommand(cmd *cobra.Command) *cobra.Command {
	cmd.Args = func(c *cobra.Command, args []string) error {
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		if len(args) > 0 {
			return usageError("unknown command %q for %q: use %s", args[0], c.CommandPath(), strings.Join(names, ", "))
		}
		return usageError("%s needs a command: %s", c.CommandPath(), strings.Join(names, ", "))
	}
	cmd.RunE = func(*cobra.Command, []string) error { return nil }
	return cmd
}

// buildVersion is the module version and VCS revision recorded in the
// binary: "v1.2.0" from go install, "(devel) rev 1a2b3c4d5e6f, 2026-01-02
// 15:04 UTC, modified" from a checkout, "dev" when nothing was recorded.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return versionOf(bi)
}

func versionOf(bi *debug.BuildInfo) string {
	var parts []string
	if v := bi.Main.Version; v != "" {
		parts = append(parts, v)
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		parts = append(parts, "rev "+rev)
	}
	if at != "" {
		parts = append(parts, at)
	}
	if modified == "true" {
		parts = append(parts, "modified")
	}
	if len(parts) == 0 || len(parts) == 1 && parts[0] == "(devel)" {
		return "dev"
	}
	return strings.Join(parts, ", ")
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

// progressWriter is where downloads report progress: stderr (a bar on a
// terminal, plain lines elsewhere), or nowhere under --quiet.
func (a *app) progressWriter() io.Writer {
	if a.opts.quiet {
		return nil
	}
	return a.stderr
}
