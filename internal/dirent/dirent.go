// Package dirent reads the entries of an open directory with their types, as getdents64 returns them, without a system call per entry.
package dirent

import (
	"encoding/binary"
	"slices"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/eintr"
)

// Each calls fn with the name and type (syscall.DT_REG, DT_DIR, DT_LNK,
// ..., DT_UNKNOWN where the file system does not record it) of every
// entry of the directory open as fd but "." and "..", in the directory's
// order, reading it through buf (a few KiB: its size bounds each read).
// name is only valid during the call. Each stops at the first error of fn
// or of the read, and returns it.
func Each(fd int, buf []byte, fn func(name []byte, typ byte) error) error {
	for {
		n, err := eintr.Retry(func() (int, error) { return syscall.ReadDirent(fd, buf) })
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2),
		// d_type (1), d_name (NUL-terminated, padded).
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			typ, name := b[18], b[19:reclen]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if err := fn(name, typ); err != nil {
				return err
			}
		}
	}
}
