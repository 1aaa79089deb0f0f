package elfscan

import (
	"errors"
	"io"
)

// pageSize is the unit of reads; the loader itself reads in pages too.
const pageSize = 4096

// maxCachedPages bounds the memory of one read (128 KiB): lookups in a
// large library touch thousands of pages, each few times, and a larger
// cache is filled with fresh buffers at every reading of the table. Every
// worker of a scan holds one read's pages: twice as many cost a scan of
// /usr/lib 5% fewer reads, and megabytes of live heap on 16 processors.
const maxCachedPages = 32

// maxSparePages bounds the page buffers a Pages keeps between reads
// (64 KiB): a walk of references touches tens of pages of strings, and a
// Pages kept per worker must not hold a megabyte each.
const maxSparePages = 32

// maxScratch bounds the buffers of table walks a Pages keeps between reads
// (a walk of references takes two: symbols and version indexes).
const maxScratch, maxScratchSize = 2, 32 << 10

// Pages keeps page buffers from one read for the next (see File.UsePages).
// The zero value is ready to use; a Pages serves one read at a time.
type Pages struct {
	free    [][]byte
	index   map[int64][]byte
	scratch [][]byte // buffers of table walks (symbols, relocations)
	// names are strings read before: the objects of a tree need the same
	// libraries and versions (libc.so.6, GLIBC_2.2.5) over and over.
	names map[string]string
}

// Bounds on the names a Pages keeps: the common ones are met early.
const maxNames, maxNameLen = 4096, 128

// intern is b as a string, the one kept when it was read before.
func (s *Pages) intern(b []byte) string {
	if str, ok := s.names[string(b)]; ok {
		return str
	}
	str := string(b)
	if len(b) <= maxNameLen && len(s.names) < maxNames {
		if s.names == nil {
			s.names = make(map[string]string)
		}
		s.names[str] = str
	}
	return str
}

// PagesPool keeps a few Pages for the workers of a scan. Unlike a
// sync.Pool it survives garbage collections, which a scan of thousands of
// files runs many of: its buffers are allocated once, not once per cycle.
type PagesPool struct{ c chan *Pages }

// NewPagesPool keeps up to n Pages.
func NewPagesPool(n int) *PagesPool { return &PagesPool{c: make(chan *Pages, n)} }

// Get returns a Pages of the pool, or a new one.
func (p *PagesPool) Get() *Pages {
	select {
	case pg := <-p.c:
		return pg
	default:
		return new(Pages)
	}
}

// Put gives pg back; beyond the pool's size it is dropped.
func (p *PagesPool) Put(pg *Pages) {
	select {
	case p.c <- pg:
	default:
	}
}

// pagedReader serves small scattered reads from a few cached pages, so that
// walking strings and version records costs one read per page touched, and
// counts what was read.
type pagedReader struct {
	r     io.ReaderAt
	size  int64
	pages map[int64][]byte
	fifo  []int64
	spare *Pages // where buffers come from and go back to; nil: none
	stats Stats
}

func newPagedReader(r io.ReaderAt, size int64) *pagedReader {
	return &pagedReader{r: r, size: size}
}

// withPages makes the reader take its buffers from spare (nil: none) and
// give them back on release.
func (p *pagedReader) withPages(spare *Pages) *pagedReader {
	p.spare = spare
	if spare != nil && p.pages == nil {
		p.pages, spare.index = spare.index, nil
	}
	return p
}

// release gives the page buffers back; the reader must not be used after.
func (p *pagedReader) release() {
	if p.spare == nil {
		// Kept readers (a symbol table held closed) must not keep pages.
		p.pages, p.fifo = nil, nil
		return
	}
	for _, pg := range p.pages {
		p.spare.put(pg)
	}
	clear(p.pages)
	if p.pages != nil {
		p.spare.index = p.pages
	}
	p.pages, p.fifo = nil, nil
}

func (s *Pages) get() []byte {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b
	}
	return make([]byte, pageSize)
}

func (s *Pages) put(b []byte) {
	if cap(b) >= pageSize && len(s.free) < maxSparePages {
		s.free = append(s.free, b[:pageSize])
	}
}

// buffer returns a buffer of n bytes for a table walk, from p's spare
// buffers when it has a large enough one; giveBack returns it.
func (p *pagedReader) buffer(n uint64) []byte {
	if s := p.spare; s != nil {
		for i, b := range s.scratch {
			if uint64(cap(b)) >= n {
				s.scratch = append(s.scratch[:i], s.scratch[i+1:]...)
				return b[:n]
			}
		}
	}
	if p.spare != nil && n <= maxScratchSize {
		// Sized for the largest walk it may serve next, once given back;
		// a buffer nothing keeps is only as large as asked (a section
		// header table is a few KiB, and read for every object).
		return make([]byte, n, maxScratchSize)
	}
	return make([]byte, n)
}

func (p *pagedReader) giveBack(b []byte) {
	if s := p.spare; s != nil && cap(b) <= maxScratchSize && len(s.scratch) < maxScratch {
		s.scratch = append(s.scratch, b)
	}
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
	var buf []byte
	if p.spare != nil {
		buf = p.spare.get()[:n]
	} else {
		buf = make([]byte, n)
	}
	got, err := p.r.ReadAt(buf, start)
	p.stats.Reads++
	p.stats.BytesRead += int64(got)
	if int64(got) < n {
		if p.spare != nil {
			p.spare.put(buf)
		}
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(p.fifo) >= maxCachedPages {
		old := p.fifo[0]
		if p.spare != nil {
			p.spare.put(p.pages[old])
		}
		delete(p.pages, old)
		p.fifo = p.fifo[1:]
	}
	if p.pages == nil {
		p.pages = make(map[int64][]byte)
	}
	p.pages[idx] = buf
	p.fifo = append(p.fifo, idx)
	return buf, nil
}
