package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/loader/ldso"
)

func (a *app) whyCommand() *cobra.Command {
	var from string
	cmd := &cobra.Command{
		Use:   "why SONAME --from FILE",
		Short: "Explain, step by step, where the loader looks for one library",
		Long: `why replays glibc's search for SONAME as FILE needs it: every directory tried,
in order, with the rule that put it there (DT_RPATH of FILE or of an object
above it, LD_LIBRARY_PATH, DT_RUNPATH, /etc/ld.so.cache, the default
directories), and why each candidate was taken or rejected (absent, another
class or machine, not a loadable file). Rules that do not apply say why.

FILE is loaded as the main object, as with 'ldd FILE'. If something FILE
loads first already answers to SONAME, the loader does not search at all;
why says so, and shows the search that would otherwise happen.

Exit status: 0 when the library is found, 3 when it is not, 1 on errors,
2 on usage errors.`,
		Example: `  cudadeps why libcudss.so.0 --from site-packages/torch/lib/libtorch_cuda.so
  cudadeps why libcublas.so.11 --from libcusolver.so.11 --ld-library-path /opt/cuda/lib64 --json`,
		Args: argsExactly(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return usageError("why needs --from FILE: the object that needs %s", args[0])
			}
			if st, err := os.Stat(from); err == nil && st.IsDir() {
				return usageError("--from %s: is a directory; name the ELF file that needs %s", from, args[0])
			}
			l, err := a.newLoader(cmd)
			if err != nil {
				return err
			}
			defer l.Close()
			s, err := l.Find(cmd.Context(), args[0], from)
			if err != nil {
				return fmt.Errorf("--from %s: %w", from, err)
			}
			if a.opts.json {
				if err := writeJSON(a.stdout, schemaWhy, whyJSON(s)); err != nil {
					return err
				}
			} else {
				renderWhy(a.stdout, s, a.opts.verbose)
			}
			if s.Found == nil && s.Loaded == nil {
				return exitWith(exitMissing)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the object that needs the library (`FILE`)")
	a.opts.addLoaderFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

type whyReport struct {
	Soname  string         `json:"soname"`
	From    string         `json:"from"`
	Found   *whyFound      `json:"found"`
	Loaded  *whyFound      `json:"already_loaded"`
	Steps   []ldso.Attempt `json:"steps"`
	Problem string         `json:"problem,omitempty"`
}

type whyFound struct {
	Path  string   `json:"path"`
	Via   ldso.Via `json:"via"`
	From  string   `json:"from,omitempty"`
	Entry string   `json:"entry,omitempty"`
}

func whyJSON(s *ldso.Search) whyReport {
	r := whyReport{Soname: s.Name, From: s.From.Path, Steps: s.Steps, Problem: s.Problem}
	if r.Steps == nil {
		r.Steps = []ldso.Attempt{}
	}
	if s.Found != nil {
		r.Found = &whyFound{Path: s.Found.Path, Via: s.Found.Via, From: s.Found.From, Entry: s.Found.Entry}
	}
	if s.Loaded != nil {
		r.Loaded = &whyFound{Path: s.Loaded.Path, Via: s.Loaded.Via, From: s.Loaded.From, Entry: s.Loaded.Entry}
	}
	return r
}

// renderWhy prints the search grouped by rule; absent hwcaps subdirectories
// are counted rather than listed unless verbose.
func renderWhy(w io.Writer, s *ldso.Search, verbose bool) {
	fmt.Fprintf(w, "%s, needed by %s\n", s.Name, s.From.Path)
	if s.Loaded != nil {
		fmt.Fprintf(w, "\nAlready loaded: %s answers to %s (loaded via %s), so the loader does not search.\nThe search it would otherwise make:\n", s.Loaded.Path, s.Name, s.Loaded.Via)
	}
	fmt.Fprintln(w)
	n := 0
	group := ""
	absent := 0
	flush := func() {
		if absent > 0 && !verbose {
			fmt.Fprintf(w, "      (%d hwcaps subdirectories absent)\n", absent)
		}
		absent = 0
	}
	for _, st := range s.Steps {
		key := st.Source
		if key != group {
			flush()
			group = key
			n++
			switch st.Verdict {
			case ldso.VerdictSkipped:
				fmt.Fprintf(w, "%2d. %s: %s\n", n, st.Source, st.Detail)
				continue
			case ldso.VerdictCacheMiss:
				fmt.Fprintf(w, "%2d. %s: no entry for %s\n", n, st.Source, s.Name)
				continue
			}
			fmt.Fprintf(w, "%2d. %s\n", n, st.Source)
		}
		switch st.Verdict {
		case ldso.VerdictNoDir:
			if st.Subdir != "" && !verbose {
				absent++
				continue
			}
			fmt.Fprintf(w, "      %-60s no such directory%s\n", st.Dir, entryNote(st))
		case ldso.VerdictSkipped:
			fmt.Fprintf(w, "      %s: %s\n", st.Path, st.Detail)
		case ldso.VerdictAbsent:
			// A detail says what is there instead of a file.
			what := st.Detail
			if what == "" {
				what = outcomeText(st.Verdict)
			}
			fmt.Fprintf(w, "      %-60s %s%s\n", st.Path, what, entryNote(st))
		default:
			fmt.Fprintf(w, "      %-60s %s%s%s\n", st.Path, outcomeText(st.Verdict), detail(st.Detail), entryNote(st))
		}
	}
	flush()
	fmt.Fprintln(w)
	switch {
	case s.Found != nil:
		fmt.Fprintf(w, "Found: %s (%s)\n", s.Found.Path, s.Found.Via)
	case s.Problem != "":
		fmt.Fprintf(w, "Not found: %s\n", s.Problem)
	default:
		fmt.Fprintf(w, "Not found: the loader fails with \"%s: cannot open shared object file: No such file or directory\".\n", s.Name)
	}
}

func entryNote(st ldso.Attempt) string {
	if st.Entry != "" && (st.Via == ldso.ViaRPath || st.Via == ldso.ViaRunPath || st.Via == ldso.ViaLDLibraryPath) && !strings.HasPrefix(st.Entry, "/") {
		return "   from " + st.Entry
	}
	return ""
}

func detail(d string) string {
	if d == "" {
		return ""
	}
	return ": " + d
}

func outcomeText(o ldso.Verdict) string {
	switch o {
	case ldso.VerdictFound:
		return "FOUND"
	case ldso.VerdictAbsent:
		return "no such file"
	case ldso.VerdictWrongClass:
		return "skipped, wrong ELF class"
	case ldso.VerdictWrongMachine:
		return "skipped, wrong machine"
	case ldso.VerdictUnreadable:
		return "skipped, unreadable"
	case ldso.VerdictInvalid:
		return "REFUSED, the loader stops here"
	}
	return string(o)
}
