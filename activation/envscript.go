package activation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cudadeps/cudadeps/internal/atomicfile"
	"github.com/cudadeps/cudadeps/internal/shquote"
	"github.com/cudadeps/cudadeps/internal/uniq"
)

// writeEnvScript regenerates PREFIX/env.sh from every record: one
// LD_LIBRARY_PATH with each store directory any target needs. Without such
// directories the script is removed.
func (p *Prefix) writeEnvScript() error {
	recs, err := p.Records()
	if err != nil {
		return err
	}
	var dirs, names []string
	for _, r := range recs {
		for _, d := range r.ScriptDirs {
			dirs = uniq.Append(dirs, d)
		}
		if len(r.ScriptDirs) > 0 {
			names = append(names, r.Name)
		}
	}
	f := p.EnvScript()
	if len(dirs) == 0 {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var b strings.Builder
	b.WriteString("# Written by cudadeps resolve for: " + strings.Join(names, ", ") + ".\n")
	b.WriteString("# Source it (. " + shquote.Quote(f) + ") in shells that import these packages; `cudadeps undo` rewrites it.\n")
	fmt.Fprintf(&b, "export LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n", shquote.Quote(strings.Join(dirs, ":")))
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(f, []byte(b.String()), 0o644)
}

// EnvDirs returns the directories the activation script adds to
// LD_LIBRARY_PATH, for every target.
func (p *Prefix) EnvDirs() ([]string, error) {
	recs, err := p.Records()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, r := range recs {
		for _, d := range r.ScriptDirs {
			dirs = uniq.Append(dirs, d)
		}
	}
	return dirs, nil
}
