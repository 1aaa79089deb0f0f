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
// LD_LIBRARY_PATH with each store directory any target needs, named as the
// target's system sees it (under --root, the root's paths: the script is
// for shells of that system). Without such directories the script is
// removed.
func (p *Prefix) writeEnvScript() error {
	recs, err := p.Records()
	if err != nil {
		return err
	}
	var dirs, names []string
	root, oneRoot := "", true
	for _, r := range recs {
		for _, d := range r.ScriptDirs {
			dirs = uniq.Append(dirs, seenAs(r.Root, d))
		}
		if len(r.ScriptDirs) > 0 {
			if len(names) > 0 && r.Root != root {
				oneRoot = false
			}
			root = r.Root
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
	shown := f
	if oneRoot {
		shown = seenAs(root, f)
	}
	var b strings.Builder
	b.WriteString("# Written by cudadeps resolve for: " + strings.Join(names, ", ") + ".\n")
	b.WriteString("# Source it (. " + shquote.Quote(shown) + ") in shells that import these packages; `cudadeps undo` rewrites it.\n")
	fmt.Fprintf(&b, "export LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n", shquote.Quote(strings.Join(dirs, ":")))
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(f, []byte(b.String()), 0o644)
}

// EnvDirs returns the directories the activation script adds to
// LD_LIBRARY_PATH, for every target, as the script names them (under
// --root, as the root's system sees them).
func (p *Prefix) EnvDirs() ([]string, error) {
	recs, err := p.Records()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, r := range recs {
		for _, d := range r.ScriptDirs {
			dirs = uniq.Append(dirs, seenAs(r.Root, d))
		}
	}
	return dirs, nil
}
