// Package activation is the only owner of PREFIX and its layout: the store entries in use, the files placed for each target and their records, the crash journal, the activation script, the probes, and undo.
package activation

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
)

// Prefix is the directory cudadeps installs into (--prefix):
//
//	PREFIX/pkgs/, .staging/, .locks/   the store (fetch.Store): installed archives
//	PREFIX/activations/HASH.json       a target's record: what was placed for it
//	PREFIX/activations/HASH.journal    the journal of a change in progress
//	PREFIX/env.sh                      the activation script (LD_LIBRARY_PATH)
//	PREFIX/probes/probe-NAME.py        the probes the import check runs
//
// A prefix may serve another system's tree (--root): what it writes for
// that system names paths as the system sees them, and library
// directories are activated through the system's own
// /etc/ld.so.conf.d and ld.so.cache (see ldconf.go).
//
// Nothing is created until something is written: a prefix that does not
// exist yet reads as empty.
type Prefix struct {
	dir   string
	store *fetch.Store
	// root is the system the prefix serves, absolute and with its links
	// resolved; "" for this host.
	root string
}

// RootPrefix is where the prefix of a system under a root lies by default,
// as that system sees it: inside the tree, so that the system (a chroot, a
// container image built from the tree) sees the store its activation
// names.
const RootPrefix = "/opt/cudadeps"

// DefaultDir is $XDG_DATA_HOME/cudadeps, i.e. ~/.local/share/cudadeps.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "cudadeps"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("prefix: %w", err)
	}
	return filepath.Join(home, ".local", "share", "cudadeps"), nil
}

// DefaultDirIn is the default prefix of the system under root:
// DefaultDir() for this host (root "" or "/"), ROOT/opt/cudadeps
// (RootPrefix) for another.
func DefaultDirIn(root string) (string, error) {
	if root == "" || root == "/" {
		return DefaultDir()
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("root %s: %w", root, err)
	}
	return filepath.Join(abs, filepath.FromSlash(RootPrefix)), nil
}

// Open opens the prefix dir for this host; "" means DefaultDir().
func Open(dir string) (*Prefix, error) { return OpenIn(dir, "") }

// OpenIn opens the prefix dir for the system whose "/" is root ("" or "/"
// for this host). dir "" means DefaultDir() for this host, and ROOT/opt/cudadeps
// (RootPrefix) for a root.
func OpenIn(dir, root string) (*Prefix, error) {
	if root == "/" {
		root = ""
	}
	if root != "" {
		r, err := physicalRoot(root)
		if err != nil {
			return nil, err // it names the root
		}
		root = r
	}
	if dir == "" {
		d, err := DefaultDirIn(root)
		if err != nil {
			return nil, err
		}
		dir = d
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("prefix %s: %w", dir, err)
	}
	if root != "" {
		abs = physical(abs)
	}
	// The store lives in the prefix itself (PREFIX/pkgs).
	store, err := fetch.OpenStore(abs)
	if err != nil {
		return nil, err
	}
	return &Prefix{dir: abs, store: store, root: root}, nil
}

// Dir is the prefix's directory, absolute.
func (p *Prefix) Dir() string { return p.dir }

// Root is the system the prefix serves, as a directory of this machine;
// "" for this host.
func (p *Prefix) Root() string { return p.root }

// Unseen says, for a prefix that serves a root but lies outside it, that
// the root's system cannot see the store: links placed in the tree would
// point out of it, and its loader would not find the directories named
// for it. "" when the root sees the prefix (or there is no root).
func (p *Prefix) Unseen() string {
	if p.root == "" || inside(p.dir, p.root) {
		return ""
	}
	return fmt.Sprintf("the prefix %s lies outside the root %s: the system there (a chroot, an image built from it) cannot see the libraries placed from it; drop --prefix to use %s inside the root",
		p.dir, p.root, filepath.Join(p.root, filepath.FromSlash(RootPrefix)))
}

// Store is the prefix's store of installed archives.
func (p *Prefix) Store() *fetch.Store { return p.store }

// EnvScript is the activation script: it sets LD_LIBRARY_PATH for the
// objects that search no directory the user may write.
func (p *Prefix) EnvScript() string { return filepath.Join(p.dir, "env.sh") }

// EnvScriptInRoot is the activation script as the root's system names
// it; "" without a root, or when the prefix lies outside the root.
func (p *Prefix) EnvScriptInRoot() string {
	if p.root == "" {
		return ""
	}
	g, ok := guestPath(p.root, p.EnvScript())
	if !ok {
		return ""
	}
	return g
}

// ProbesDir is where the probes are written.
func (p *Prefix) ProbesDir() string { return filepath.Join(p.dir, "probes") }

func (p *Prefix) recordsDir() string { return filepath.Join(p.dir, "activations") }

// RecordsDir is where the activation records are kept: what the loader
// is made to search (the activation script's directories) follows from
// them.
func (p *Prefix) RecordsDir() string { return p.recordsDir() }

// RecordFile is where the record of a target (its key) is kept.
func (p *Prefix) RecordFile(target string) string {
	sum := sha256.Sum256([]byte(target))
	return filepath.Join(p.recordsDir(), hex.EncodeToString(sum[:8])+".json")
}

func (p *Prefix) journalFile(target string) string {
	sum := sha256.Sum256([]byte(target))
	return filepath.Join(p.recordsDir(), hex.EncodeToString(sum[:8])+".journal")
}

// WriteProbe writes a probe's script as PREFIX/probes/probe-NAME.py (a
// name no import can take for the framework's module, since the script's
// directory comes first on sys.path), unless it is there already, and
// returns its path. It stays, so that the command that ran it can be run
// again; the last undo removes it.
func (p *Prefix) WriteProbe(name, script string) (string, error) {
	dir := p.ProbesDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write the probe: %w", err)
	}
	f := filepath.Join(dir, "probe-"+name+".py")
	if cur, err := os.ReadFile(f); err == nil && string(cur) == script {
		return f, nil
	}
	if err := atomicfile.WriteFile(f, []byte(script), 0o644); err != nil {
		return "", fmt.Errorf("write the probe: %w", err)
	}
	return f, nil
}

// removeProbesIfUnused removes the probes once no target's record names
// anything: the last undo leaves no trace of them.
func (p *Prefix) removeProbesIfUnused() error {
	recs, err := p.Records()
	if err != nil {
		return err
	}
	for _, r := range recs {
		if !r.empty() {
			return nil
		}
	}
	dir := p.ProbesDir()
	probes, err := filepath.Glob(filepath.Join(dir, "probe-*.py"))
	if err != nil {
		return err
	}
	for _, f := range probes {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		return err
	}
	return nil
}
