package activation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
	"github.com/cudadeps/cudadeps/internal/filehash"
	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/python/declared"
)

// recordSchema versions the record's format. Schema 1 (records without a
// schema field) had no Placed.Kind, Size or inode: a placed entry with a
// Link was a link, any other a copy. It is still read.
const recordSchema = 2

// maxRecord bounds a record read: a target with tens of thousands of
// placed files stays well below.
const maxRecord = 256 << 20

// Record is everything cudadeps did for one target, so that undo can remove
// exactly that. It lives in PREFIX/activations/.
type Record struct {
	Schema  int       `json:"schema"`
	Target  string    `json:"target"` // the target's key
	Name    string    `json:"name"`   // as the user named it
	Updated time.Time `json:"updated"`
	// Placed are the files put in place: links into the store, copies,
	// files cudadeps wrote.
	Placed []Placed `json:"placed"`
	// Created are the directories created for them, parents first.
	Created []string `json:"created_dirs"`
	// Root is the system the target belongs to (--root), as a directory of
	// this machine; "" for this host. What is written for the target names
	// paths as that system sees them.
	Root string `json:"root,omitempty"`
	// ScriptDirs are store library directories the activation script adds to
	// LD_LIBRARY_PATH for this target.
	ScriptDirs []string `json:"env"`
	// ConfDirs are library directories listed, for a target under a root,
	// in the root's /etc/ld.so.conf.d entry, which its own ldconfig writes
	// into its ld.so.cache (see ldconf.go): every program of that system
	// finds them without LD_LIBRARY_PATH.
	ConfDirs []string `json:"ld_so_conf,omitempty"`
	// Installed are the store entries this target's links, copies and
	// activation script lines come from: installed for it or shared with
	// other targets (an entry is removed once no record names it).
	Installed []fetch.Key `json:"installed"`
	// Kept are files that were in the way and left alone.
	Kept []string `json:"kept,omitempty"`
	// Supplied are the declared distributions whose files were placed from
	// NVIDIA archives at their wheels' RECORD paths (no .dist-info).
	Supplied []declared.Supply `json:"supplied,omitempty"`
}

// PlacedKind says what a placed file is.
type PlacedKind string

// The kinds of placed files.
const (
	// PlacedLink is a symbolic link into the store.
	PlacedLink PlacedKind = "link"
	// PlacedCopy is a copy of a store file.
	PlacedCopy PlacedKind = "copy"
	// PlacedFile is a file cudadeps wrote (metadata it generates).
	PlacedFile PlacedKind = "file"
)

// Placed is one file cudadeps put in place, with what recognises it as
// still its own: a link's target as written, or a file's size, sha256 and
// inode (a file another installer wrote over it, even with the same bytes,
// has another inode).
type Placed struct {
	Path string     `json:"path"` // on this machine
	Kind PlacedKind `json:"kind"`
	Link string     `json:"link,omitempty"` // a link's target, as written
	// Size, SHA256, Dev and Inode are a copy's or a written file's; Dev
	// and Inode are 0 in schema 1 records.
	Size      int64  `json:"size,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	Dev       uint64 `json:"dev,omitempty"`
	Inode     uint64 `json:"inode,omitempty"`
	Soname    string `json:"soname,omitempty"`
	Component string `json:"component,omitempty"`
	// Dist is the declared distribution the file restores, when it does:
	// another target that uses one of its files shares all of them.
	Dist string `json:"distribution,omitempty"`
}

// linkTarget is where a placed link points, as an absolute path of this
// machine; "" for any other kind. An absolute link placed under a root
// names a path of that system: it lies under root here.
func (p Placed) linkTarget(root string) string {
	if p.Kind != PlacedLink || p.Link == "" {
		return ""
	}
	if filepath.IsAbs(p.Link) {
		if _, in := guestPath(root, p.Path); root != "" && in {
			return filepath.Join(root, p.Link)
		}
		return filepath.Clean(p.Link)
	}
	return filepath.Join(filepath.Dir(p.Path), p.Link)
}

// unchanged reports whether a placed file is still what cudadeps put there.
func (p Placed) unchanged() bool {
	st, err := os.Lstat(p.Path)
	if err != nil {
		return false
	}
	if p.Kind == PlacedLink {
		if st.Mode()&fs.ModeSymlink == 0 {
			return false
		}
		target, err := os.Readlink(p.Path)
		return err == nil && target == p.Link
	}
	if !st.Mode().IsRegular() || p.Size > 0 && st.Size() != p.Size {
		return false
	}
	if p.Inode != 0 {
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Ino != p.Inode || uint64(sys.Dev) != p.Dev {
			return false
		}
	}
	sum, err := filehash.SHA256(p.Path)
	return err == nil && sum == p.SHA256
}

// identify fills in a file's size and inode as they are on disk now.
func (p *Placed) identify() error {
	st, err := os.Lstat(p.Path)
	if err != nil {
		return err
	}
	p.Size = st.Size()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		p.Dev, p.Inode = uint64(sys.Dev), sys.Ino
	}
	return nil
}

// EnvDirs are the record's activation script directories as its system
// names them (the root's paths under --root).
func (r *Record) EnvDirs() []string {
	out := make([]string, 0, len(r.ScriptDirs))
	for _, d := range r.ScriptDirs {
		out = append(out, seenAs(r.Root, d))
	}
	return out
}

// LdConfDirs are the record's ld.so.conf.d directories as the root sees
// them.
func (r *Record) LdConfDirs() []string {
	out := make([]string, 0, len(r.ConfDirs))
	for _, d := range r.ConfDirs {
		out = append(out, seenAs(r.Root, d))
	}
	return out
}

func (r *Record) empty() bool {
	return len(r.Placed) == 0 && len(r.Created) == 0 && len(r.ScriptDirs) == 0 && len(r.ConfDirs) == 0 && len(r.Installed) == 0
}

func (r *Record) owns(p string) bool {
	_, ok := r.placed(p)
	return ok
}

// placed returns the record's entry for a placed path.
func (r *Record) placed(p string) (Placed, bool) {
	for _, x := range r.Placed {
		if x.Path == p {
			return x, true
		}
	}
	return Placed{}, false
}

// setPlaced records a placed file, replacing an earlier entry for the same
// path (placed again after an interrupted undo removed it).
func (r *Record) setPlaced(p Placed) {
	for i := range r.Placed {
		if r.Placed[i].Path == p.Path {
			r.Placed[i] = p
			return
		}
	}
	r.Placed = append(r.Placed, p)
}

// uses reports whether the record names the store entry k (in dir): as
// installed for or shared with its target, or by a placed link, an
// activation script directory or an ld.so.conf.d directory pointing into
// it. This is the one rule of
// an entry in use: store remove refuses such an entry and undo keeps it.
func (r *Record) uses(k fetch.Key, dir string) bool {
	if slices.Contains(r.Installed, k) {
		return true
	}
	if dir == "" {
		return false
	}
	for _, d := range append(slices.Clone(r.ScriptDirs), r.ConfDirs...) {
		if inside(d, dir) {
			return true
		}
	}
	for _, p := range r.Placed {
		if t := p.linkTarget(r.Root); t != "" && inside(t, dir) {
			return true
		}
	}
	return false
}

// decode reads a record, of this schema or schema 1.
func decode(data []byte, name string) (*Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	switch r.Schema {
	case 0, 1:
		for i := range r.Placed {
			if r.Placed[i].Link != "" {
				r.Placed[i].Kind = PlacedLink
			} else {
				r.Placed[i].Kind = PlacedCopy
			}
		}
	case recordSchema:
	default:
		return nil, fmt.Errorf("%s: record schema %d, this cudadeps reads %d", name, r.Schema, recordSchema)
	}
	r.Schema = recordSchema
	return &r, nil
}

// record reads the record of a target, or starts one.
func (p *Prefix) record(target, name string) (*Record, error) {
	f := p.RecordFile(target)
	data, err := regfile.Read(f, maxRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return &Record{Schema: recordSchema, Target: target, Name: name}, nil
	}
	if err != nil {
		return nil, err
	}
	return decode(data, f)
}

// Records lists every target's record, sorted by target.
func (p *Prefix) Records() ([]*Record, error) {
	entries, err := os.ReadDir(p.recordsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Record
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		f := filepath.Join(p.recordsDir(), e.Name())
		data, err := regfile.Read(f, maxRecord)
		if err != nil {
			return nil, err
		}
		r, err := decode(data, f)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out, nil
}

// others are the records of every target but this one.
func (p *Prefix) others(target string) ([]*Record, error) {
	recs, err := p.Records()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(recs, func(r *Record) bool { return r.Target == target }), nil
}

// save writes the record atomically; an empty record is removed.
func (p *Prefix) save(r *Record) error {
	f := p.RecordFile(r.Target)
	if r.empty() {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	r.Schema = recordSchema
	r.Updated = time.Now().UTC()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(f, append(data, '\n'), 0o644)
}

// inside reports whether p is dir or lies under it.
func inside(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

func appendKeys(list []fetch.Key, more ...fetch.Key) []fetch.Key {
	for _, k := range more {
		if !slices.Contains(list, k) {
			list = append(list, k)
		}
	}
	return list
}
