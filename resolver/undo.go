package resolver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/pyenv"
)

// UndoReport says what undo removed and what it left.
type UndoReport struct {
	Target   string      `json:"target"`
	Removed  []string    `json:"removed"`
	Left     []string    `json:"left,omitempty"` // changed since cudadeps placed them: not ours to remove
	Dirs     []string    `json:"removed_dirs"`
	Store    []fetch.Key `json:"removed_from_store"`
	Warnings []string    `json:"warnings,omitempty"`
}

// Undo removes everything recorded for the targets whose key or name
// matches one of keys (all targets when keys is empty): placed links and
// copies that are still as cudadeps left them, the directories it created
// once they are empty, its lines in the activation script, and the store
// entries it installed that no other target uses.
func Undo(ctx context.Context, prefix string, store *fetch.Store, keys []string, log *slog.Logger) ([]UndoReport, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	recs, err := Records(prefix)
	if err != nil {
		return nil, err
	}
	var chosen, others []*Record
	for _, r := range recs {
		if len(keys) == 0 || matchesAny(r, keys) {
			chosen = append(chosen, r)
		} else {
			others = append(others, r)
		}
	}
	if len(keys) > 0 && len(chosen) == 0 {
		return nil, fmt.Errorf("nothing recorded for %s under %s", strings.Join(keys, ", "), prefix)
	}
	var out []UndoReport
	for _, r := range chosen {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		rep := UndoReport{Target: r.Name}
		for i := len(r.Placed) - 1; i >= 0; i-- {
			p := r.Placed[i]
			if !unchanged(p) {
				rep.Left = append(rep.Left, p.Path)
				continue
			}
			if err := os.Remove(p.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return out, fmt.Errorf("remove %s: %w", p.Path, err)
			}
			rep.Removed = append(rep.Removed, p.Path)
		}
		for i := len(r.Created) - 1; i >= 0; i-- {
			// Only an empty directory goes: anything else in it is not ours.
			if err := os.Remove(r.Created[i]); err == nil {
				rep.Dirs = append(rep.Dirs, r.Created[i])
			} else if !errors.Is(err, fs.ErrNotExist) {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("kept %s: not empty", r.Created[i]))
			}
		}
		for _, k := range r.Installed {
			if usedElsewhere(k, others) {
				continue
			}
			if store != nil {
				if err := store.Remove(ctx, k); err != nil && !errors.Is(err, fetch.ErrNotInstalled) {
					rep.Warnings = append(rep.Warnings, fmt.Sprintf("store entry %s: %v", k, err))
					continue
				}
				rep.Store = append(rep.Store, k)
			}
		}
		empty := &Record{Target: r.Target}
		if err := empty.save(prefix); err != nil {
			return out, err
		}
		log.Info("undone", "target", r.Name, "removed", len(rep.Removed), "left", len(rep.Left))
		out = append(out, rep)
	}
	if err := writeEnvScript(prefix); err != nil {
		return out, err
	}
	return out, nil
}

func usedElsewhere(k fetch.Key, others []*Record) bool {
	for _, r := range others {
		for _, x := range r.Installed {
			if x == k {
				return true
			}
		}
	}
	return false
}

// unchanged reports whether a placed file is still what cudadeps put there.
func unchanged(p Placed) bool {
	st, err := os.Lstat(p.Path)
	if err != nil {
		return false
	}
	if p.Link != "" {
		if st.Mode()&fs.ModeSymlink == 0 {
			return false
		}
		target, err := os.Readlink(p.Path)
		return err == nil && target == p.Link
	}
	if !st.Mode().IsRegular() {
		return false
	}
	sum, err := fileSum(p.Path)
	return err == nil && sum == p.SHA256
}

// matchesAny reports a record named by one of keys: its target key, the
// name it was resolved under, a distribution name in any spelling, or the
// path of a file or directory target.
func matchesAny(r *Record, keys []string) bool {
	for _, k := range keys {
		switch {
		case k == r.Target, k == r.Name:
			return true
		case strings.HasPrefix(r.Target, "python:"+pyenv.Normalize(k)+"@"):
			return true
		}
		if abs, err := filepath.Abs(k); err == nil && strings.HasSuffix(r.Target, ":"+abs) {
			return true
		}
	}
	return false
}
