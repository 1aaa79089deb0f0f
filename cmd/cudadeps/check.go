package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/check"
	"github.com/cudadeps/cudadeps/config"
	"github.com/cudadeps/cudadeps/internal/factcache"
)

// exitTimeout is check's status when its --timeout ran out: 124, as
// timeout(1) reports a command it stopped.
const exitTimeout = 124

const schemaCheck = "cudadeps.check/v1"

const checkLong = `check answers whether TARGET loads whole, as fast as a job prologue or a
container entrypoint needs: exit status 0 when it does, 3 with one line per
problem when it does not.

TARGET is what resolve takes: an installed Python distribution (torch,
cupy-cuda13x, found with --python, or under --root in the root's own Python
installation, read and never run), an ELF file, a directory or a wheel. The
analysis is resolve --dry-run's: every library the loader would not find or
would take from the wrong place, every required distribution missing files,
every symbol version or symbol that would not bind, the libraries opened at
run time. It uses no network and writes nothing but its cache. A copy the
loader takes from elsewhere at exactly the release and build the package
requires (a CUDA toolkit of that release on LD_LIBRARY_PATH) is no problem:
a "note:" line after the "ok:" line names it.

The answer is kept in $XDG_CACHE_HOME/cudadeps/facts with the state (stat)
of everything it depends on: the interpreter and its paths, the files the
loader read, every directory it searched (a library added to one changes
it), the distributions' metadata, /etc/ld.so.cache, the environment
variables the loader and the interpreter read, and this program. While all
of them are unchanged the check answers from the cache with a few thousand
stat calls; anything changed, and it looks again, reading no symbol table
whose file is unchanged (what binding answered is kept by the stamps of
the files it read). A cache that cannot be read or written (read-only,
full, a slow network home) makes it slower, never wrong. Directory and
wheel targets are analyzed every time. An interpreter that is a pyenv, asdf
or mise shim is run each time to learn which Python it picks now (about
60 ms): give --python the interpreter itself for the fastest prologue.

--timeout bounds the whole check, a hung file system included: past it,
check exits with status 124 (as timeout(1) does), so a prologue never hangs.

Exit status: 0 whole, 3 problems (listed), 1 errors, 2 usage, 124 time out,
130 interrupted.`

func (a *app) checkCommand() *cobra.Command {
	var python, siteDir string
	var timeout time.Duration
	var noCache bool
	cmd := &cobra.Command{
		Use:   "check TARGET",
		Short: "Say whether TARGET loads whole, fast enough for every job's prologue",
		Long:  checkLong,
		Example: `  cudadeps check torch
  cudadeps check torch --python /opt/venv/bin/python --timeout 5s
  cudadeps check jax-cuda13-plugin --json`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return usageError("--timeout must not be negative, not %s", timeout)
			}
			if python != "" && siteDir != "" {
				return usageError("--python and --site-packages exclude each other")
			}
			cache := factcache.Open()
			if noCache {
				cache = factcache.Dir{}
			}
			return a.runCheck(cmd, check.Options{Target: args[0], Python: python, SiteDir: siteDir, Timeout: timeout, Cache: cache})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&python, "python", "", "the Python `INTERPRETER` whose environment holds TARGET (default: the active environment's python3; with --root, the root's own, and one inside the root is read, never run)")
	fl.StringVar(&siteDir, "site-packages", "", "read distributions from this `DIR` without running an interpreter")
	fl.DurationVar(&timeout, "timeout", 30*time.Second, "give up after `DURATION` with exit status 124 (0: no limit)")
	fl.BoolVar(&noCache, "no-cache", false, "analyze again and keep no answer")
	a.opts.addLoaderFlags(cmd)
	a.opts.addCatalogFlags(cmd)
	a.opts.addStoreFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

// checkSettings fills in what check takes from the command line and the
// settings: the prefix, the loader, the catalog; doctor asks the same.
func (a *app) checkSettings(cmd *cobra.Command, opts *check.Options) error {
	prefix, err := a.prefix()
	if err != nil {
		return err
	}
	opts.Prefix, opts.Loader, opts.Logger = prefix, a.loaderOptions(cmd), a.logger
	opts.Catalog = a.loadCatalog
	opts.Key = append([]string{"mirror=" + string(a.opts.mirror)}, a.opts.catalogs...)
	opts.Inputs = append(a.configInputs(), a.opts.catalogs...)
	return nil
}

func (a *app) runCheck(cmd *cobra.Command, opts check.Options) error {
	if err := a.checkSettings(cmd, &opts); err != nil {
		return err
	}
	r, err := check.Run(cmd.Context(), opts)
	if errors.Is(err, check.ErrTimeout) {
		return &codeError{code: exitTimeout, err: err}
	}
	if err != nil {
		return err
	}
	if a.opts.json {
		if err := writeJSON(a.stdout, schemaCheck, r); err != nil {
			return err
		}
	} else {
		for _, p := range r.Problems {
			fmt.Fprintln(a.stdout, p)
		}
		if r.OK && !a.opts.quiet {
			fmt.Fprintf(a.stdout, "ok: %s loads whole\n", r.Target)
			for _, n := range r.Notes {
				fmt.Fprintf(a.stdout, "note: %s\n", n)
			}
		}
	}
	if !r.OK {
		return exitWith(exitMissing)
	}
	return nil
}

// configInputs are the files whose presence or content changes the
// settings: the config file candidates and the user catalog layer.
func (a *app) configInputs() []string {
	var out []string
	for _, d := range config.Dirs(os.Getenv) {
		out = append(out, filepath.Join(d, config.FileName))
	}
	if a.settings != nil && a.settings.File != "" {
		out = append(out, a.settings.File)
	}
	if l := a.userLayer(); l != "" {
		out = append(out, l)
	}
	return out
}
