package elfscan

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
)

// ReadZipMember reads the dynamic-linking facts of a member of a zip archive
// (a wheel) without unpacking it. A stored member is read in place through
// archive, the io.ReaderAt the zip.Reader was opened on. A compressed member
// is read as a stream: reads move forward through the decompressor, and a
// read behind the current position reopens it, so memory stays bounded (a
// few cached pages) whatever the member's size.
func ReadZipMember(archive io.ReaderAt, f *zip.File) (*Info, error) {
	info, _, err := ReadZipMemberWithStats(archive, f)
	return info, err
}

// ReadZipMemberWithStats is ReadZipMember that also reports the cost.
func ReadZipMemberWithStats(archive io.ReaderAt, f *zip.File) (*Info, Stats, error) {
	name := f.Name
	size := int64(f.UncompressedSize64)
	if f.UncompressedSize64 > 1<<40 {
		return nil, Stats{}, &FormatError{Path: name, Msg: "implausible uncompressed size"}
	}
	if f.Method == zip.Store && archive != nil {
		off, err := f.DataOffset()
		if err != nil {
			return nil, Stats{}, fmt.Errorf("%s: %w", name, err)
		}
		return read(io.NewSectionReader(archive, off, size), size, name, true, nil)
	}
	s := &streamAt{open: f.Open}
	defer s.close()
	return read(s, size, name, true, nil)
}

// streamAt serves ReadAt from a forward-only stream that can be reopened.
type streamAt struct {
	open func() (io.ReadCloser, error)
	rc   io.ReadCloser
	pos  int64
}

func (s *streamAt) close() {
	if s.rc != nil {
		s.rc.Close()
		s.rc = nil
	}
}

func (s *streamAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if s.rc == nil || off < s.pos {
		s.close()
		rc, err := s.open()
		if err != nil {
			return 0, err
		}
		s.rc, s.pos = rc, 0
	}
	if skip := off - s.pos; skip > 0 {
		n, err := io.CopyN(io.Discard, s.rc, skip)
		s.pos += n
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			return 0, err
		}
	}
	n, err := io.ReadFull(s.rc, p)
	s.pos += int64(n)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}
