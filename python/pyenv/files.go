package pyenv

import (
	"io"
	"io/fs"

	"github.com/cudadeps/cudadeps/internal/rootfs"
)

// The most a dist-info file may hold: torch's METADATA is 60 KB and its
// RECORD 2 MB; a larger one is not a real environment's.
const (
	maxMetadata = 16 << 20
	maxRecord   = 256 << 20
)

// files reads an environment's files as the system they belong to sees
// them: under a root (a site-packages of another system's tree), a link
// resolves inside that root; anywhere, only regular files of a bounded size
// are read, so that a FIFO or a device cannot block or run on.
type files struct {
	root *rootfs.Root // nil: this host
}

// at is the root a path of this machine is read through, and the path as
// that root sees it.
func (f files) at(host string) (*rootfs.Root, string) {
	if f.root != nil {
		if g, ok := f.root.Guest(host); ok {
			return f.root, g
		}
	}
	r, _ := rootfs.Open("")
	return r, host
}

func (f files) readFileString(host string, limit int64) (string, error) {
	r, g := f.at(host)
	return r.ReadFileString(g, limit)
}

func (f files) open(host string, limit int64) (io.ReadCloser, error) {
	r, g := f.at(host)
	return r.OpenFile(g, limit)
}

func (f files) readDir(host string) ([]fs.DirEntry, error) {
	r, g := f.at(host)
	return r.ReadDir(g)
}

// stat describes the file host names, links followed (inside the root).
func (f files) stat(host string) (fs.FileInfo, error) {
	r, g := f.at(host)
	return r.Stat(g)
}

// resolve is the file of this machine that host names, its links followed
// (inside the root).
func (f files) resolve(host string) (string, error) {
	r, g := f.at(host)
	return r.Resolve(g)
}
