package resolver

import (
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
	"sort"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/declared"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/scan"
)

// Record is everything cudadeps did for one target, so that undo can remove
// exactly that. It lives in PREFIX/activations/.
type Record struct {
	Target  string    `json:"target"` // Target.Key()
	Name    string    `json:"name"`   // as the user named it
	Updated time.Time `json:"updated"`
	// Placed are the links (or copies) put in the loader's path.
	Placed []Placed `json:"placed"`
	// Created are the directories created for them, parents first.
	Created []string `json:"created_dirs"`
	// ScriptDirs are store library directories the activation script adds to
	// LD_LIBRARY_PATH for this target.
	ScriptDirs []string `json:"env"`
	// Installed are the store entries this target's links, copies and
	// activation script lines point into: installed for it or shared with
	// other targets (an entry is removed once no record names it).
	Installed []fetch.Key `json:"installed"`
	// Kept are files that were in the way and left alone.
	Kept []string `json:"kept,omitempty"`
	// Supplied are the declared distributions whose files were placed from
	// NVIDIA archives at their wheels' RECORD paths (no .dist-info).
	Supplied []declared.Supply `json:"supplied,omitempty"`

	// prefix is where the record is saved; store holds its entries.
	prefix string
	store  *fetch.Store
	// j is the journal of the round in progress; hook is Options.Hook.
	j    *journal
	hook func(step string)
}

func (r *Record) owns(p string) bool {
	for _, x := range r.Placed {
		if x.Path == p {
			return true
		}
	}
	return false
}

// Uses reports whether the record points into a store directory: a placed
// link or copy made from it, or an env.sh entry inside it.
func (r *Record) Uses(dir string) bool {
	inside := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) }
	for _, d := range r.ScriptDirs {
		if inside(d) {
			return true
		}
	}
	for _, p := range r.Placed {
		target := p.Link
		if target != "" && !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p.Path), target)
		}
		if target != "" && inside(filepath.Clean(target)) {
			return true
		}
	}
	return false
}

func recordsDir(prefix string) string { return filepath.Join(prefix, "activations") }

func recordFile(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(recordsDir(prefix), hex.EncodeToString(sum[:8])+".json")
}

// loadRecord reads the record of a target, or starts one.
func loadRecord(prefix string, t *Target) (*Record, error) {
	return loadRecordKey(prefix, t.Key(), t.Name)
}

func loadRecordKey(prefix, key, name string) (*Record, error) {
	p := recordFile(prefix, key)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &Record{Target: key, Name: name}, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &r, nil
}

// otherRecords are the records of every target but key.
func otherRecords(prefix, key string) ([]*Record, error) {
	recs, err := Records(prefix)
	if err != nil {
		return nil, err
	}
	var out []*Record
	for _, r := range recs {
		if r.Target != key {
			out = append(out, r)
		}
	}
	return out, nil
}

// Records lists every activation record under prefix.
func Records(prefix string) ([]*Record, error) {
	entries, err := os.ReadDir(recordsDir(prefix))
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
		data, err := os.ReadFile(filepath.Join(recordsDir(prefix), e.Name()))
		if err != nil {
			return nil, err
		}
		var r Record
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out = append(out, &r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out, nil
}

// save writes the record atomically; an empty record is removed.
func (r *Record) save(prefix string) error {
	p := recordFile(prefix, r.Target)
	if len(r.Placed) == 0 && len(r.Created) == 0 && len(r.ScriptDirs) == 0 && len(r.Installed) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	r.Updated = time.Now().UTC()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(p, append(data, '\n'), 0o644)
}

// writeAtomic writes p whole, through a temporary file beside it. A
// record's temporary file has a fixed name (p + ".tmp"), so that the
// recovery of a killed run, which holds the target's journal, can delete
// it.
func writeAtomic(p string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	var tmp *os.File
	var err error
	if strings.HasSuffix(p, ".json") {
		tmp, err = os.OpenFile(p+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	} else {
		tmp, err = os.CreateTemp(filepath.Dir(p), ".tmp-*")
	}
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// EnvScript is the activation script for objects that search no directory
// the user may write.
func EnvScript(prefix string) string { return filepath.Join(prefix, "env.sh") }

// writeEnvScript regenerates PREFIX/env.sh from every record: one
// LD_LIBRARY_PATH with each store directory any target needs. Without such
// directories the script is removed.
func writeEnvScript(prefix string) error {
	recs, err := Records(prefix)
	if err != nil {
		return err
	}
	var dirs []string
	var names []string
	for _, r := range recs {
		for _, d := range r.ScriptDirs {
			dirs = appendUnique(dirs, d)
		}
		if len(r.ScriptDirs) > 0 {
			names = append(names, r.Name)
		}
	}
	p := EnvScript(prefix)
	if len(dirs) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var b strings.Builder
	b.WriteString("# Written by cudadeps resolve for: " + strings.Join(names, ", ") + ".\n")
	b.WriteString("# Source it (. " + shellQuote(p) + ") in shells that import these packages; `cudadeps undo` rewrites it.\n")
	fmt.Fprintf(&b, "export LD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n", shellQuote(strings.Join(dirs, ":")))
	return writeAtomic(p, []byte(b.String()), 0o644)
}

// EnvDirs returns the directories the activation script adds.
func EnvDirs(prefix string) ([]string, error) {
	recs, err := Records(prefix)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, r := range recs {
		for _, d := range r.ScriptDirs {
			dirs = appendUnique(dirs, d)
		}
	}
	return dirs, nil
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '+' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fileSum is the sha256 of a file's contents.
func fileSum(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// inside reports whether p is dir or lies under it.
func inside(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
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

// linkTarget is where a placed link points, as an absolute path; "" for a
// copy.
func (p Placed) linkTarget() string {
	if p.Link == "" {
		return ""
	}
	if filepath.IsAbs(p.Link) {
		return filepath.Clean(p.Link)
	}
	return filepath.Join(filepath.Dir(p.Path), p.Link)
}

// keysFor returns the keys of r's store entries that hold p.
func (r *Record) keysFor(store *fetch.Store, p string) []fetch.Key {
	if store == nil || p == "" {
		return nil
	}
	var out []fetch.Key
	for _, k := range r.Installed {
		if d, err := store.EntryDir(k); err == nil && inside(p, d) {
			out = append(out, k)
		}
	}
	return out
}

// shareFrom makes r a co-owner of a file o placed, with its siblings (the
// files o placed from the same component into the same directory, which
// the library may open at run time), the directories o created for them
// and the store entries they point into.
func (r *Record) shareFrom(o *Record, pl Placed) {
	for _, x := range o.Placed {
		if x.Path != pl.Path && (x.Component != pl.Component || filepath.Dir(x.Path) != filepath.Dir(pl.Path)) {
			continue
		}
		if !r.owns(x.Path) {
			r.Placed = append(r.Placed, x)
		}
		r.Installed = appendKeys(r.Installed, o.keysFor(r.store, x.linkTarget()))
	}
	for _, d := range o.Created {
		if inside(pl.Path, d) {
			r.Created = appendUnique(r.Created, d)
		}
	}
}

// shareExisting makes r a co-owner of dst when another target's record
// placed it and it is still as placed. It reports whether it did.
func (r *Record) shareExisting(dst string) (bool, error) {
	if r.prefix == "" {
		return false, nil
	}
	others, err := otherRecords(r.prefix, r.Target)
	if err != nil {
		return false, err
	}
	for _, o := range others {
		if pl, ok := o.placed(dst); ok && unchanged(pl) {
			r.shareFrom(o, pl)
			return true, nil
		}
	}
	return false, nil
}

// shareDir makes the record a co-owner of dir, and of its parents, where
// another target's record created them: placing files in a directory
// another target created keeps it until both are undone, and the last
// undo removes it.
func (r *Record) shareDir(dir string) error {
	if r.prefix == "" {
		return nil
	}
	others, err := otherRecords(r.prefix, r.Target)
	if err != nil {
		return err
	}
	for _, o := range others {
		for _, c := range o.Created {
			if (c == dir || strings.HasPrefix(dir, c+string(filepath.Separator))) && !slices.Contains(r.Created, c) {
				r.Created = append(r.Created, c)
			}
		}
	}
	return nil
}

// Share makes the record a co-owner of what other targets' records placed
// and this target's objects load (found by the scan): the links or copies,
// the directories created for them, the store entries they point into, and
// the activation script's directories. Undo of one target then leaves what
// another still uses. The record is saved when it changed.
func (r *Record) Share(rep *scan.Report) error {
	if r == nil || r.prefix == "" {
		return nil
	}
	others, err := otherRecords(r.prefix, r.Target)
	if err != nil || len(others) == 0 {
		return err
	}
	changed := false
	for _, root := range rep.Roots {
		if root.Result == nil {
			continue
		}
		for _, obj := range root.Result.Objects {
			if obj.HostPath == "" {
				continue
			}
			dirs := []string{filepath.Dir(obj.HostPath), physical(filepath.Dir(obj.HostPath))}
			for _, o := range others {
				for _, d := range dirs {
					p := filepath.Join(d, filepath.Base(obj.HostPath))
					if pl, ok := o.placed(p); ok && !r.owns(p) {
						r.shareFrom(o, pl)
						changed = true
					}
					if slices.Contains(o.ScriptDirs, d) && !slices.Contains(r.ScriptDirs, d) {
						r.ScriptDirs = append(r.ScriptDirs, d)
						r.Installed = appendKeys(r.Installed, o.keysFor(r.store, d))
						changed = true
					}
				}
			}
		}
	}
	if !changed {
		return nil
	}
	return r.save(r.prefix)
}

// supply records that a declared distribution's libraries were placed
// from an archive, replacing an earlier supply of the same distribution.
func (r *Record) supply(rs *Restore, st *Step, placed []Placed) {
	sup := declared.Supply{Name: rs.Dist, Version: rs.Version, Site: rs.Site,
		From: fmt.Sprintf("%s %s (%s)", st.Component, st.Version, st.Platform), Files: []string{}}
	for _, p := range placed {
		sup.Files = append(sup.Files, p.Path)
	}
	r.Supplied = slices.DeleteFunc(r.Supplied, func(x declared.Supply) bool { return x.Name == rs.Dist })
	r.Supplied = append(r.Supplied, sup)
}
