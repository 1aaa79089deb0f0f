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
	"sort"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
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
	// Env are store library directories the activation script adds to
	// LD_LIBRARY_PATH for this target.
	Env []string `json:"env"`
	// Installed are store entries installed for this target.
	Installed []fetch.Key `json:"installed"`
	// Kept are files that were in the way and left alone.
	Kept []string `json:"kept,omitempty"`
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
	for _, d := range r.Env {
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
	p := recordFile(prefix, t.Key())
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &Record{Target: t.Key(), Name: t.Name}, nil
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
	if len(r.Placed) == 0 && len(r.Created) == 0 && len(r.Env) == 0 && len(r.Installed) == 0 {
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

func writeAtomic(p string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, data, mode)
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
		for _, d := range r.Env {
			dirs = appendUnique(dirs, d)
		}
		if len(r.Env) > 0 {
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
		for _, d := range r.Env {
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
