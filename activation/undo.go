package activation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testhook"
	"github.com/cudadeps/cudadeps/python/pymeta"
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
	// was recovered first (Recover).
	Recovered Interrupted `json:"recovered,omitempty"`
}

// Kept is one thing undo left because other targets' records name it.
type Kept struct {
	Path  string     `json:"path,omitempty"`  // a placed file or a created directory
	Store *fetch.Key `json:"store,omitempty"` // or a store entry
	For   []string   `json:"for"`             // the target keys that use it
}

// Undo removes everything recorded for the targets whose key or name
// matches one of targets (all targets when it is empty): placed files that
// are still as cudadeps left them, the directories it created once they
// are empty, its lines in the activation script, and the store entries it
// installed, each unless another target's record names it too. recovered
// is what Recover, which the caller runs first, returned: a target whose
// interrupted run it recovered is reported even when nothing of it
// remains, and a finished undo reports what it did.
func (p *Prefix) Undo(ctx context.Context, targets []string, recovered []Recovered) ([]UndoReport, error) {
	recs, err := p.Records()
	if err != nil {
		return nil, err
	}
	var chosen []*Record
	for _, r := range recs {
		if len(targets) == 0 || matchesAny(r, targets) {
			chosen = append(chosen, r)
		}
	}
	var out []UndoReport
	recoveredKind := map[string]Interrupted{}
	for _, rc := range recovered {
		r := &Record{Target: rc.Target, Name: rc.Name}
		recoveredKind[rc.Target] = rc.Kind
		if len(targets) > 0 && !matchesAny(r, targets) || slices.ContainsFunc(chosen, func(c *Record) bool { return c.Target == rc.Target }) {
			continue
		}
		if rc.Undo != nil {
			out = append(out, *rc.Undo)
		} else {
			chosen = append(chosen, r)
		}
	}
	if len(targets) > 0 && len(chosen) == 0 && len(out) == 0 {
		return nil, fmt.Errorf("nothing recorded for %s under %s", strings.Join(targets, ", "), p.dir)
	}
	for _, r := range chosen {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		others, err := p.others(r.Target)
		if err != nil {
			return out, err
		}
		rep, err := p.undoOne(ctx, r, others, nil)
		if err != nil {
			return out, err
		}
		rep.Recovered = recoveredKind[r.Target]
		out = append(out, rep)
	}
	if err := p.writeEnvScript(); err != nil {
		return out, err
	}
	if err := p.writeLdConfs(ctx); err != nil {
		return out, err
	}
	if err := p.removeProbesIfUnused(); err != nil {
		return out, err
	}
	// Lock files a killed process left, now that no entry needs them.
	return out, p.store.Tidy()
}

// undoer is one target's undo in progress.
type undoer struct {
	p      *Prefix
	r      *Record
	others []*Record
	rep    *UndoReport
	hook   func(step string)
}

func (u *undoer) step(name string) {
	if u.hook != nil {
		u.hook(name)
	}
}

// undoOne undoes one record, under a journal that lets a later run finish
// it if this one is killed. others are the records of the other targets:
// what they name stays. j, when set, is the journal of an interrupted undo
// being finished.
func (p *Prefix) undoOne(ctx context.Context, r *Record, others []*Record, j *journal) (UndoReport, error) {
	rep := UndoReport{Target: r.Name}
	if r.empty() {
		if j != nil {
			return rep, j.finish()
		}
		return rep, nil
	}
	if j == nil {
		var err error
		if j, err = p.beginJournal(r.Target, r.Name, InterruptedUndo); err != nil {
			return rep, err
		}
	}
	defer func() {
		if j != nil {
			j.f.Close() // killed or failed: the journal stays for the next run
		}
	}()
	u := &undoer{p: p, r: r, others: others, rep: &rep, hook: testhook.From(ctx)}
	if err := u.placed(); err != nil {
		return rep, err
	}
	u.created()
	u.installed(ctx)
	u.step("record")
	if err := p.save(&Record{Target: r.Target}); err != nil {
		return rep, err
	}
	// Its env.sh lines and ld.so.conf.d directories go with it.
	if err := p.writeEnvScript(); err != nil {
		return rep, err
	}
	if err := p.writeLdConfs(ctx, r.Root); err != nil {
		return rep, err
	}
	err := j.finish()
	j = nil
	return rep, err
}

// placed removes the record's files, last placed first, except those
// another record names, those already gone and those changed since: those
// are reported.
func (u *undoer) placed() error {
	for i := len(u.r.Placed) - 1; i >= 0; i-- {
		pl := u.r.Placed[i]
		if users := placedBy(u.others, pl.Path); len(users) > 0 {
			u.rep.Kept = append(u.rep.Kept, Kept{Path: pl.Path, For: users})
			continue
		}
		if _, err := os.Lstat(pl.Path); errors.Is(err, fs.ErrNotExist) {
			u.rep.AlreadyRemoved = append(u.rep.AlreadyRemoved, pl.Path)
			continue
		}
		if !pl.unchanged() {
			u.rep.Left = append(u.rep.Left, pl.Path)
			continue
		}
		if err := os.Remove(pl.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", pl.Path, err)
		}
		u.rep.Removed = append(u.rep.Removed, pl.Path)
		u.step("removed")
	}
	return nil
}

// created removes the directories the record created, deepest first
// whatever order they were recorded in, if empty and no other record
// names them.
func (u *undoer) created() {
	dirs := slices.Clone(u.r.Created)
	slices.SortStableFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if users := createdBy(u.others, d); len(users) > 0 {
			u.rep.Kept = append(u.rep.Kept, Kept{Path: d, For: users})
			continue
		}
		// Only an empty directory goes: anything else in it is not ours.
		if err := os.Remove(d); err == nil {
			u.rep.Dirs = append(u.rep.Dirs, d)
		} else if !errors.Is(err, fs.ErrNotExist) {
			u.rep.Warnings = append(u.rep.Warnings, fmt.Sprintf("kept %s: not empty", d))
		}
	}
}

// installed removes from the store the entries no other record uses.
func (u *undoer) installed(ctx context.Context) {
	for _, k := range u.r.Installed {
		if users := u.p.usersOf(u.others, k); len(users) > 0 {
			var keys []string
			for _, o := range users {
				keys = append(keys, o.Target)
			}
			u.rep.Kept = append(u.rep.Kept, Kept{Store: &k, For: keys})
			continue
		}
		err := u.p.store.Remove(ctx, k)
		switch {
		case errors.Is(err, fetch.ErrNotInstalled):
		case err != nil:
			u.rep.Warnings = append(u.rep.Warnings, fmt.Sprintf("store entry %s: %v", k, err))
		default:
			u.rep.Store = append(u.rep.Store, k)
			u.step("unstored")
		}
	}
}

// Use is a store entry that targets' records use (see InUse).
type Use struct {
	Key fetch.Key
	// Targets are the names of the targets that use it.
	Targets []string
}

// InUse reports which of keys' store entries a target's record uses:
// names as installed for it or shared with it, or points into with a
// placed link or an activation script directory. Removing such an entry
// would break a target that loads; undo of the last target that uses it
// removes it.
func (p *Prefix) InUse(keys ...fetch.Key) ([]Use, error) {
	recs, err := p.Records()
	if err != nil {
		return nil, err
	}
	var out []Use
	for _, k := range keys {
		u := Use{Key: k}
		for _, r := range p.usersOf(recs, k) {
			u.Targets = append(u.Targets, r.Name)
		}
		if len(u.Targets) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// usersOf are the records of recs that use the store entry k.
func (p *Prefix) usersOf(recs []*Record, k fetch.Key) []*Record {
	dir, err := p.store.EntryDir(k)
	if err != nil {
		dir = "" // an invalid key has no directory: only its name counts
	}
	var out []*Record
	for _, r := range recs {
		if r.uses(k, dir) {
			out = append(out, r)
		}
	}
	return out
}

func placedBy(recs []*Record, path string) []string {
	var out []string
	for _, r := range recs {
		if r.owns(path) {
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

// matchesAny reports a record named by one of targets: its target key,
// the name it was resolved under, a distribution name in any spelling, or
// the path of a file or directory target.
func matchesAny(r *Record, targets []string) bool {
	for _, k := range targets {
		switch {
		case k == r.Target, k == r.Name:
			return true
		case strings.HasPrefix(r.Target, "python:"+pymeta.NormalizeName(k)+"@"):
			return true
		}
		if abs, err := filepath.Abs(k); err == nil && strings.HasSuffix(r.Target, ":"+abs) {
			return true
		}
	}
	return false
}
