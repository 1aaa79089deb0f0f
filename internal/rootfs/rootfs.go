// Package rootfs reads the files of a system under a root directory as a process chrooted there would: links resolve inside the root, and only small regular files are read, without blocking.
package rootfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/regfile"
)

// Root is the "/" of the system whose files are read: this host, or a
// directory that holds another system's tree (a sysroot, a container
// image). A root may be untrusted: a link in it never leads out of it, and
// a FIFO or a device is refused rather than read.
type Root struct {
	dir string // "" for this host; else an absolute, clean host path
}

// Open returns the root at dir; "" and "/" are this host. Its error names
// the root ("root DIR: not a directory"): callers need not wrap it.
func Open(dir string) (*Root, error) {
	if dir == "" || dir == "/" {
		return &Root{}, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &fs.PathError{Op: "root", Path: dir, Err: err}
	}
	st, err := os.Stat(abs)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &fs.PathError{Op: "root", Path: dir, Err: err}
	}
	if !st.IsDir() {
		return nil, &fs.PathError{Op: "root", Path: dir, Err: syscall.ENOTDIR}
	}
	return &Root{dir: abs}, nil
}

// ReadFile reads the small regular file at guest, an absolute path of the
// system under root ("" for this host), of at most limit bytes: Open and
// (*Root).ReadFile in one call, for readers of a single file.
func ReadFile(root, guest string, limit int64) ([]byte, error) {
	r, err := Open(root)
	if err != nil {
		return nil, err
	}
	return r.ReadFile(guest, limit)
}

// Dir is the root's directory on this machine, "" for this host.
func (r *Root) Dir() string { return r.dir }

// IsHost reports whether the root is this host's own "/".
func (r *Root) IsHost() bool { return r.dir == "" }

func (r *Root) String() string {
	if r.dir == "" {
		return "this host"
	}
	return r.dir
}

// Path is where guest lies on this machine, its links not resolved: how
// messages name it, and what a reader that resolves links inside the root
// itself (the loader model) is given.
func (r *Root) Path(guest string) string {
	if r.dir == "" {
		return guest
	}
	return r.dir + path.Clean("/"+guest)
}

// Guest maps a path of this machine that lies inside the root to the path
// the root's system sees; ok is false for a path outside it.
func (r *Root) Guest(host string) (guest string, ok bool) {
	if r.dir == "" {
		return host, true
	}
	rel, ok := strings.CutPrefix(host, r.dir)
	if !ok || rel != "" && rel[0] != '/' {
		return "", false
	}
	if rel == "" {
		return "/", true
	}
	return rel, true
}

// maxSymlinks is MAXSYMLINKS on Linux: the links one resolution may follow.
const maxSymlinks = 40

// Walk resolves every link of guest inside the root and returns the
// resolved path, as the root's system sees it. mayExist, when not nil, is
// asked about each host path before it is looked at; false means it is
// absent (a caller with cached directory listings saves the lstat).
func (r *Root) Walk(guest string, mayExist func(host string) bool) (string, error) {
	w := walker{r: r, mayExist: mayExist}
	return w.walk(guest)
}

// Local is the file of this machine that opens what guest names in the
// root, like `realpath -m` inside it: the links that exist are resolved
// inside the root, and from the first name that is not there on, the rest
// is appended as written; as that name is absent, opening the result fails
// as in the root's system, and never follows a link out of the root. A loop
// of links gives a path no system call accepts (it holds a NUL byte).
func (r *Root) Local(guest string) string {
	w := walker{r: r, lenient: true}
	resolved, err := w.walk(absolute(guest))
	if err != nil {
		return r.dir + path.Clean("/"+guest) + "\x00(" + err.Error() + ")"
	}
	if r.dir == "" {
		return resolved
	}
	return strings.TrimSuffix(r.dir+resolved, "/")
}

// walker resolves paths inside a root. It counts in links the links
// followed in the whole resolution, nested ones included, as the kernel
// does, so that a hostile tree of links that each name two others cannot
// make the work explode. With lenient, a name that is not there ends the
// resolution instead of failing it (Local).
type walker struct {
	r        *Root
	mayExist func(string) bool
	lenient  bool
	links    int
}

func (w *walker) walk(guest string) (string, error) {
	// Components are taken one by one, not cleaned first: ".." after a
	// link goes to the parent of the link's target, as in the kernel; and
	// ".." at "/" stays at "/", so nothing leads out of the root.
	parts := strings.Split(guest, "/")
	cur := "/"
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		if p == "" || p == "." {
			continue
		}
		if p == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, p)
		host := w.r.dir + next
		var st fs.FileInfo
		err := fs.ErrNotExist
		if w.mayExist == nil || w.mayExist(host) {
			st, err = os.Lstat(host)
		}
		if err != nil {
			if w.lenient && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) {
				// Appended as written, not cleaned: a ".." after the
				// absent name must not cancel it.
				return strings.TrimSuffix(cur, "/") + "/" + strings.Join(parts[i:], "/"), nil
			}
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if w.links >= maxSymlinks {
			return "", syscall.ELOOP
		}
		w.links++
		target, err := os.Readlink(host)
		if err != nil {
			return "", err
		}
		if !path.IsAbs(target) {
			target = path.Join(cur, target)
		}
		resolved, err := w.walk(target)
		if err != nil {
			return "", err
		}
		// The rest is appended as written, not joined: path.Join would
		// clean "sub/.." away textually, while "sub" may itself be a link
		// whose ".." leads elsewhere.
		for _, q := range parts[i+1:] {
			resolved += "/" + q
		}
		return w.walk(resolved)
	}
	return cur, nil
}

// Resolve returns the file of this machine that guest names in the root,
// every link on the way followed inside the root. The error names guest.
func (r *Root) Resolve(guest string) (string, error) {
	if r.dir == "" {
		// This host's kernel resolves links as the root's system would.
		return path.Clean(absolute(guest)), nil
	}
	resolved, err := r.Walk(absolute(guest), nil)
	if err != nil {
		return "", r.pathError("open", guest, err)
	}
	return r.dir + resolved, nil
}

// resolveParent resolves the directory of guest and keeps its last name:
// the file itself, when a link, is not followed.
func (r *Root) resolveParent(guest string) (string, error) {
	guest = path.Clean(absolute(guest))
	dir, base := path.Split(guest)
	if r.dir == "" {
		return guest, nil
	}
	if base == "" {
		return r.dir + "/", nil
	}
	resolved, err := r.Walk(dir, nil)
	if err != nil {
		return "", r.pathError("lstat", guest, err)
	}
	return strings.TrimSuffix(r.dir+resolved, "/") + "/" + base, nil
}

// Lstat describes the file guest names, not following it when it is a
// link (the links before it are followed inside the root).
func (r *Root) Lstat(guest string) (fs.FileInfo, error) {
	host, err := r.resolveParent(guest)
	if err != nil {
		return nil, err
	}
	st, err := os.Lstat(host)
	if err != nil {
		return nil, r.pathError("lstat", guest, err)
	}
	return st, nil
}

// Stat describes the file guest names, links followed inside the root.
func (r *Root) Stat(guest string) (fs.FileInfo, error) {
	host, err := r.Resolve(guest)
	if err != nil {
		return nil, err
	}
	// Under a root the resolved path has no links left (unless the tree
	// changes meanwhile): Lstat never follows one out of the root.
	stat := os.Lstat
	if r.dir == "" {
		stat = os.Stat
	}
	st, err := stat(host)
	if err != nil {
		return nil, r.pathError("stat", guest, err)
	}
	return st, nil
}

// Exists reports whether guest names anything, a dangling link included.
func (r *Root) Exists(guest string) bool {
	_, err := r.Lstat(guest)
	return err == nil
}

// ReadDir lists the directory guest names, links followed inside the root.
func (r *Root) ReadDir(guest string) ([]fs.DirEntry, error) {
	host, err := r.Resolve(guest)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(host)
	if err != nil {
		return nil, r.pathError("open", guest, err)
	}
	return ents, nil
}

// ReadFile reads the regular file guest names, of at most limit bytes,
// links followed inside the root. A FIFO, a device, a directory or a file
// larger than limit is refused with one line naming guest (and the file
// its links led to); a missing file's error wraps fs.ErrNotExist.
func (r *Root) ReadFile(guest string, limit int64) ([]byte, error) {
	host, name, err := r.readable(guest)
	if err != nil {
		return nil, err
	}
	return regfile.ReadNamed(host, name, limit)
}

// ReadFileString is ReadFile into a string (regfile.ReadNamedString).
func (r *Root) ReadFileString(guest string, limit int64) (string, error) {
	host, name, err := r.readable(guest)
	if err != nil {
		return "", err
	}
	return regfile.ReadNamedString(host, name, limit)
}

// OpenFile opens the regular file guest names, of at most limit bytes, to
// be read as a stream (regfile.OpenNamed).
func (r *Root) OpenFile(guest string, limit int64) (io.ReadCloser, error) {
	host, name, err := r.readable(guest)
	if err != nil {
		return nil, err
	}
	return regfile.OpenNamed(host, name, limit)
}

// readable is the file of this machine that guest names, and the name
// errors call it by.
func (r *Root) readable(guest string) (host, name string, err error) {
	host, err = r.Resolve(guest)
	if err != nil {
		return "", "", err
	}
	name = r.Path(guest)
	if resolved, _ := r.Guest(host); r.dir != "" && resolved != path.Clean(absolute(guest)) {
		name += " (a link to " + resolved + ")"
	}
	return host, name, nil
}

// Reason is what err says without the operation and path that a
// *fs.PathError (every error of a Root's) puts in it: for a message that
// names the path itself.
func Reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// pathError is err about guest, named as messages call it, one line.
func (r *Root) pathError(op, guest string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: op, Path: r.Path(guest), Err: err}
}

func absolute(p string) string {
	if path.IsAbs(p) {
		return p
	}
	return "/" + p
}
