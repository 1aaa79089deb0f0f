package ldso

import (
	"archive/zip"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// DefaultWheelMount is where wheels are mounted when no site-packages
// directory is named: a path no real system has, so that only the wheels'
// own files resolve under it.
const DefaultWheelMount = "/site-packages"

// zipOverlay makes the members of a wheel appear as files under a guest
// directory, without unpacking it. Wheels hold no symlinks, so paths are
// cleaned lexically.
type zipOverlay struct {
	mount   string // guest directory, clean, no trailing slash
	wheel   string // host path of the archive
	archive *os.File
	members map[string]*zip.File // relative path → member
	dirs    map[string]bool
	index   map[string]int // relative path → member index (file identity)
	seq     int
}

// MountWheel makes the files of the wheel at wheelPath appear under mount
// (DefaultWheelMount when empty), as if it were installed there. It returns
// the guest paths of its members, in archive order. Several wheels may share
// a mount, like distributions installed into one site-packages; the real
// files under mount, if any, show through where no wheel has a file.
func (l *Loader) MountWheel(wheelPath, mount string) ([]string, error) {
	if mount == "" {
		mount = DefaultWheelMount
	}
	mount = path.Clean(l.fs.guestPath(absolute(mount)))
	f, err := os.Open(wheelPath)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a readable wheel (zip): %w", wheelPath, err)
	}
	o := &zipOverlay{mount: mount, wheel: absolute(wheelPath), archive: f, members: map[string]*zip.File{}, dirs: map[string]bool{"": true}, index: map[string]int{}}
	var names []string
	for i, m := range zr.File {
		if strings.HasSuffix(m.Name, "/") || m.Mode().IsDir() {
			continue
		}
		rel := path.Clean(m.Name)
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			continue // a hostile member name never escapes the mount
		}
		o.members[rel] = m
		o.index[rel] = i
		for d := path.Dir(rel); d != "." && !o.dirs[d]; d = path.Dir(d) {
			o.dirs[d] = true
		}
		names = append(names, mount+"/"+rel)
	}
	l.fs.mu.Lock()
	list := append(l.fs.mounted(), o)
	o.seq = len(list)
	l.fs.overlays.Store(&list)
	l.fs.mu.Unlock()
	return names, nil
}

// Close releases the wheels mounted on the loader.
func (l *Loader) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	var first error
	for _, o := range l.fs.mounted() {
		if err := o.archive.Close(); err != nil && first == nil {
			first = err
		}
	}
	l.fs.overlays.Store(nil)
	return first
}

// mounted returns the mounted wheels.
func (f *rootFS) mounted() []*zipOverlay {
	if p := f.overlays.Load(); p != nil {
		return *p
	}
	return nil
}

// overlayHandle is the host-side name of a wheel member: the archive path,
// "!/", the member path, as Java and Python tools write it.
func (o *zipOverlay) handle(rel string) string { return o.wheel + wheelSep + rel }

const wheelSep = "!/"

// WheelMember splits the host-side name of a wheel's member (an object's
// HostPath) into the archive's path and the member's; false for a file.
func WheelMember(host string) (wheel, member string, ok bool) {
	return strings.Cut(host, wheelSep)
}

// lookupOverlay finds a guest path among the mounted wheels.
func (f *rootFS) lookupOverlay(guest string) (o *zipOverlay, rel string, isDir bool, ok bool) {
	overlays := f.mounted()
	if len(overlays) == 0 || !path.IsAbs(guest) {
		return nil, "", false, false
	}
	clean := path.Clean(guest)
	for _, o := range overlays {
		r, found := strings.CutPrefix(clean, o.mount)
		if !found || r != "" && r[0] != '/' {
			continue
		}
		r = strings.TrimPrefix(r, "/")
		if _, ok := o.members[r]; ok {
			return o, r, false, true
		}
		if o.dirs[r] {
			return o, r, true, true
		}
	}
	return nil, "", false, false
}

// member returns the wheel member behind a handle made by resolve.
func (f *rootFS) member(host string) (*zipOverlay, *zip.File, int) {
	wheel, rel, ok := WheelMember(host)
	if !ok {
		return nil, nil, 0
	}
	for _, o := range f.mounted() {
		if o.wheel == wheel {
			if m, ok := o.members[rel]; ok {
				return o, m, o.index[rel]
			}
		}
	}
	return nil, nil, 0
}

// openMember reads a wheel member for the loader.
func (l *Loader) openMember(host string) (*fileInfo, bool) {
	o, m, idx := l.fs.member(host)
	if m == nil {
		return nil, false
	}
	fi := &fileInfo{id: fileID{dev: 1<<62 + uint64(o.seq), ino: uint64(idx)}}
	f, err := elfscan.OpenMember(o.archive, m)
	if err != nil {
		fi.err = err
		return fi, true
	}
	defer f.Close()
	fi.info, fi.err = f.Info()
	return fi, true
}
