package resolver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testhook"
)

// A journal is written before cudadeps changes anything for a target: one
// line per intended action, each flushed to disk before the action runs,
// so that a process killed at any point leaves a list of everything it may
// have done. It lives beside the target's record
// (PREFIX/activations/HASH.journal) and is removed once the record names
// all of it. The next resolve or undo finds a journal whose process is gone
// (the file is no longer locked) and recovers it: after a resolve, every
// action that took effect is added to the record (the next resolve goes on
// from there, and undo removes it); after an undo, the undo is finished.

// Journal kinds.
const (
	kindResolve = "resolve"
	kindUndo    = "undo"
)

// Journal operations, one per line.
const (
	opBegin   = "begin"   // Target, Name, Kind
	opInstall = "install" // Key: a store entry about to be installed
	opMkdir   = "mkdir"   // Path: a directory about to be created
	opLink    = "link"    // Path -> Link
	opCopy    = "copy"    // Path, SHA256, Temp (the partial copy's name)
	opSave    = "save"    // the record is about to be written
)

type journalLine struct {
	Op        string     `json:"op"`
	Kind      string     `json:"kind,omitempty"`
	Target    string     `json:"target,omitempty"`
	Name      string     `json:"name,omitempty"`
	Key       *fetch.Key `json:"key,omitempty"`
	Path      string     `json:"path,omitempty"`
	Link      string     `json:"link,omitempty"`
	SHA256    string     `json:"sha256,omitempty"`
	Temp      string     `json:"temp,omitempty"`
	Soname    string     `json:"soname,omitempty"`
	Component string     `json:"component,omitempty"`
}

// journal is an open journal, locked by this process for as long as it
// runs: a journal that can be locked belongs to a process that died.
type journal struct {
	path string
	f    *os.File
}

func journalFile(prefix, key string) string {
	return strings.TrimSuffix(recordFile(prefix, key), ".json") + ".journal"
}

// beginJournal creates and locks the journal of a target. It is created
// under a temporary name and locked before it is linked into place, so no
// other process can take it for the journal of a dead one.
func beginJournal(prefix, key, name, kind string) (*journal, error) {
	dir := recordsDir(prefix)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-journal-*")
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	j := &journal{path: journalFile(prefix, key), f: f}
	fail := func(err error) (*journal, error) {
		f.Close()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fail(fmt.Errorf("lock %s: %w", tmp, err))
	}
	if err := j.write(journalLine{Op: opBegin, Kind: kind, Target: key, Name: name}); err != nil {
		return fail(err)
	}
	if err := os.Link(tmp, j.path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fail(fmt.Errorf("%s: another cudadeps process is changing %s (its journal is there)", j.path, name))
		}
		return fail(fmt.Errorf("journal: %w", err))
	}
	if err := syncDir(dir); err != nil {
		return fail(err)
	}
	return j, nil
}

// write appends lines and flushes them to disk before returning: the
// actions they announce may run once it has returned.
func (j *journal) write(lines ...journalLine) error {
	var b []byte
	for _, l := range lines {
		data, err := json.Marshal(l)
		if err != nil {
			return err
		}
		b = append(append(b, data...), '\n')
	}
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", j.path, err)
	}
	return nil
}

// finish removes the journal: the record now names everything it did.
func (j *journal) finish() error {
	err := os.Remove(j.path)
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", j.path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// readJournal parses a journal. A last line cut short by the kill is
// ignored: the action it announced had not started.
func readJournal(f *os.File) ([]journalLine, error) {
	var out []journalLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var l journalLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			break
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return nil, err
	}
	return out, nil
}

// Recovered names a target whose interrupted resolve or undo was recovered.
type Recovered struct {
	Target string `json:"target"`
	Name   string `json:"name"`
	// Kind is "resolve" (what it did is now recorded) or "undo" (finished).
	Kind string `json:"kind"`
	// Undo is what finishing an undo did.
	Undo *UndoReport `json:"undo,omitempty"`
}

// recoverJournals recovers every journal under prefix left by a process
// that died. Journals still locked by a running process are left alone.
func recoverJournals(ctx context.Context, prefix string, store *fetch.Store, hook func(string)) ([]Recovered, error) {
	if store != nil {
		if err := store.Tidy(); err != nil {
			return nil, err
		}
	}
	paths, err := filepath.Glob(filepath.Join(recordsDir(prefix), "*.journal"))
	if err != nil {
		return nil, err
	}
	// A journal being created when its process died: locked while its
	// process lives.
	if tmps, _ := filepath.Glob(filepath.Join(recordsDir(prefix), ".tmp-journal-*")); len(tmps) > 0 {
		for _, p := range tmps {
			if f, err := os.Open(p); err == nil {
				if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
					os.Remove(p)
				}
				f.Close()
			}
		}
	}
	var out []Recovered
	for _, p := range paths {
		rc, err := recoverJournal(ctx, prefix, p, store, hook)
		if err != nil {
			return out, err
		}
		if rc != nil {
			out = append(out, *rc)
		}
	}
	if len(out) > 0 {
		if err := writeEnvScript(prefix); err != nil {
			return out, err
		}
	}
	return out, nil
}

func recoverJournal(ctx context.Context, prefix, p string, store *fetch.Store, hook func(string)) (*Recovered, error) {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // recovered by another process meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", p, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil // its process is still running
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	// Another process may have recovered and removed it between the open
	// and the lock.
	if st, err := os.Stat(p); err != nil {
		return nil, nil
	} else if fst, err := f.Stat(); err != nil || !os.SameFile(st, fst) {
		return nil, nil
	}
	lines, err := readJournal(f)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", p, err)
	}
	if len(lines) == 0 || lines[0].Op != opBegin || lines[0].Target == "" {
		// Nothing was announced, so nothing was done.
		return nil, removeJournal(p)
	}
	head := lines[0]
	// A record being written when the process died.
	os.Remove(recordFile(prefix, head.Target) + ".tmp")
	rec, err := loadRecordKey(prefix, head.Target, head.Name)
	if err != nil {
		return nil, err
	}
	switch head.Kind {
	case kindUndo:
		others, err := otherRecords(prefix, head.Target)
		if err != nil {
			return nil, err
		}
		rec.hook = hook
		rep, err := undoOne(ctx, prefix, store, rec, others, &journal{path: p, f: f})
		if err != nil {
			return nil, err
		}
		rep.Recovered = kindUndo
		if err := removeJournal(p); err != nil {
			return nil, err
		}
		return &Recovered{Target: head.Target, Name: head.Name, Kind: head.Kind, Undo: &rep}, nil
	default:
		adopt(rec, lines[1:], store)
		if err := rec.save(prefix); err != nil {
			return nil, err
		}
	}
	if err := removeJournal(p); err != nil {
		return nil, err
	}
	return &Recovered{Target: head.Target, Name: head.Name, Kind: head.Kind}, nil
}

func removeJournal(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// adopt adds to rec every journaled action that took effect and is still
// as cudadeps left it; partial copies are deleted.
func adopt(rec *Record, lines []journalLine, store *fetch.Store) {
	for _, l := range lines {
		switch l.Op {
		case opInstall:
			if l.Key == nil || store == nil {
				continue
			}
			if _, ok, err := store.Lookup(*l.Key); err == nil && ok {
				rec.Installed = appendKeys(rec.Installed, []fetch.Key{*l.Key})
			}
		case opMkdir:
			if st, err := os.Lstat(l.Path); err == nil && st.IsDir() {
				rec.Created = appendUnique(rec.Created, l.Path)
			}
		case opLink, opCopy:
			if l.Temp != "" {
				os.Remove(l.Temp)
			}
			p := Placed{Path: l.Path, Link: l.Link, SHA256: l.SHA256, Soname: l.Soname, Component: l.Component}
			if !rec.owns(p.Path) && unchanged(p) {
				rec.Placed = append(rec.Placed, p)
			}
		}
	}
}

// intend announces actions in the target's journal, starting it if need
// be. A record without a prefix (a dry run's) keeps no journal.
func (r *Record) intend(lines ...journalLine) error {
	if r.prefix == "" || len(lines) == 0 {
		return nil
	}
	if r.j == nil {
		j, err := beginJournal(r.prefix, r.Target, r.Name, kindResolve)
		if err != nil {
			return err
		}
		r.j = j
	}
	return r.j.write(lines...)
}

// step tells the test hook (see internal/testhook) that a step is done.
func (r *Record) step(name string) {
	if r != nil && r.hook != nil {
		r.hook(name)
	}
}

// Commit saves the record and the activation script, then removes the
// round's journal: everything the round did is now recorded.
func (r *Record) Commit() error {
	if r.j != nil {
		if err := r.j.write(journalLine{Op: opSave}); err != nil {
			return err
		}
	}
	r.step("record")
	if err := r.save(r.prefix); err != nil {
		return err
	}
	if err := writeEnvScript(r.prefix); err != nil {
		return err
	}
	if r.j != nil {
		j := r.j
		r.j = nil
		return j.finish()
	}
	return nil
}

// Close commits a round that an error cut short: the record then names
// what it did, for undo.
func (r *Record) Close() error {
	if r == nil || r.j == nil {
		return nil
	}
	return r.Commit()
}

// IntendInstall announces the store entries about to be installed.
func (r *Record) IntendInstall(items []fetch.Item) error {
	if r == nil {
		return nil
	}
	var lines []journalLine
	for i := range items {
		k := items[i].Key
		lines = append(lines, journalLine{Op: opInstall, Key: &k})
	}
	return r.intend(lines...)
}

// OpenRecord recovers what interrupted runs left under the prefix (their
// journals), then loads the record of t, ready for a round of changes.
func OpenRecord(ctx context.Context, opts Options, t *Target) (*Record, error) {
	if _, err := recoverJournals(ctx, opts.Prefix, opts.Store, nil); err != nil {
		return nil, err
	}
	rec, err := loadRecord(opts.Prefix, t)
	if err != nil {
		return nil, err
	}
	rec.prefix, rec.store, rec.hook = opts.Prefix, opts.Store, testhook.From(ctx)
	return rec, nil
}
