package resolver

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/dirent"
	"github.com/cudadeps/cudadeps/internal/eintr"
	"github.com/cudadeps/cudadeps/internal/workers"
)

// presence says which of files exist (as os.Stat says: a link by its
// target). A layout asks about every file a package's distributions list
// (torch's RECORD alone has twelve thousand, in a few hundred
// directories): each directory is listed once, several at a time, where a
// stat per file cost a system call each. A name listed as a link, or with
// a type the file system does not record, is stat'ed, and so are the
// files of a directory that cannot be listed.
func presence(files []string) []bool {
	out := make([]bool, len(files))
	byDir := map[string][]int{}
	var dirs []string
	for i, f := range files {
		d := filepath.Dir(f)
		if b := filepath.Base(f); b == "." || b == ".." || strings.HasSuffix(f, "/") {
			d = "" // not a name in a directory: stat'ed
		}
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], i)
	}
	look := func(buf []byte, d string) {
		idx := byDir[d]
		if d == "" || len(idx) == 1 {
			for _, i := range idx {
				out[i] = fileExists(files[i])
			}
			return
		}
		listed := make(map[string]byte, len(idx))
		for _, i := range idx {
			listed[filepath.Base(files[i])] = notListed
		}
		err := listDir(d, buf, func(name []byte, typ byte) {
			if _, ok := listed[string(name)]; ok {
				listed[string(name)] = typ
			}
		})
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			return // no such directory: none of its files is there
		}
		for _, i := range idx {
			switch typ := listed[filepath.Base(files[i])]; {
			case err != nil, typ != notListed && typ != syscall.DT_REG && typ != syscall.DT_DIR:
				out[i] = fileExists(files[i])
			default:
				out[i] = typ != notListed
			}
		}
	}
	// A listing's buffer is used by one call at a time.
	bufs := sync.Pool{New: func() any { return new([8 << 10]byte) }}
	workers.Each(len(dirs), max(1, min(runtime.GOMAXPROCS(0), (len(dirs)+15)/16)), func(i int) {
		buf := bufs.Get().(*[8 << 10]byte)
		look(buf[:], dirs[i])
		bufs.Put(buf)
	})
	return out
}

// notListed marks a name its directory does not list (no DT_ type is
// 0xff).
const notListed = 0xff

// listDir calls fn with each entry of the directory d.
func listDir(d string, buf []byte, fn func(name []byte, typ byte)) error {
	fd, err := eintr.Retry(func() (int, error) {
		return syscall.Open(d, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return dirent.Each(fd, buf, func(name []byte, typ byte) error {
		fn(name, typ)
		return nil
	})
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
