package elfscan

import (
	"errors"
	"io"
)

// streamAt serves ReadAt from a forward-only stream that can be reopened.
type streamAt struct {
	open func() (io.ReadCloser, error)
	rc   io.ReadCloser
	pos  int64
}

// Close closes the stream; a later read reopens it.
func (s *streamAt) Close() error {
	if s.rc == nil {
		return nil
	}
	err := s.rc.Close()
	s.rc = nil
	return err
}

func (s *streamAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if s.rc == nil || off < s.pos {
		s.Close()
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
