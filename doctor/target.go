package doctor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	checkpkg "github.com/cudadeps/cudadeps/check"
	"github.com/cudadeps/cudadeps/resolver"
)

// maxProblemsShown bounds the problems one check line names.
const maxProblemsShown = 6

// checkAnalysis says whether the target loads whole by the analysis resolve
// and check make (Options.Analyze): what its metadata declares and the
// state of each distribution, the libraries the loader would not find or
// would take from the wrong place, symbols that would not bind. flags
// (Options.TargetFlags) go into the commands it suggests.
func checkAnalysis(r *checkpkg.Result, failed error, flags string) *Check {
	if failed != nil {
		c := check("target", Warn, "the target could not be analysed: "+failed.Error(), "")
		return &c
	}
	if r == nil {
		return nil
	}
	if r.OK && len(r.Notes) > 0 {
		c := check("target", OK, r.Target+" loads whole: every declared NVIDIA distribution intact, every symbol bound, and libraries taken from elsewhere at exactly the required release: "+strings.Join(r.Notes, "; "), "")
		return &c
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
	fix := fmt.Sprintf("run 'cudadeps resolve %[1]s' to restore what it declares (--dry-run to see the plan first); 'cudadeps check %[1]s' lists every problem", strings.TrimSpace(targetWord(r.Target)+" "+flags))
	if advice := ownAdvice(r.Problems); advice != "" {
		fix = advice
	}
	c := check("target", Fail, fmt.Sprintf("%s does not load whole (%d problem(s)): %s", r.Target, len(r.Problems), strings.Join(shown, "; ")), fix)
	return &c
}

// ownAdvice joins the problems' own advice when every problem has one:
// what resolve will not do (a distribution at another version is pip's
// to change); "" when resolve is the fix for any of them.
func ownAdvice(problems []resolver.Problem) string {
	var out []string
	for _, p := range problems {
		if p.Advice == "" {
			return ""
		}
		if !slices.Contains(out, p.Advice) {
			out = append(out, p.Advice)
		}
	}
	return strings.Join(out, "; ")
}

// targetWord is the target's name as the user gave it: the first word of
// its description.
func targetWord(describe string) string {
	w, _, _ := strings.Cut(describe, " ")
	return w
}

// ImportTimeout bounds the import doctor runs.
const ImportTimeout = 2 * time.Minute

// checkImport says how the import of a Python target went (check's
// Import): however the analysis reads, doctor never reports success while
// the import fails. An import that succeeded is not run again while
// nothing it reads changed: the line says when it ran.
func checkImport(r *checkpkg.Result) *Check {
	if r == nil || r.Import == nil {
		return nil
	}
	imp := r.Import
	var c Check
	switch {
	case imp.OK && r.Cached:
		c = check("import", OK, fmt.Sprintf("%s succeeded at %s, and nothing it reads has changed since (--no-cache imports again)", imp.Command, imp.At.Format(time.RFC3339)), "")
	case imp.OK:
		c = check("import", OK, imp.Command+" succeeds", "")
	case imp.TimedOut:
		c = check("import", Fail, fmt.Sprintf("%s did not finish in %s", imp.Command, ImportTimeout), "")
	default:
		c = check("import", Fail, fmt.Sprintf("%s fails: %s", imp.Command, imp.LastLine),
			"a library named there is what is missing: 'cudadeps resolve' restores it; 'cudadeps why SONAME --from FILE' says why the loader misses it")
	}
	return &c
}
