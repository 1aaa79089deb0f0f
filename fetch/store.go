package fetch

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/internal/testhook"
	"github.com/cudadeps/cudadeps/internal/workers"
)

// Key names one installed component: the same component, version, platform
// and CUDA variant is installed at most once per store.
type Key struct {
	Component string `json:"component"`         // e.g. "libcudss"
	Version   string `json:"version"`           // e.g. "0.8.0.10"
	Platform  string `json:"platform"`          // e.g. "linux-sbsa"
	Variant   string `json:"variant,omitempty"` // "" or a CUDA variant such as "cuda13"
}

func (k Key) String() string {
	s := k.Component + " " + k.Version + " (" + k.Platform
	if k.Variant != "" {
		s += ", " + k.Variant
	}
	return s + ")"
}

// noVariant is the directory name of an entry without a CUDA variant.
const noVariant = "any"

// keyField reports whether v can be a key field: it becomes a directory
// name, so letters, digits and . _ + - only, not first, at most 128 bytes.
func keyField(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for i, r := range v {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._+-", r)) {
			return false
		}
	}
	return true
}

func (k Key) validate() error {
	for _, f := range []struct{ name, v string }{
		{"component", k.Component}, {"version", k.Version}, {"platform", k.Platform},
	} {
		if !keyField(f.v) {
			return fmt.Errorf("store key %s: %s %q: want letters, digits and . _ + - (not first)", k, f.name, f.v)
		}
	}
	if k.Variant != "" && (!keyField(k.Variant) || k.Variant == noVariant) {
		return fmt.Errorf("store key %s: variant %q: want letters, digits and . _ + - (not first), and not %q", k, k.Variant, noVariant)
	}
	return nil
}

// id is a file name unique to the key ("@" cannot occur in a field).
func (k Key) id() string {
	return strings.Join([]string{k.Component, k.Version, k.Platform, cmp.Or(k.Variant, noVariant)}, "@")
}

// Item is one component to install from one archive.
type Item struct {
	Key     Key
	Request Request
}

// Entry is an installed component, as its record in the store describes it.
type Entry struct {
	Key
	// Dir is the component's directory (absolute): Dir/lib/libcudss.so.0
	// for an NVIDIA redist archive, Dir/nvidia/cu13/lib/... for a wheel.
	Dir string `json:"dir"`
	// Name, URL, SHA256 and Size are those of the archive it came from.
	Name        string    `json:"name,omitempty"`
	URL         string    `json:"url"`
	SHA256      string    `json:"sha256"`
	Size        int64     `json:"size"`
	InstalledAt time.Time `json:"installed_at"`
	// Layout tells how the archive was laid out: LayoutRedist, LayoutTree
	// or LayoutWheel.
	Layout string `json:"layout"`
	// FileCount is how many files the entry owns, and FilesSHA256 the
	// sha256 of their list as stored (one path and a newline each).
	FileCount   int    `json:"file_count"`
	FilesSHA256 string `json:"files_sha256,omitempty"`
	// Files lists what the entry owns, relative to Dir, slash-separated,
	// sorted: regular files, hard links and symbolic links (directories are
	// not listed). The record and the list are not among them. Lookup
	// fills it in, List does not: see ReadFiles.
	Files []string `json:"files"`
}

// recordName is the entry's record, inside its directory, so that the
// record appears and disappears with the files by the same rename. It is
// small whatever the archive: the file list lives beside it, in
// filesName, which only the commands that need it read.
const (
	recordName = ".cudadeps-entry.json"
	filesName  = ".cudadeps-files"
)

// recordSchema versions the record's format. Schema 1 held the file list
// inside the record; it is still read.
const recordSchema = 2

// maxRecord bounds a record read: it holds a few short fields.
const maxRecord = 64 << 10

type record struct {
	Schema int `json:"schema"`
	Entry
	// Files shadows Entry.Files: only schema 1 records have it.
	Files []string `json:"files,omitempty"`
}

// Store is a directory of installed components:
//
//	DIR/pkgs/COMPONENT/VERSION/PLATFORM/VARIANT/   one entry (VARIANT "any" when none)
//	DIR/pkgs/.../VARIANT/.cudadeps-entry.json      its record
//	DIR/.staging/                                  extractions in progress (same file system)
//	DIR/.locks/                                    one lock file per key while it is installed or removed
//
// Entries appear and disappear by rename, whole. A Store is safe for
// concurrent use, also by several processes.
type Store struct {
	dir string
}

// OpenStore opens the store in dir (the caller decides where stores
// live). Nothing is created until something is installed: reading a store
// that does not exist yet finds it empty.
func OpenStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("store: no directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("store %s: not a directory", abs)
	}
	return &Store{dir: abs}, nil
}

// prepare creates the store's directories, before the first write.
func (s *Store) prepare() error {
	for _, d := range []string{"pkgs", ".staging", ".locks"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return fmt.Errorf("store %s: %w", s.dir, err)
		}
	}
	return nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// EntryDir is where the entry for k lives once installed.
func (s *Store) EntryDir(k Key) (string, error) {
	if err := k.validate(); err != nil {
		return "", err
	}
	return s.entryDir(k), nil
}

func (s *Store) entryDir(k Key) string {
	return filepath.Join(s.dir, "pkgs", k.Component, k.Version, k.Platform, cmp.Or(k.Variant, noVariant))
}

// Lookup returns the installed entry for k, if any.
func (s *Store) Lookup(k Key) (Entry, bool, error) {
	if err := k.validate(); err != nil {
		return Entry{}, false, err
	}
	e, err := readRecord(s.entryDir(k))
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	if e.Key != k {
		return Entry{}, false, fmt.Errorf("store record %s: records %s, expected %s", filepath.Join(e.Dir, recordName), e.Key, k)
	}
	if e.Files, err = e.ReadFiles(); err != nil {
		return Entry{}, false, err
	}
	return e, true, nil
}

// readRecord reads an entry's record, without its file list.
func readRecord(dir string) (Entry, error) {
	p := filepath.Join(dir, recordName)
	b, err := regfile.Read(p, maxRecord)
	if err != nil {
		return Entry{}, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return Entry{}, fmt.Errorf("store record %s: %w", p, err)
	}
	switch r.Schema {
	case 1:
		r.Entry.Files = r.Files
		r.Entry.FileCount = len(r.Files)
	case recordSchema:
		r.Entry.Files = nil
		if r.FileCount < 0 || len(r.FilesSHA256) != 64 {
			return Entry{}, fmt.Errorf("store record %s: no valid file count and list digest", p)
		}
	default:
		return Entry{}, fmt.Errorf("store record %s: schema %d, this cudadeps reads %d", p, r.Schema, recordSchema)
	}
	r.Entry.Dir = dir
	return r.Entry, nil
}

// ReadFiles returns the files the entry owns (Entry.Files), reading its
// list from the store when the entry came from List. The list must match
// the record's count and digest.
func (e Entry) ReadFiles() ([]string, error) {
	if e.Files != nil || e.FilesSHA256 == "" {
		return e.Files, nil
	}
	p := filepath.Join(e.Dir, filesName)
	// Each file costs its name and a newline, and the names are bounded
	// when the archive is extracted; this bounds a damaged list too.
	b, err := regfile.Read(p, 2*DefaultMaxNameBytes+int64(e.FileCount))
	if err != nil {
		return nil, fmt.Errorf("store file list: %w", err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != e.FilesSHA256 {
		return nil, fmt.Errorf("store file list %s: its sha256 is not the one the record names", p)
	}
	files := []string{}
	for len(b) > 0 {
		line, rest, ok := bytes.Cut(b, []byte{'\n'})
		if !ok {
			return nil, fmt.Errorf("store file list %s: the last line has no newline", p)
		}
		files = append(files, string(line))
		b = rest
	}
	if len(files) != e.FileCount {
		return nil, fmt.Errorf("store file list %s: %d files, the record says %d", p, len(files), e.FileCount)
	}
	return files, nil
}

// List returns every installed entry, sorted by key, without their file
// lists (Entry.Files is nil): listing costs a small record per entry
// whatever the entries hold. Entry.ReadFiles reads a list.
func (s *Store) List() ([]Entry, error) {
	dirs, err := filepath.Glob(filepath.Join(s.dir, "pkgs", "*", "*", "*", "*"))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, d := range dirs {
		e, err := readRecord(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not an entry: nothing cudadeps placed
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key.id(), b.Key.id()) })
	return out, nil
}

// ErrNotInstalled is returned (wrapped) by Remove for a key with no entry.
var ErrNotInstalled = errors.New("not installed")

// Remove deletes the entries of keys. Each disappears whole (renamed out of
// the way, then deleted). A key that is not installed is an error wrapping
// ErrNotInstalled; the others are still removed.
func (s *Store) Remove(ctx context.Context, keys ...Key) error {
	var errs []error
	for _, k := range keys {
		if err := s.removeOne(ctx, k); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Store) removeOne(ctx context.Context, k Key) error {
	if err := k.validate(); err != nil {
		return err
	}
	dir := s.entryDir(k)
	installed := func() bool {
		_, err := os.Lstat(filepath.Join(dir, recordName))
		return err == nil
	}
	if !installed() {
		return fmt.Errorf("remove %s: %w", k, ErrNotInstalled)
	}
	if err := s.prepare(); err != nil {
		return err
	}
	unlock, err := lockFile(ctx, s.lockPath(k), nil, "removal of "+k.String())
	if err != nil {
		return err
	}
	defer unlock()
	if !installed() {
		return fmt.Errorf("remove %s: %w", k, ErrNotInstalled)
	}
	// Holding the key's lock, any staging directory of this key belongs to
	// a run that died: clear it.
	s.clearStaging(k.id())
	trash, err := os.MkdirTemp(filepath.Join(s.dir, ".staging"), k.id()+".")
	if err != nil {
		return fmt.Errorf("remove %s: %w", k, err)
	}
	defer os.RemoveAll(trash)
	if err := os.Rename(dir, filepath.Join(trash, "old")); err != nil {
		return fmt.Errorf("remove %s: %w", k, err)
	}
	s.pruneParents(dir)
	return nil
}

// pruneParents removes the empty directories above an entry, up to pkgs/.
func (s *Store) pruneParents(dir string) {
	top := filepath.Join(s.dir, "pkgs")
	for d := filepath.Dir(dir); d != top && strings.HasPrefix(d, top); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			return // not empty, or another process is using it
		}
	}
}

func (s *Store) lockPath(k Key) string { return s.lockPathID(k.id()) }

func (s *Store) lockPathID(id string) string {
	return filepath.Join(s.dir, ".locks", id+".lock")
}

// Install makes each item present in the store and returns their entries,
// in the order of items. Items already installed from the same sha256 cost
// nothing (no lock, no network). The others are downloaded through c (at
// most c's Parallel at once), extracted as they arrive into a staging
// directory on the store's file system, verified, and renamed into place, so
// an entry appears whole or not at all; an entry installed from another
// sha256 is replaced. Each key is locked while it is installed: a
// concurrent run waits, then finds the entry present. If some items fail,
// the others are still installed; the error joins the failures and their
// entries are zero.
func (s *Store) Install(ctx context.Context, c *Client, items []Item) ([]Entry, error) {
	seen := map[string]int{}
	for i, it := range items {
		if err := it.Key.validate(); err != nil {
			return nil, err
		}
		if err := it.Request.validate(); err != nil {
			return nil, fmt.Errorf("install %s: %w", it.Key, err)
		}
		if j, dup := seen[it.Key.id()]; dup && items[j].Request.SHA256 != it.Request.SHA256 {
			return nil, fmt.Errorf("install %s: asked twice, from two different archives", it.Key)
		}
		seen[it.Key.id()] = i
	}
	entries := make([]Entry, len(items))
	errs := make([]error, len(items))
	var todo []int
	var reqs []Request
	for i, it := range items {
		if seen[it.Key.id()] != i {
			continue // a duplicate: filled in below
		}
		e, ok, err := s.Lookup(it.Key)
		if err != nil {
			c.log.Warn("unreadable store record; installing again", "key", it.Key.String(), "error", err)
		}
		if ok && e.SHA256 == it.Request.SHA256 {
			entries[i] = e
			continue
		}
		todo = append(todo, i)
		reqs = append(reqs, it.Request)
	}
	if len(todo) > 0 {
		if err := s.prepare(); err != nil {
			return nil, err
		}
	}
	prog := c.newProgress(reqs)
	workers.Each(len(todo), c.parallel, func(j int) {
		i := todo[j]
		if err := ctx.Err(); err != nil {
			errs[i] = fmt.Errorf("install %s: %w", items[i].Key, err)
			return
		}
		entries[i], errs[i] = s.installOne(ctx, c, items[i], prog.track(items[i].Request))
	})
	err := errors.Join(errs...)
	if len(todo) > 0 {
		// The download cache's locks that killed processes left.
		if serr := sweepLocks(filepath.Join(c.cacheDir, "archives")); serr != nil {
			c.log.Warn("could not sweep the download cache's lock files", "error", serr)
		}
	}
	prog.finish(err)
	for i, it := range items {
		if j := seen[it.Key.id()]; j != i {
			entries[i] = entries[j]
		}
	}
	return entries, err
}

func (s *Store) installOne(ctx context.Context, c *Client, it Item, tr *tracker) (entry Entry, err error) {
	defer func() { tr.done(err) }()
	k := it.Key
	unlock, err := lockFile(ctx, s.lockPath(k), c.log, "install of "+k.String())
	if err != nil {
		return Entry{}, err
	}
	defer unlock()
	// Holding the key's lock, any staging directory of this key belongs to
	// a run that died: clear it.
	s.clearStaging(k.id())
	if e, ok, _ := s.Lookup(k); ok && e.SHA256 == it.Request.SHA256 {
		return e, nil // installed by another process while we waited
	}
	stage, err := os.MkdirTemp(filepath.Join(s.dir, ".staging"), k.id()+".")
	if err != nil {
		return Entry{}, fmt.Errorf("install %s: %w", k, err)
	}
	defer func() {
		// An interrupted run leaves its staging directory (tens of
		// thousands of files, maybe) to the next run's clearStaging or
		// Tidy: Ctrl-C and SIGTERM must end the process promptly.
		if ctx.Err() == nil {
			os.RemoveAll(stage)
		}
	}()
	tree := filepath.Join(stage, "t")
	res, err := c.fetchInto(ctx, it.Request, tree, tr)
	if err != nil {
		return Entry{}, fmt.Errorf("install %s: %w", k, s.spaceError(err))
	}
	root := filepath.Join(tree, filepath.FromSlash(res.root))
	e := Entry{
		Key:         k,
		Dir:         s.entryDir(k),
		Name:        it.Request.Name,
		URL:         it.Request.URL,
		SHA256:      it.Request.SHA256,
		Size:        it.Request.Size,
		InstalledAt: time.Now().UTC().Truncate(time.Second),
		Layout:      res.layout,
		Files:       res.files,
		FileCount:   len(res.files),
	}
	if e.Files == nil {
		e.Files = []string{}
	}
	if e.FilesSHA256, err = writeRecord(root, e); err != nil {
		return Entry{}, fmt.Errorf("install %s: %w", k, s.spaceError(err))
	}
	testhook.Step(ctx, "staged")
	if err := s.place(root, e.Dir, stage); err != nil {
		return Entry{}, fmt.Errorf("install %s: %w", k, err)
	}
	testhook.Step(ctx, "stored")
	return e, nil
}

// clearStaging deletes the staging directories of the key with id; the
// caller holds its lock.
func (s *Store) clearStaging(id string) {
	entries, _ := os.ReadDir(filepath.Join(s.dir, ".staging"))
	for _, d := range entries {
		if stagingID(d.Name()) == id {
			os.RemoveAll(filepath.Join(s.dir, ".staging", d.Name()))
		}
	}
}

// stagingID is the key id of a staging directory's name (ID.DIGITS, as
// os.MkdirTemp names it), or "".
func stagingID(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || i == len(name)-1 || strings.Trim(name[i+1:], "0123456789") != "" {
		return ""
	}
	return name[:i]
}

// Tidy deletes what killed processes left in the store: the staging
// directories of keys no process is installing or removing (an extraction,
// or an entry renamed out of the way), and the lock files no process
// holds. What a running process uses is left alone.
func (s *Store) Tidy() error {
	entries, err := os.ReadDir(filepath.Join(s.dir, ".staging"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store %s: %w", s.dir, err)
	}
	done := map[string]bool{}
	for _, d := range entries {
		id := stagingID(d.Name())
		if id == "" || done[id] {
			continue
		}
		done[id] = true
		release, ok, err := tryLockFile(s.lockPathID(id), true)
		if err != nil {
			return err
		}
		if ok {
			s.clearStaging(id)
			release()
		}
	}
	return sweepLocks(filepath.Join(s.dir, ".locks"))
}

// spaceError makes a full file system's error name the store: the
// extraction's own directory is gone once the install fails.
func (s *Store) spaceError(err error) error { return spaceIn(err, s.dir) }

// spaceIn makes a SpaceError about a directory inside dir name dir.
func spaceIn(err error, dir string) error {
	var se *SpaceError
	if errors.As(err, &se) && strings.HasPrefix(se.Dir, dir+string(filepath.Separator)) {
		cp := *se
		cp.Dir = dir
		return &cp
	}
	return err
}

// writeRecord writes the entry's file list and its record into dir and
// returns the list's sha256.
func writeRecord(dir string, e Entry) (string, error) {
	h := sha256.New()
	err := writeNew(dir, filesName, func(w io.Writer) error {
		bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
		for _, f := range e.Files {
			bw.WriteString(f)
			bw.WriteByte('\n')
		}
		return bw.Flush()
	})
	if err != nil {
		return "", err
	}
	e.FilesSHA256 = hex.EncodeToString(h.Sum(nil))
	e.Files = nil
	b, err := json.MarshalIndent(record{Schema: recordSchema, Entry: e}, "", "  ")
	if err != nil {
		return "", err
	}
	err = writeNew(dir, recordName, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
	return e.FilesSHA256, err
}

// writeNew creates dir/name, which the archive must not have brought.
func writeNew(dir, name string, fill func(io.Writer) error) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("the archive contains %s, a name cudadeps reserves for its record", name)
	}
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// place renames the staged root to dir. An older entry there (from another
// archive) is first moved into stage, which the caller deletes, and put back
// if the new one cannot take its place.
func (s *Store) place(root, dir, stage string) error {
	old := ""
	if _, err := os.Lstat(dir); err == nil {
		old = filepath.Join(stage, "old")
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	}
	var err error
	// A concurrent Remove of a sibling may prune the parent between the
	// two calls; try again then.
	for range 3 {
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			break
		}
		if err = os.Rename(root, dir); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil && old != "" {
		_ = os.Rename(old, dir)
	}
	return err
}
