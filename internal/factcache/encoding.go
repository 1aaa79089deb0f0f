package factcache

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Inputs are kept in their own compact form, not as gob's list of strings
// and structures: a check of torch keeps about five thousand paths, nearly
// all under the same few directories, and reads them back on every run.
// Each path is written as the length of the prefix it shares with the one
// before it (they are sorted) and the rest; each stamp as the difference
// from the one before it, since the files of a directory are usually made
// together (near inodes and times). That is a fifth of gob's bytes, and
// reading it back makes one string for all the paths instead of one each.

// inputsFormat opens the encoding; it changes when the encoding does.
const inputsFormat = 1

// Bounds on what a decoded Inputs may hold, so that a damaged or hostile
// cache file costs bounded memory: no path is longer than PATH_MAX, and all
// of them together are not longer than a cache file may be, many times.
const (
	maxPath       = 4096
	maxPathsBytes = 8 * maxFile
)

// MarshalBinary encodes in (gob uses it).
func (in Inputs) MarshalBinary() ([]byte, error) {
	if len(in.Paths) != len(in.Stamps) {
		return nil, fmt.Errorf("%d paths with %d stamps", len(in.Paths), len(in.Stamps))
	}
	b := make([]byte, 0, 16+len(in.Paths)*24)
	b = append(b, inputsFormat)
	b = binary.AppendUvarint(b, uint64(len(in.Paths)))
	prev := ""
	for _, p := range in.Paths {
		shared := commonPrefix(prev, p)
		b = binary.AppendUvarint(b, uint64(shared))
		b = binary.AppendUvarint(b, uint64(len(p)-shared))
		b = append(b, p[shared:]...)
		prev = p
	}
	var last Stamp
	for _, s := range in.Stamps {
		b = binary.AppendVarint(b, int64(s.Dev-last.Dev))
		b = binary.AppendVarint(b, int64(s.Ino-last.Ino))
		b = binary.AppendVarint(b, s.Size-last.Size)
		b = binary.AppendVarint(b, s.Mtime-last.Mtime)
		b = binary.AppendVarint(b, s.Ctime-last.Ctime)
		b = binary.AppendUvarint(b, uint64(s.Mode))
		last = s
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary wrote; anything else is an
// error, never a panic or an unbounded allocation.
func (in *Inputs) UnmarshalBinary(data []byte) error {
	d := decoder{b: data, n: len(data)}
	if f := d.byte(); f != inputsFormat {
		return fmt.Errorf("inputs of format %d, not %d", f, inputsFormat)
	}
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b))/2 { // two bytes at least per path
		d.err = errors.New("more paths than bytes")
	}
	if d.err != nil {
		return d.err
	}
	// First the lengths, to make every path out of one string.
	type span struct{ shared, from, to int }
	spans := make([]span, n)
	total, prevLen := 0, 0
	for i := range spans {
		shared, rest := d.uvarint(), d.uvarint()
		switch {
		case d.err != nil:
			return d.err
		case shared > uint64(prevLen):
			return errors.New("a path shares more than the one before it has")
		case rest > uint64(len(d.b)), shared+rest > maxPath:
			return errors.New("a path longer than it may be")
		}
		spans[i] = span{int(shared), d.off(), d.off() + int(rest)}
		d.b = d.b[rest:]
		prevLen = int(shared + rest)
		if total += prevLen; total > maxPathsBytes {
			return errors.New("paths longer than they may be")
		}
	}
	buf := make([]byte, 0, total)
	prev := 0 // where the path before starts in buf
	for _, s := range spans {
		start := len(buf)
		buf = append(buf, buf[prev:prev+s.shared]...)
		buf = append(buf, data[s.from:s.to]...)
		prev = start
	}
	whole := string(buf)
	in.Paths = make([]string, n)
	at := 0
	for i, s := range spans {
		l := s.shared + s.to - s.from
		in.Paths[i] = whole[at : at+l]
		at += l
	}
	in.Stamps = make([]Stamp, n)
	var last Stamp
	for i := range in.Stamps {
		s := Stamp{
			Dev:   last.Dev + uint64(d.varint()),
			Ino:   last.Ino + uint64(d.varint()),
			Size:  last.Size + d.varint(),
			Mtime: last.Mtime + d.varint(),
			Ctime: last.Ctime + d.varint(),
		}
		mode := d.uvarint()
		if mode > 1<<32-1 && d.err == nil {
			d.err = errors.New("a mode out of range")
		}
		if d.err != nil {
			return d.err
		}
		s.Mode = uint32(mode)
		in.Stamps[i], last = s, s
	}
	if len(d.b) != 0 {
		return errors.New("bytes after the inputs")
	}
	return nil
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// decoder reads varints off b, the rest of n bytes, keeping the first
// error.
type decoder struct {
	b   []byte
	n   int
	err error
}

// off is the offset of what is left in the whole input.
func (d *decoder) off() int { return d.n - len(d.b) }

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.err = errors.New("inputs cut short")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("inputs cut short or damaged")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint undoes binary.AppendVarint's zig-zag encoding over a uvarint.
func (d *decoder) varint() int64 {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}
