package fetch

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"unicode/utf8"

	"github.com/cudadeps/cudadeps/internal/humansize"
)

// Limits bound the work one archive may cause: bytes written, entries
// created, memory for its names, and how far it may expand. They stop
// decompression bombs and archives of millions of long names before they
// fill the disk or the memory. Zero or negative fields take the defaults,
// but a negative MaxRatio turns the ratio bound off.
type Limits struct {
	// MaxBytes bounds the total size of the regular files. Default 16 GiB
	// (NVIDIA's largest archives unpack to a few GiB).
	MaxBytes int64
	// MaxEntries bounds the number of entries. Default 200 000.
	MaxEntries int
	// MaxNameBytes bounds the bytes of all member names, link targets and
	// the directories they create: the memory an extraction and its store
	// record need grow with them. Default 16 MiB (NVIDIA's archives with
	// the most files hold well under 1 MiB of names).
	MaxNameBytes int64
	// MaxRatio bounds the expansion: an archive of N bytes may write at
	// most MaxRatio×N bytes (but always 64 MiB). Default 100: compressed
	// libraries and headers expand far less, bombs a thousand times more.
	MaxRatio int64
}

// Default limits.
const (
	DefaultMaxBytes     = 16 << 30
	DefaultMaxEntries   = 200_000
	DefaultMaxNameBytes = 16 << 20
	DefaultMaxRatio     = 100
	// ratioFloor is what any archive may write whatever its ratio, so that a
	// small archive of text is never refused.
	ratioFloor = 64 << 20
	// maxNameLen is the longest member name or link target: Linux's
	// PATH_MAX, beyond which no file can be made anyway.
	maxNameLen = 4096
)

func (l Limits) withDefaults() Limits {
	l.MaxBytes = orDefault(max(l.MaxBytes, 0), DefaultMaxBytes)
	l.MaxEntries = orDefault(max(l.MaxEntries, 0), DefaultMaxEntries)
	l.MaxNameBytes = orDefault(max(l.MaxNameBytes, 0), DefaultMaxNameBytes)
	l.MaxRatio = orDefault(l.MaxRatio, DefaultMaxRatio)
	return l
}

// byteCap is how many bytes of files an archive of compressed bytes may
// write (compressed <= 0: unknown, MaxBytes alone).
func (l Limits) byteCap(compressed int64) int64 {
	if compressed <= 0 || l.MaxRatio <= 0 {
		return l.MaxBytes
	}
	c := int64(ratioFloor)
	if compressed <= (1<<62)/l.MaxRatio {
		c = max(c, compressed*l.MaxRatio)
	} else {
		c = l.MaxBytes
	}
	return min(c, l.MaxBytes)
}

// capError refuses an archive that would write more than
// byteCap(compressed) bytes; size is how much (-1: unknown).
func (l Limits) capError(size, compressed int64) error {
	what := "expands to more than"
	if size >= 0 {
		what = fmt.Sprintf("expands to %s (%d bytes), more than", humansize.Bytes(size), size)
	}
	if c := l.byteCap(compressed); c < l.MaxBytes {
		return fmt.Errorf("the archive %s %s: %d times its %s (the limit of the expansion ratio)", what, humansize.Bytes(c), l.MaxRatio, humansize.Bytes(compressed))
	}
	return fmt.Errorf("the archive %s the limit of %d bytes", what, l.MaxBytes)
}

// SpaceError says that a directory lacks the room for what must be written
// there. It matches syscall.ENOSPC with errors.Is.
type SpaceError struct {
	Dir  string
	What string // e.g. "the archive unpacks to"
	Need int64  // bytes needed in Dir, in all
	Free int64  // bytes free in Dir when it was checked (-1: unknown)
}

func (e *SpaceError) Error() string {
	free := "free space unknown"
	if e.Free >= 0 {
		free = humansize.Bytes(e.Free) + " free"
	}
	return fmt.Sprintf("not enough space in %s: %s %s (%d bytes), %s", clip(e.Dir), e.What, humansize.Bytes(e.Need), e.Need, free)
}

func (e *SpaceError) Unwrap() error { return syscall.ENOSPC }

// isNoSpace tells a full file system (or quota) apart from other failures.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// freeSpace is what an unprivileged process may still write in dir.
func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// blockSize rounds a file's size up to what it takes on disk, about.
func blockSize(n int64) int64 { return (n + 4095) &^ 4095 }

// room keeps an estimate of the free space in a directory, so that each
// file is checked before it is written without a statfs per file: the
// estimate shrinks as files are written and is refreshed only when it says
// a file would not fit.
type room struct {
	dir  string
	free int64
	off  bool // statfs does not work there: the writes will tell
	init bool
}

// take reserves n bytes, or says that they do not fit.
func (r *room) take(n int64) (ok bool, free int64) {
	if r.off {
		return true, -1
	}
	n = blockSize(n)
	if !r.init || n > r.free {
		f, err := freeSpace(r.dir)
		if err != nil {
			r.off = true
			return true, -1
		}
		r.free, r.init = f, true
	}
	if n > r.free {
		return false, r.free
	}
	r.free -= n
	return true, r.free
}

// maxShown is how much of a name or path a message quotes: a hostile
// archive must not turn one refusal into kilobytes of output.
const maxShown = 160

// quote quotes an archive name for a message: control characters escaped,
// at most maxShown bytes of it, and the full length when it was cut.
func quote(s string) string {
	if len(s) <= maxShown {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(cutUTF8(s, maxShown)), len(s))
}

// clip shortens a path for a message, keeping its start and end.
func clip(s string) string {
	if len(s) <= maxShown {
		return s
	}
	head := cutUTF8(s, maxShown/2)
	tail := s[len(s)-maxShown/2:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s...%s (%d bytes)", head, tail, len(s))
}

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// controlChar returns the first byte of s below 0x20 or 0x7f, if any: names
// with them print as other names, or move the cursor, in listings.
func controlChar(s string) (byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return c, true
		}
	}
	return 0, false
}
