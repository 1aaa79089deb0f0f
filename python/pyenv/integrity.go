package pyenv

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/plural"
	"github.com/cudadeps/cudadeps/internal/workers"
)

// Integrity is what a check of a distribution's files against its RECORD
// found.
type Integrity struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Checked   int      `json:"checked"`              // RECORD entries checked
	Missing   []string `json:"missing,omitempty"`    // absolute paths
	WrongSize []string `json:"wrong_size,omitempty"` // present, size differs from RECORD
	WrongHash []string `json:"wrong_hash,omitempty"` // present, sha256 differs (only when asked)
}

// OK says whether every checked file is present and as RECORD says.
func (i *Integrity) OK() bool {
	return len(i.Missing) == 0 && len(i.WrongSize) == 0 && len(i.WrongHash) == 0
}

// String says it in one line: "nvidia-cudnn-cu13 9.19.0.56 is installed
// but 8 of its files are missing".
func (i *Integrity) String() string {
	if i.OK() {
		return fmt.Sprintf("%s %s is installed with all %d of its files", i.Name, i.Version, i.Checked)
	}
	var parts []string
	if n := len(i.Missing); n > 0 {
		parts = append(parts, fmt.Sprintf("%d of its files %s missing (%s)", n, plural.Of(n, "is", "are"), NameFiles(i.Missing)))
	}
	if n := len(i.WrongSize); n > 0 {
		parts = append(parts, fmt.Sprintf("%d %s the wrong size (%s)", n, plural.Of(n, "has", "have"), NameFiles(i.WrongSize)))
	}
	if n := len(i.WrongHash); n > 0 {
		parts = append(parts, fmt.Sprintf("%d %s the wrong sha256 (%s)", n, plural.Of(n, "has", "have"), NameFiles(i.WrongHash)))
	}
	return fmt.Sprintf("%s %s is installed but %s", i.Name, i.Version, strings.Join(parts, ", "))
}

// NameFiles names the first two files of paths by their base names, and
// counts the rest: how a one-line message says which files (the JSON lists
// them all).
func NameFiles(paths []string) string {
	var names []string
	for _, p := range paths[:min(len(paths), 2)] {
		names = append(names, filepath.Base(p))
	}
	s := strings.Join(names, ", ")
	if n := len(paths) - len(names); n > 0 {
		s += fmt.Sprintf(" and %d more", n)
	}
	return s
}

// Check compares the distribution's files with its RECORD: each must
// exist with the recorded size, and with verifyHashes the recorded sha256.
// Byte code under __pycache__ is not checked: Python rewrites it at will.
func (d *Dist) Check(ctx context.Context, verifyHashes bool) (*Integrity, error) {
	res := &Integrity{Name: d.Name, Version: d.Version}
	for i, e := range d.Record {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if strings.Contains(e.Path, "__pycache__/") && strings.HasSuffix(e.Path, ".pyc") {
			continue
		}
		p := d.path(e.Path)
		res.Checked++
		st, err := d.files.stat(p)
		if err != nil || !st.Mode().IsRegular() {
			res.Missing = append(res.Missing, p)
			continue
		}
		if e.Size >= 0 && st.Size() != e.Size {
			res.WrongSize = append(res.WrongSize, p)
			continue
		}
		if verifyHashes && e.HashAlgo == "sha256" {
			ok, err := d.sameSHA256(ctx, p, e.Hash)
			if err != nil {
				return nil, err
			}
			if !ok {
				res.WrongHash = append(res.WrongHash, p)
			}
		}
	}
	return res, nil
}

// sameSHA256 hashes the regular file path names (links followed inside
// the root), opened without blocking: it was a regular file when stat'ed,
// and must still be one.
func (d *Dist) sameSHA256(ctx context.Context, path string, want []byte) (bool, error) {
	host, err := d.files.resolve(path)
	if err != nil {
		return false, fmt.Errorf("verify %s: %w", path, err)
	}
	f, err := os.OpenFile(host, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return false, fmt.Errorf("verify %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false, fmt.Errorf("verify %s: not a regular file", path)
	}
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return false, fmt.Errorf("verify %s: %w", path, err)
	}
	return string(h.Sum(nil)) == string(want), nil
}

// ctxReader stops a long hash when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Owners maps each file that an installed distribution's RECORD lists to
// that distribution.
type Owners struct {
	// libs are the files named like shared libraries (".so" in the base
	// name: what a scan asks about), indexed at once; rest the others,
	// indexed the first time one is asked about. An environment lists
	// tens of thousands of files, a few hundred of them libraries.
	libs  map[string]*Dist
	lists []ownerList
	rest  func() map[string]*Dist
}

// ownerList is one distribution's files, under the site directory as
// named (site) and as resolved (real).
type ownerList struct {
	d          *Dist
	site, real string
}

// NewOwners indexes the RECORD files of dists. A file listed by two
// distributions belongs to the first by name order, so the answer does not
// depend on map order.
func NewOwners(dists map[string]*Dist) *Owners {
	// The files of each distribution as the loader may name them: as
	// listed, and under the site directory's real path where a link leads
	// to it (the loader reports real paths). Each site directory is
	// resolved once.
	reals := map[string]string{}
	o := &Owners{}
	for _, name := range slices.Sorted(maps.Keys(dists)) {
		d := dists[name]
		real, ok := reals[d.SiteDir]
		if !ok {
			real = d.SiteDir
			if r, err := filepath.EvalSymlinks(d.SiteDir); err == nil {
				real = r
			}
			reals[d.SiteDir] = real
		}
		o.lists = append(o.lists, ownerList{d, d.SiteDir, real})
	}
	// Each distribution's libraries are picked out side by side; the
	// index is then filled in name order.
	libs := make([][]string, len(o.lists))
	workers.Each(len(o.lists), 0, func(i int) {
		o.lists[i].each(func(f string) {
			if libraryName(f) {
				libs[i] = append(libs[i], f)
			}
		})
	})
	o.libs = map[string]*Dist{}
	for i, l := range o.lists {
		for _, f := range libs[i] {
			if _, ok := o.libs[f]; !ok {
				o.libs[f] = l.d
			}
		}
	}
	o.rest = sync.OnceValue(func() map[string]*Dist {
		m := map[string]*Dist{}
		for _, l := range o.lists {
			l.each(func(f string) {
				if _, ok := m[f]; !ok && !libraryName(f) {
					m[f] = l.d
				}
			})
		}
		return m
	})
	return o
}

// each calls fn with each of l's files, under the site directory as named
// and, where that is a link, as resolved.
func (l ownerList) each(fn func(path string)) {
	for _, f := range l.d.Files {
		fn(f)
		if l.real != l.site {
			if rel, err := filepath.Rel(l.site, f); err == nil {
				fn(filepath.Join(l.real, rel))
			}
		}
	}
}

// libraryName reports a path whose base name holds ".so".
func libraryName(path string) bool {
	return strings.Contains(path[strings.LastIndexByte(path, '/')+1:], ".so")
}

func (o *Owners) lookup(path string) *Dist {
	if libraryName(path) {
		return o.libs[path]
	}
	return o.rest()[path]
}

// Owner is the distribution whose RECORD lists path, or nil.
func (o *Owners) Owner(path string) *Dist {
	p := filepath.Clean(path)
	if d := o.lookup(p); d != nil {
		return d
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return o.lookup(r)
	}
	return nil
}
