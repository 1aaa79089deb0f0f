package resolver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testhook"
	"github.com/cudadeps/cudadeps/pyenv"
)

// UndoReport says what undo removed and what it left.
type UndoReport struct {
	Target  string   `json:"target"`
	Removed []string `json:"removed"`
	// AlreadyRemoved are placed files that were gone already (an undo that
	// was interrupted had removed them).
	AlreadyRemoved []string `json:"already_removed,omitempty"`
	Left           []string `json:"left,omitempty"` // changed since cudadeps placed them: not ours to remove
	// Kept are what other targets still use: left for them.
	Kept     []Kept      `json:"kept,omitempty"`
	Dirs     []string    `json:"removed_dirs"`
	Store    []fetch.Key `json:"removed_from_store"`
	Warnings []string    `json:"warnings,omitempty"`
	// Recovered is set when an interrupted resolve or undo of the target
	// was found (its journal) and recovered first.
	Recovered string `json:"recovered,omitempty"`
}

// Kept is one thing undo left because other targets' records name it.
type Kept struct {
	Path  string     `json:"path,omitempty"`  // a placed file or a created directory
	Store *fetch.Key `json:"store,omitempty"` // or a store entry
	For   []string   `json:"for"`             // the target keys that use it
}

// Undo removes everything recorded for the targets whose key or name
// matches one of keys (all targets when keys is empty): placed links and
// copies that are still as cudadeps left them, the directories it created
// once they are empty, its lines in the activation script, and the store
// entries it installed, each unless another target's record names it too.
// Interrupted runs are recovered first (their journals), so undo also
// removes what a killed resolve did.
func Undo(ctx context.Context, prefix string, store *fetch.Store, keys []string, log *slog.Logger) ([]UndoReport, error) {
	hook := testhook.From(ctx)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	recovered, err := recoverJournals(ctx, prefix, store, hook)
	if err != nil {
		return nil, err
	}
	recs, err := Records(prefix)
	if err != nil {
		return nil, err
	}
	var chosen []*Record
	for _, r := range recs {
		if len(keys) == 0 || matchesAny(r, keys) {
			chosen = append(chosen, r)
		}
	}
	// A target whose interrupted run was recovered is reported even when
	// nothing of it remains to undo; a finished undo reports what it did.
	var out []UndoReport
	recoveredKind := map[string]string{}
	for _, rc := range recovered {
		r := &Record{Target: rc.Target, Name: rc.Name}
		recoveredKind[rc.Target] = rc.Kind
		if len(keys) > 0 && !matchesAny(r, keys) || slices.ContainsFunc(chosen, func(c *Record) bool { return c.Target == rc.Target }) {
			continue
		}
		if rc.Undo != nil {
			out = append(out, *rc.Undo)
		} else {
			chosen = append(chosen, r)
		}
	}
	if len(keys) > 0 && len(chosen) == 0 && len(out) == 0 {
		return nil, fmt.Errorf("nothing recorded for %s under %s", strings.Join(keys, ", "), prefix)
	}
	for _, r := range chosen {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		others, err := otherRecords(prefix, r.Target)
		if err != nil {
			return out, err
		}
		r.hook = hook
		rep, err := undoOne(ctx, prefix, store, r, others, nil)
		if err != nil {
			return out, err
		}
		rep.Recovered = recoveredKind[r.Target]
		log.Info("undone", "target", r.Name, "removed", len(rep.Removed), "left", len(rep.Left), "kept", len(rep.Kept))
		out = append(out, rep)
	}
	if err := writeEnvScript(prefix); err != nil {
		return out, err
	}
	return out, removeProbesIfUnused(prefix)
}

// removeProbesIfUnused removes the probes written for reruns once no
// target's record names anything: the last undo leaves no trace of them.
func removeProbesIfUnused(prefix string) error {
	recs, err := Records(prefix)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if len(r.Placed) > 0 || len(r.Created) > 0 || len(r.ScriptDirs) > 0 || len(r.Installed) > 0 {
			return nil
		}
	}
	dir := probeDir(prefix)
	probes, err := filepath.Glob(filepath.Join(dir, "probe-*.py"))
	if err != nil {
		return err
	}
	for _, p := range probes {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return err
	}
	return nil
}

// undoOne undoes one record, under a journal that lets a later run finish
// it if this one is killed. others are the records of the other targets:
// what they name stays.
// j, when set, is the journal of an interrupted undo being finished.
func undoOne(ctx context.Context, prefix string, store *fetch.Store, r *Record, others []*Record, j *journal) (UndoReport, error) {
	rep := UndoReport{Target: r.Name}
	if len(r.Placed) == 0 && len(r.Created) == 0 && len(r.ScriptDirs) == 0 && len(r.Installed) == 0 {
		if j != nil {
			return rep, j.finish()
		}
		return rep, nil
	}
	if j == nil {
		var err error
		if j, err = beginJournal(prefix, r.Target, r.Name, kindUndo); err != nil {
			return rep, err
		}
	}
	defer func() {
		if j != nil {
			j.f.Close() // killed or failed: the journal stays for the next run
		}
	}()
	if err := undoPlaced(r, others, &rep); err != nil {
		return rep, err
	}
	undoCreated(r, others, &rep)
	undoInstalled(ctx, store, r, others, &rep)
	r.step("record")
	empty := &Record{Target: r.Target}
	if err := empty.save(prefix); err != nil {
		return rep, err
	}
	// Its env.sh lines go with it.
	if err := writeEnvScript(prefix); err != nil {
		return rep, err
	}
	err := j.finish()
	j = nil
	return rep, err
}

// undoPlaced removes the record's links and copies, last placed first,
// except those another record names, those already gone and those changed
// since: those are reported.
func undoPlaced(r *Record, others []*Record, rep *UndoReport) error {
	for i := len(r.Placed) - 1; i >= 0; i-- {
		p := r.Placed[i]
		if users := placedBy(others, p.Path); len(users) > 0 {
			rep.Kept = append(rep.Kept, Kept{Path: p.Path, For: users})
			continue
		}
		if _, err := os.Lstat(p.Path); errors.Is(err, fs.ErrNotExist) {
			rep.AlreadyRemoved = append(rep.AlreadyRemoved, p.Path)
			continue
		}
		if !unchanged(p) {
			rep.Left = append(rep.Left, p.Path)
			continue
		}
		if err := os.Remove(p.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p.Path, err)
		}
		rep.Removed = append(rep.Removed, p.Path)
		r.step("removed")
	}
	return nil
}

// undoCreated removes the directories the record created, deepest first
// whatever order they were recorded in, if empty and no other record
// names them.
func undoCreated(r *Record, others []*Record, rep *UndoReport) {
	dirs := slices.Clone(r.Created)
	slices.SortStableFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if users := createdBy(others, d); len(users) > 0 {
			rep.Kept = append(rep.Kept, Kept{Path: d, For: users})
			continue
		}
		// Only an empty directory goes: anything else in it is not ours.
		if err := os.Remove(d); err == nil {
			rep.Dirs = append(rep.Dirs, d)
		} else if !errors.Is(err, fs.ErrNotExist) {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("kept %s: not empty", d))
		}
	}
}

// undoInstalled removes from the store the entries no other record names.
func undoInstalled(ctx context.Context, store *fetch.Store, r *Record, others []*Record, rep *UndoReport) {
	for _, k := range r.Installed {
		if users := installedBy(others, k); len(users) > 0 {
			rep.Kept = append(rep.Kept, Kept{Store: &k, For: users})
			continue
		}
		if store == nil {
			continue
		}
		err := store.Remove(ctx, k)
		switch {
		case errors.Is(err, fetch.ErrNotInstalled):
		case err != nil:
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("store entry %s: %v", k, err))
		default:
			rep.Store = append(rep.Store, k)
			r.step("unstored")
		}
	}
}

func placedBy(recs []*Record, p string) []string {
	var out []string
	for _, r := range recs {
		if r.owns(p) {
			out = append(out, r.Target)
		}
	}
	return out
}

func createdBy(recs []*Record, d string) []string {
	var out []string
	for _, r := range recs {
		if slices.Contains(r.Created, d) {
			out = append(out, r.Target)
		}
	}
	return out
}

func installedBy(recs []*Record, k fetch.Key) []string {
	var out []string
	for _, r := range recs {
		if slices.Contains(r.Installed, k) {
			out = append(out, r.Target)
		}
	}
	return out
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
