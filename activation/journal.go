package activation

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
	"github.com/cudadeps/cudadeps/internal/flock"
	"github.com/cudadeps/cudadeps/internal/uniq"
)

// A journal is written before cudadeps changes anything for a target: one
// line per intended action, each flushed to disk before the action runs,
// so that a process killed at any point leaves a list of everything it may
// have done. It lives beside the target's record
// (PREFIX/activations/HASH.journal) and is removed once the record names
// all of it. Recover finds a journal whose process is gone (the file is no
// longer locked) and finishes its work: after a change that places, every
// action announced is carried out if it had not been and is added to the
// record (the next resolve goes on from there, and undo removes it); after
// an undo, the undo is finished.

// Interrupted says what an interrupted run was doing; the journal's kind.
type Interrupted string

// The kinds of runs a journal records.
const (
	// InterruptedResolve: a change that installs and places (resolve,
	// apply). Recovery finishes its placements and records them.
	InterruptedResolve Interrupted = "resolve"
	// InterruptedUndo: an undo. Recovery finishes it.
	InterruptedUndo Interrupted = "undo"
)

// Journal operations, one per line.
const (
	opBegin   = "begin"   // Target, Name, Kind
	opInstall = "install" // Key: a store entry about to be installed
	opMkdir   = "mkdir"   // Path: a directory about to be created
	opLink    = "link"    // Path -> Link
	opCopy    = "copy"    // Path, Src, SHA256, Size, Temp (the partial copy's name)
	opWrite   = "write"   // Path, Data, Mode, SHA256, Temp
	opSave    = "save"    // the record is about to be written
)

type journalLine struct {
	Op        string      `json:"op"`
	Kind      Interrupted `json:"kind,omitempty"`
	Target    string      `json:"target,omitempty"`
	Name      string      `json:"name,omitempty"`
	Key       *fetch.Key  `json:"key,omitempty"`
	Path      string      `json:"path,omitempty"`
	Link      string      `json:"link,omitempty"`
	Src       string      `json:"src,omitempty"`
	SHA256    string      `json:"sha256,omitempty"`
	Size      int64       `json:"size,omitempty"`
	Data      []byte      `json:"data,omitempty"`
	Mode      fs.FileMode `json:"mode,omitempty"`
	Temp      string      `json:"temp,omitempty"`
	Soname    string      `json:"soname,omitempty"`
	Component string      `json:"component,omitempty"`
	Dist      string      `json:"distribution,omitempty"`
}

// journal is an open journal, locked by this process for as long as it
// runs: a journal that can be locked belongs to a process that died.
type journal struct {
	path string
	f    *os.File
}

// beginJournal creates and locks the journal of a target. It is created
// under a temporary name and locked before it is linked into place, so no
// other process can take it for the journal of a dead one.
func (p *Prefix) beginJournal(target, name string, kind Interrupted) (*journal, error) {
	dir := p.recordsDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	f, err := os.CreateTemp(dir, ".tmp-journal-*")
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	j := &journal{path: p.journalFile(target), f: f}
	fail := func(err error) (*journal, error) {
		f.Close()
		return nil, err
	}
	ok, err := flock.TryExclusive(f)
	if err == nil && !ok {
		err = syscall.EWOULDBLOCK // a recovery took it meanwhile for a dead run's
	}
	if err != nil {
		return fail(fmt.Errorf("lock %s: %w", tmp, err))
	}
	if err := j.write(journalLine{Op: opBegin, Kind: kind, Target: target, Name: name}); err != nil {
		return fail(err)
	}
	if err := os.Link(tmp, j.path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fail(p.journalThere(target, name))
		}
		return fail(fmt.Errorf("journal: %w", err))
	}
	if err := syncDir(dir); err != nil {
		return fail(err)
	}
	return j, nil
}

// journalThere says why a target's journal is in the way: a running
// process's, or one a killed process left that Recover has not seen; nil
// when there is none.
func (p *Prefix) journalThere(target, name string) error {
	path := p.journalFile(target)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	defer f.Close()
	if ok, err := flock.TryShared(f); err == nil && !ok {
		return fmt.Errorf("%s: another cudadeps process is changing %s (its journal is there)", path, name)
	}
	return fmt.Errorf("%s: an interrupted run changing %s left its journal: recover it first (cudadeps resolve, apply and undo do)", path, name)
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
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
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

// Recovered names a target whose interrupted run was recovered.
type Recovered struct {
	Target string      `json:"target"`
	Name   string      `json:"name"`
	Kind   Interrupted `json:"kind"`
	// Finished are the files an interrupted resolve had announced and not
	// placed, placed now.
	Finished []string `json:"finished,omitempty"`
	// Undo is what finishing an undo did.
	Undo *UndoReport `json:"undo,omitempty"`
}

// Recover finishes what interrupted runs left under the prefix: the store's
// staging directories and lock files no process holds, and every journal
// whose process is gone (see journal). Journals a running process holds
// are left alone. The commands that change the prefix call it first.
func (p *Prefix) Recover(ctx context.Context) ([]Recovered, error) {
	if err := p.store.Tidy(); err != nil {
		return nil, err
	}
	paths, err := filepath.Glob(filepath.Join(p.recordsDir(), "*.journal"))
	if err != nil {
		return nil, err
	}
	// A journal being created when its process died: locked while its
	// process lives.
	tmps, _ := filepath.Glob(filepath.Join(p.recordsDir(), ".tmp-journal-*"))
	for _, t := range tmps {
		if f, err := os.Open(t); err == nil {
			if ok, _ := flock.TryExclusive(f); ok {
				os.Remove(t)
			}
			f.Close()
		}
	}
	var out []Recovered
	for _, path := range paths {
		rc, err := p.recoverJournal(ctx, path)
		if err != nil {
			return out, err
		}
		if rc != nil {
			out = append(out, *rc)
		}
	}
	if len(out) > 0 {
		if err := p.writeEnvScript(); err != nil {
			return out, err
		}
	}
	// A rebuild of a root's ld.so.cache a killed run left unfinished.
	return out, p.writeLdConfs(ctx)
}

// openDead opens and locks a journal whose process is gone; nil when it
// is gone or its process still runs.
func openDead(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // recovered by another process meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	ok, err := flock.TryExclusive(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Not ok: its process is still running. Not named: another process
	// recovered and removed it between the open and the lock.
	if !ok || !flock.Names(path, f) {
		f.Close()
		return nil, nil
	}
	return f, nil
}

func (p *Prefix) recoverJournal(ctx context.Context, path string) (*Recovered, error) {
	f, err := openDead(path)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	lines, err := readJournal(f)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	if len(lines) == 0 || lines[0].Op != opBegin || lines[0].Target == "" {
		// Nothing was announced, so nothing was done.
		return nil, removeJournal(path)
	}
	head := lines[0]
	// A record being written when the process died: no other process
	// writes it while this one holds the journal.
	_ = atomicfile.RemoveTemps(p.RecordFile(head.Target))
	rec, err := p.record(head.Target, head.Name)
	if err != nil {
		return nil, err
	}
	rc := &Recovered{Target: head.Target, Name: head.Name, Kind: head.Kind}
	if head.Kind == InterruptedUndo {
		others, err := p.others(head.Target)
		if err != nil {
			return nil, err
		}
		rep, err := p.undoOne(ctx, rec, others, &journal{path: path, f: f})
		if err != nil {
			return nil, err
		}
		rep.Recovered = InterruptedUndo
		rc.Undo = &rep
		return rc, removeJournal(path)
	}
	rc.Kind = InterruptedResolve
	rc.Finished = p.adopt(rec, lines[1:])
	if err := p.save(rec); err != nil {
		return nil, err
	}
	return rc, removeJournal(path)
}

func removeJournal(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// adopt adds to rec every journaled action that took effect and is still
// as cudadeps left it, after carrying out the placements announced and not
// made (a placement is finished whole, not left half done for a rerun that
// would find the loader content with the half). It returns the files it
// placed.
func (p *Prefix) adopt(rec *Record, lines []journalLine) []string {
	var finished []string
	for _, l := range lines {
		switch l.Op {
		case opInstall:
			if l.Key == nil {
				continue
			}
			if _, ok, err := p.store.Lookup(*l.Key); err == nil && ok {
				rec.Installed = appendKeys(rec.Installed, *l.Key)
			}
		case opMkdir:
			if st, err := os.Lstat(l.Path); err == nil && st.IsDir() {
				rec.Created = uniq.Append(rec.Created, l.Path)
			}
		case opLink, opCopy, opWrite:
			if l.Temp != "" {
				os.Remove(l.Temp)
			}
			pl, done := finishPlacement(l, rec.Root)
			if done {
				finished = append(finished, pl.Path)
			}
			if !rec.owns(pl.Path) && pl.unchanged() {
				rec.Placed = append(rec.Placed, pl)
			}
		}
	}
	return finished
}

// finishPlacement carries out a journaled placement that had not taken
// place, when nothing took its path since and what it needs is there (the
// directory, and the store file for a link or a copy). It returns the
// placement as recorded, and whether it placed it now.
func finishPlacement(l journalLine, root string) (Placed, bool) {
	pl := Placed{Path: l.Path, Link: l.Link, Size: l.Size, SHA256: l.SHA256, Soname: l.Soname, Component: l.Component, Dist: l.Dist}
	switch l.Op {
	case opLink:
		pl.Kind = PlacedLink
	case opCopy:
		pl.Kind = PlacedCopy
	default:
		pl.Kind = PlacedFile
	}
	if _, err := os.Lstat(l.Path); !errors.Is(err, fs.ErrNotExist) {
		_ = pl.identify() // placed before the kill, or not ours
		return pl, false
	}
	if st, err := os.Stat(filepath.Dir(l.Path)); err != nil || !st.IsDir() {
		return pl, false
	}
	var err error
	switch pl.Kind {
	case PlacedLink:
		if _, err := os.Stat(pl.linkTarget(root)); err != nil {
			return pl, false
		}
		err = os.Symlink(l.Link, l.Path)
	case PlacedCopy:
		if l.Src == "" {
			return pl, false // a journal older than the copy's source
		}
		var sum string
		if sum, err = copyFile(l.Src, l.Path, l.Temp); err == nil && sum != l.SHA256 {
			os.Remove(l.Path)
			return pl, false
		}
	default:
		err = writeFile(l.Path, l.Data, l.Mode, l.Temp)
	}
	if err != nil {
		return pl, false
	}
	if pl.Kind != PlacedLink {
		_ = pl.identify()
	}
	return pl, true
}
