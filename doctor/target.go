package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	checkpkg "github.com/cudadeps/cudadeps/check"
)

// maxProblemsShown bounds the problems one check line names.
const maxProblemsShown = 6

// checkAnalysis says whether the target loads whole by the analysis resolve
// and check make (Options.Analysis): what its metadata declares and the
// state of each distribution, the libraries the loader would not find or
// would take from the wrong place, symbols that would not bind.
func checkAnalysis(r *checkpkg.Result, failed string) *Check {
	if failed != "" {
		c := check("target", Warn, "the target could not be analysed: "+failed, "")
		return &c
	}
	if r == nil {
		return nil
	}
	if r.OK {
		c := check("target", OK, r.Target+" loads whole: every declared NVIDIA distribution intact, every library found where the package expects it, every symbol bound", "")
		return &c
	}
	var shown []string
	for i, p := range r.Problems {
		if i == maxProblemsShown {
			shown = append(shown, fmt.Sprintf("and %d more", len(r.Problems)-i))
			break
		}
		shown = append(shown, p.String())
	}
	c := check("target", Fail, fmt.Sprintf("%s does not load whole (%d problem(s)): %s", r.Target, len(r.Problems), strings.Join(shown, "; ")),
		"run 'cudadeps resolve "+targetWord(r.Target)+"' to restore what it declares (--dry-run to see the plan first); 'cudadeps check' lists every problem")
	return &c
}

// targetWord is the target's name as the user gave it: the first word of
// its description.
func targetWord(describe string) string {
	w, _, _ := strings.Cut(describe, " ")
	return w
}

// ImportTimeout bounds the import doctor runs.
const ImportTimeout = 2 * time.Minute

// checkImport runs the import of a Python target in a new process with the
// environment the user has (Options.ImportCommand): however the analysis
// reads, doctor never reports success while the import fails.
func checkImport(ctx context.Context, argv []string, timeout time.Duration) *Check {
	if len(argv) == 0 {
		return nil
	}
	if timeout <= 0 {
		timeout = ImportTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	shown := strings.Join(argv, " ")
	switch {
	case err == nil:
		c := check("import", OK, shown+" succeeds", "")
		return &c
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		c := check("import", Fail, fmt.Sprintf("%s did not finish in %s", shown, timeout), "")
		return &c
	}
	c := check("import", Fail, fmt.Sprintf("%s fails: %s", shown, lastLine(out.String())),
		"a library named there is what is missing: 'cudadeps resolve' restores it; 'cudadeps why SONAME --from FILE' says why the loader misses it")
	return &c
}

// lastLine is a process's last non-empty line of output (a Python
// traceback ends with the exception).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			return l
		}
	}
	return "(no output)"
}
