package activation

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/filehash"
	"github.com/cudadeps/cudadeps/internal/testhook"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/python/declared"
)

// Change is a round of changes for one target: store entries installed,
// files placed, activation script directories added. Each change is
// announced in the target's journal before it is made; Commit records it
// all and removes the journal.
type Change struct {
	ctx context.Context
	p   *Prefix
	rec *Record
	j   *journal
	// hook is the test hook the context carried at Begin (internal/testhook).
	hook func(step string)
	// conf says whether the root's ldconfig can activate directories
	// through /etc/ld.so.conf.d: asked once, on the first directory.
	conf *confProbe
}

// Begin opens the record of a target (its key, and the name the user gave
// it) for a round of changes. It fails when another process is changing
// the target, or when an interrupted run's journal has not been recovered
// (Recover).
func (p *Prefix) Begin(ctx context.Context, target, name string) (*Change, error) {
	if err := p.journalThere(target, name); err != nil {
		return nil, err
	}
	rec, err := p.record(target, name)
	if err != nil {
		return nil, err
	}
	if rec.Root == "" {
		rec.Root = p.root
	}
	return &Change{ctx: ctx, p: p, rec: rec, hook: testhook.From(ctx)}, nil
}

// Record is the target's record as the change has it so far; the caller
// reads it and never changes it.
func (c *Change) Record() *Record { return c.rec }

// step tells the test hook that a step is done.
func (c *Change) step(name string) {
	if c.hook != nil {
		c.hook(name)
	}
}

// intend announces actions in the target's journal, starting it if need
// be.
func (c *Change) intend(lines ...journalLine) error {
	if len(lines) == 0 {
		return nil
	}
	if c.j == nil {
		j, err := c.p.beginJournal(c.rec.Target, c.rec.Name, InterruptedResolve)
		if err != nil {
			return err
		}
		c.j = j
	}
	return c.j.write(lines...)
}

// Install installs items into the prefix's store through client, each
// announced in the journal first, and records for the target the entries
// present afterwards, also when some failed. It returns their keys.
func (c *Change) Install(ctx context.Context, client *fetch.Client, items []fetch.Item) ([]fetch.Key, error) {
	if len(items) == 0 {
		return nil, nil
	}
	var lines []journalLine
	for i := range items {
		k := items[i].Key
		lines = append(lines, journalLine{Op: opInstall, Key: &k})
	}
	if err := c.intend(lines...); err != nil {
		return nil, err
	}
	_, err := c.p.store.Install(ctx, client, items)
	var present []fetch.Key
	for _, it := range items {
		if _, ok, _ := c.p.store.Lookup(it.Key); ok {
			present = appendKeys(present, it.Key)
		}
	}
	c.rec.Installed = appendKeys(c.rec.Installed, present...)
	if err != nil {
		return present, err
	}
	c.step("installed")
	return present, nil
}

// Discard removes from the store an entry this change installed and that
// nothing will use (a release refused after its download), unless another
// target's record uses it, and drops it from the target's record.
func (c *Change) Discard(ctx context.Context, key fetch.Key) error {
	others, err := c.p.others(c.rec.Target)
	if err != nil {
		return err
	}
	c.rec.Installed = slices.DeleteFunc(c.rec.Installed, func(k fetch.Key) bool { return k == key })
	if len(c.p.usersOf(others, key)) > 0 {
		return nil
	}
	if err := c.p.store.Remove(ctx, key); err != nil && !errors.Is(err, fetch.ErrNotInstalled) {
		return err
	}
	return nil
}

// File is one file to put in place for a target.
type File struct {
	// Path is where it goes, absolute.
	Path string
	// From is the store file it comes from: linked to, or copied. When it
	// is "", Data is written instead, with Mode (0644 when 0).
	From string
	Data []byte
	Mode fs.FileMode
	// Soname and Component say what it is, for the record.
	Soname    string
	Component string
	// Dist names the distribution the file restores, if any.
	Dist string
}

// Place puts files in place for the target, from the store entry key: a
// symbolic link to each From (relative, so that the prefix and the tree
// can move together), or with copy set a copy of it, or Data written. The
// directories they go in are created as needed, and recorded. A file of
// the same path already there is left alone (it is not ours) unless
// another target placed it: then this target shares it. Every change is
// announced in the journal before it is made. Place returns what it
// placed.
func (c *Change) Place(key fetch.Key, files []File, copy bool) ([]Placed, error) {
	type todo struct {
		p   Placed
		f   File
		tmp string
	}
	var plan []todo
	var intents []journalLine
	made := map[string]bool{}
	for _, f := range files {
		if dir := filepath.Dir(f.Path); !made[dir] {
			if err := c.mkdir(dir); err != nil {
				return nil, err
			}
			made[dir] = true
		}
		if _, err := os.Lstat(f.Path); err == nil {
			if err := c.inTheWay(f.Path); err != nil {
				return nil, err
			}
			continue
		}
		t := todo{p: Placed{Path: f.Path, Soname: f.Soname, Component: f.Component, Dist: f.Dist}, f: f}
		l, err := t.p.plan(f, copy, c.rec.Root)
		if err != nil {
			return nil, err
		}
		t.tmp = l.Temp
		plan = append(plan, t)
		intents = append(intents, l)
	}
	if err := c.intend(intents...); err != nil {
		return nil, err
	}
	c.rec.Installed = appendKeys(c.rec.Installed, key)
	var out []Placed
	for _, t := range plan {
		if err := t.p.place(t.f, t.tmp); err != nil {
			return out, err
		}
		c.rec.setPlaced(t.p)
		out = append(out, t.p)
		c.step("placed")
	}
	return out, nil
}

// inTheWay handles a file already at a path to place: ours already, or
// another target's (then shared), or left alone and recorded as kept.
func (c *Change) inTheWay(path string) error {
	if c.rec.owns(path) {
		return nil
	}
	others, err := c.p.others(c.rec.Target)
	if err != nil {
		return err
	}
	for _, o := range others {
		if pl, ok := o.placed(path); ok && pl.unchanged() {
			c.shareFrom(o, pl)
			return nil
		}
	}
	c.rec.Kept = uniq.Append(c.rec.Kept, path)
	return nil
}

// plan fills in how p will be placed from f, for the system under root
// ("" for this host), and returns the journal line that announces it.
func (p *Placed) plan(f File, copy bool, root string) (journalLine, error) {
	l := journalLine{Path: f.Path, Soname: f.Soname, Component: f.Component, Dist: f.Dist}
	switch {
	case f.From == "":
		p.Kind = PlacedFile
		sum := sha256.Sum256(f.Data)
		p.SHA256, p.Size = hex.EncodeToString(sum[:]), int64(len(f.Data))
		l.Op, l.Data, l.Mode, l.Temp = opWrite, f.Data, f.Mode, tempName(f.Path)
	case copy:
		p.Kind = PlacedCopy
		st, err := os.Stat(f.From)
		if err != nil {
			return l, fmt.Errorf("copy %s: %w", f.From, err)
		}
		sum, err := filehash.SHA256(f.From)
		if err != nil {
			return l, fmt.Errorf("copy %s: %w", f.From, err)
		}
		p.SHA256, p.Size = sum, st.Size()
		l.Op, l.Src, l.Temp = opCopy, f.From, tempName(f.Path)
	default:
		p.Kind = PlacedLink
		p.Link = linkText(f.Path, f.From, root)
		l.Op, l.Link = opLink, p.Link
	}
	l.SHA256, l.Size = p.SHA256, p.Size
	return l, nil
}

// linkText is what a link at path to from says: relative, so that the
// prefix and the tree can move together (an image prepared under --root);
// when that climbs too far, absolute, as the system under root sees from
// when both lie in it.
func linkText(path, from, root string) string {
	link, err := filepath.Rel(filepath.Dir(physical(path)), physical(from))
	if err == nil && strings.Count(link, "..") <= 12 {
		return link
	}
	if _, in := guestPath(root, path); in {
		if g, ok := guestPath(root, from); ok {
			return g
		}
	}
	return from
}

// place makes the file p was planned as.
func (p *Placed) place(f File, tmp string) error {
	switch p.Kind {
	case PlacedLink:
		if err := os.Symlink(p.Link, p.Path); err != nil {
			return fmt.Errorf("link %s: %w", p.Path, err)
		}
		return nil
	case PlacedCopy:
		sum, err := copyFile(f.From, p.Path, tmp)
		if err != nil {
			return err
		}
		if sum != p.SHA256 {
			os.Remove(p.Path)
			return fmt.Errorf("copy %s to %s: the source changed while it was copied", f.From, p.Path)
		}
	default:
		if err := writeFile(p.Path, f.Data, f.Mode, tmp); err != nil {
			return err
		}
	}
	return p.identify()
}

// mkdir creates dir and records every directory it had to create, each
// announced in the journal first, and makes the target a co-owner of the
// directories other targets created for it.
func (c *Change) mkdir(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	var intents []journalLine
	for i := len(missing) - 1; i >= 0; i-- {
		intents = append(intents, journalLine{Op: opMkdir, Path: missing[i]})
	}
	if err := c.intend(intents...); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s: %w", missing[i], err)
		}
		c.rec.Created = uniq.Append(c.rec.Created, missing[i])
		c.step("mkdir")
	}
	return c.shareDir(dir)
}

// shareDir makes the record a co-owner of dir, and of its parents, where
// another target's record created them: placing files in a directory
// another target created keeps it until both are undone, and the last
// undo removes it.
func (c *Change) shareDir(dir string) error {
	others, err := c.p.others(c.rec.Target)
	if err != nil {
		return err
	}
	for _, o := range others {
		for _, d := range o.Created {
			if inside(dir, d) && !slices.Contains(c.rec.Created, d) {
				c.rec.Created = append(c.rec.Created, d)
			}
		}
	}
	return nil
}

// Supply records that a declared distribution's files were placed from an
// archive (files placed by Place), replacing an earlier supply of the same
// distribution.
func (c *Change) Supply(sup declared.Supply) {
	c.rec.Supplied = slices.DeleteFunc(c.rec.Supplied, func(x declared.Supply) bool { return x.Name == sup.Name })
	c.rec.Supplied = append(c.rec.Supplied, sup)
}

// AddScriptDir makes the loader search a library directory of the store
// entry key (a directory of this machine) for the target, and returns how,
// in words ("LD_LIBRARY_PATH (PREFIX/env.sh)"): for a target under a
// root whose own ldconfig runs here, through the root's /etc/ld.so.conf.d
// and ld.so.cache; otherwise through the activation script. Both are
// written at Commit.
func (c *Change) AddScriptDir(key fetch.Key, dir string) string {
	c.rec.Installed = appendKeys(c.rec.Installed, key)
	return c.addDir(dir)
}

// AddSystemScriptDir makes the loader search a library directory the
// system itself provides (JetPack's CUDA on a Jetson), named as that
// system sees it, for the target, as AddScriptDir does: no store entry is
// used, and undo leaves the directory.
func (c *Change) AddSystemScriptDir(dir string) string {
	if c.rec.Root != "" && path.IsAbs(dir) {
		dir = filepath.Join(c.rec.Root, filepath.FromSlash(dir))
	}
	return c.addDir(dir)
}

func (c *Change) addDir(dir string) string {
	if c.rec.Root != "" {
		_, in := guestPath(c.rec.Root, dir)
		if !in && c.conf == nil {
			c.conf = &confProbe{refused: cmp.Or(c.p.Unseen(), dir+" lies outside the root "+c.rec.Root)}
		}
		if in && c.confUsable() == "" {
			c.rec.ConfDirs = uniq.Append(c.rec.ConfDirs, dir)
			return confFile(c.rec.Root) + " (the root's ld.so.cache)"
		}
	}
	c.rec.ScriptDirs = uniq.Append(c.rec.ScriptDirs, dir)
	return "LD_LIBRARY_PATH (" + c.p.EnvScript() + ")"
}

// ConfRefused says why directories of a target under a root went to the
// activation script rather than the root's /etc/ld.so.conf.d (its
// ldconfig cannot run here, say); "" when they did not, or there is no
// root.
func (c *Change) ConfRefused() string {
	if c.rec.Root == "" || c.conf == nil || len(c.rec.ScriptDirs) == 0 {
		return ""
	}
	return c.conf.refused
}

// confUsable says why the root's ld.so.conf.d cannot serve; "" when it
// can.
func (c *Change) confUsable() string {
	if c.conf == nil {
		c.conf = probeConf(c.ctx, c.p, c.rec.Root)
	}
	return c.conf.refused
}

// Share makes the target a co-owner of what other targets' records placed
// at paths (the files the target's objects load, as the loader finds
// them), or put on the activation script's LD_LIBRARY_PATH (their
// directories): the files with their siblings, the directories created for
// them, the store entries they point into, the script's directories. Undo
// of one target then leaves what another still uses. The record is saved
// when it changed.
func (c *Change) Share(paths []string) error {
	others, err := c.p.others(c.rec.Target)
	if err != nil || len(others) == 0 {
		return err
	}
	changed := false
	for _, path := range paths {
		d := filepath.Dir(path)
		for _, o := range others {
			if pl, ok := o.placed(path); ok && !c.rec.owns(path) {
				c.shareFrom(o, pl)
				changed = true
			}
			if slices.Contains(o.ScriptDirs, d) && !slices.Contains(c.rec.ScriptDirs, d) {
				c.rec.ScriptDirs = append(c.rec.ScriptDirs, d)
				c.rec.Installed = appendKeys(c.rec.Installed, c.p.keysFor(o, d)...)
				changed = true
			}
			if slices.Contains(o.ConfDirs, d) && !slices.Contains(c.rec.ConfDirs, d) {
				c.rec.ConfDirs = append(c.rec.ConfDirs, d)
				c.rec.Installed = appendKeys(c.rec.Installed, c.p.keysFor(o, d)...)
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	return c.p.save(c.rec)
}

// shareFrom makes the target a co-owner of a file o placed, with its
// siblings (the files o placed from the same component into the same
// directory, which the library may open at run time; every file of the
// distribution it restored, .dist-info included), the directories o
// created for them and the store entries they point into.
func (c *Change) shareFrom(o *Record, pl Placed) {
	var shared []string
	for _, x := range o.Placed {
		sameDist := pl.Dist != "" && x.Dist == pl.Dist
		if x.Path != pl.Path && !sameDist && (x.Component != pl.Component || filepath.Dir(x.Path) != filepath.Dir(pl.Path)) {
			continue
		}
		if !c.rec.owns(x.Path) {
			c.rec.Placed = append(c.rec.Placed, x)
		}
		shared = append(shared, x.Path)
		c.rec.Installed = appendKeys(c.rec.Installed, c.p.keysFor(o, x.linkTarget(o.Root))...)
	}
	for _, d := range o.Created {
		if slices.ContainsFunc(shared, func(p string) bool { return inside(p, d) }) {
			c.rec.Created = uniq.Append(c.rec.Created, d)
		}
	}
}

// keysFor returns the keys of r's store entries that hold path.
func (p *Prefix) keysFor(r *Record, path string) []fetch.Key {
	if path == "" {
		return nil
	}
	var out []fetch.Key
	for _, k := range r.Installed {
		if d, err := p.store.EntryDir(k); err == nil && inside(path, d) {
			out = append(out, k)
		}
	}
	return out
}

// Commit saves the record, the activation script and the root's
// ld.so.conf.d entry (its ld.so.cache rebuilt when the entry changed),
// then removes the round's journal: everything the round did is now
// recorded.
func (c *Change) Commit() error {
	if c.j != nil {
		if err := c.j.write(journalLine{Op: opSave}); err != nil {
			return err
		}
	}
	c.step("record")
	if err := c.p.save(c.rec); err != nil {
		return err
	}
	if err := c.p.writeEnvScript(); err != nil {
		return err
	}
	if err := c.p.writeLdConfs(c.ctx, c.rec.Root); err != nil {
		return err
	}
	if c.j != nil {
		j := c.j
		c.j = nil
		return j.finish()
	}
	return nil
}

// Close commits a round that an error cut short: the record then names
// what it did, for undo.
func (c *Change) Close() error {
	if c == nil || c.j == nil {
		return nil
	}
	return c.Commit()
}

// tempName is the name a copy or a written file is written under before it
// is renamed to dst: fixed, so that a journal can name it.
func tempName(dst string) string {
	return filepath.Join(filepath.Dir(dst), ".cudadeps-"+filepath.Base(dst)+".part")
}

// copyFile copies src (following symlinks) to dst through the temporary
// file tmp, so dst appears whole, and returns its sha256.
func copyFile(src, dst, tmp string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if err := writeThrough(tmp, dst, io.TeeReader(in, h), st.Mode().Perm()); err != nil {
		return "", fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeFile writes data to dst through the temporary file tmp.
func writeFile(dst string, data []byte, mode fs.FileMode, tmp string) error {
	if mode == 0 {
		mode = 0o644
	}
	if err := writeThrough(tmp, dst, bytes.NewReader(data), mode.Perm()); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}

// writeThrough writes r to tmp, which must not exist, gives it perm and
// renames it to dst.
func writeThrough(tmp, dst string, r io.Reader, perm fs.FileMode) error {
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
