package activation

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/cudadeps/cudadeps/internal/rootfs"
)

// physicalRoot is the root dir, absolute and with its links resolved; it
// must be a directory. Its error names the root once ("root DIR: not a
// directory"), as rootfs.Open's does.
func physicalRoot(dir string) (string, error) {
	r, err := rootfs.Open(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(r.Dir())
	if err != nil {
		// Named once: the root, not the path inside it EvalSymlinks says.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", &fs.PathError{Op: "root", Path: dir, Err: err}
	}
	return real, nil
}

// physical resolves the existing leading part of the absolute path p
// through its links and appends the rest as written.
func physical(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest)
		}
		if cur == filepath.Dir(cur) {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// guestPath is where the system under root sees the file p of this
// machine; ok is false when p lies outside root. Without a root, p is its
// own name.
func guestPath(root, p string) (string, bool) {
	if root == "" {
		return p, true
	}
	if p == root {
		return "/", true
	}
	rel, ok := strings.CutPrefix(p, root+string(filepath.Separator))
	if !ok {
		return "", false
	}
	return "/" + filepath.ToSlash(rel), true
}

// seenAs is p as the system under root names it when it can, else p.
func seenAs(root, p string) string {
	if g, ok := guestPath(root, p); ok {
		return g
	}
	return p
}
