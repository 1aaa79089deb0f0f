package doctor

import (
	"fmt"
	"io"
	"strings"

	"github.com/cudadeps/cudadeps/internal/plural"
)

// WriteText writes the report for a terminal: one line per check, the
// advice under it when there is something to do, and a closing count.
func (r *Report) WriteText(w io.Writer) error {
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.ID))
	}
	var b strings.Builder
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", statusWord(c.Status), width, c.ID, c.Evidence)
		if c.Advice != "" && c.Status != OK {
			fmt.Fprintf(&b, "%-4s  %-*s  → %s\n", "", width, "", c.Advice)
		}
		if c.ID == CheckHost {
			r.Host.writeEvidence(&b, 4+2+width+2)
		}
	}
	s := r.Summary
	fmt.Fprintf(&b, "\n%s, %s, %d ok\n", plural.Count(s.Fail, "failure"), plural.Count(s.Warn, "warning"), s.OK)
	_, err := io.WriteString(w, b.String())
	return err
}

func statusWord(s Status) string {
	switch s {
	case Fail:
		return "FAIL"
	case Warn:
		return "warn"
	}
	return "ok"
}
