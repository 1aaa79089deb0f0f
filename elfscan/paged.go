package elfscan

import (
	"errors"
	"io"
)

// pageSize is the unit of reads; the loader itself reads in pages too.
const pageSize = 4096

// maxCachedPages bounds the memory of one read (1 MiB).
const maxCachedPages = 256

// pagedReader serves small scattered reads from a few cached pages, so that
// walking strings and version records costs one read per page touched, and
// counts what was read.
type pagedReader struct {
	r     io.ReaderAt
	size  int64
	pages map[int64][]byte
	fifo  []int64
	stats Stats
}

func newPagedReader(r io.ReaderAt, size int64) *pagedReader {
	return &pagedReader{r: r, size: size, pages: make(map[int64][]byte)}
}

func (p *pagedReader) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	for n < len(b) {
		pos := off + int64(n)
		if pos >= p.size {
			return n, io.EOF
		}
		page, err := p.page(pos / pageSize)
		if err != nil {
			return n, err
		}
		in := int(pos % pageSize)
		if in >= len(page) {
			return n, io.ErrUnexpectedEOF
		}
		n += copy(b[n:], page[in:])
	}
	return n, nil
}

func (p *pagedReader) page(idx int64) ([]byte, error) {
	if pg, ok := p.pages[idx]; ok {
		return pg, nil
	}
	start := idx * pageSize
	n := int64(pageSize)
	if start+n > p.size {
		n = p.size - start
	}
	buf := make([]byte, n)
	got, err := p.r.ReadAt(buf, start)
	p.stats.Reads++
	p.stats.BytesRead += int64(got)
	if int64(got) < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(p.fifo) >= maxCachedPages {
		delete(p.pages, p.fifo[0])
		p.fifo = p.fifo[1:]
	}
	p.pages[idx] = buf
	p.fifo = append(p.fifo, idx)
	return buf, nil
}
