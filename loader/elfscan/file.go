package elfscan

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/eintr"
)

// File is one ELF object opened for reading; its methods read what each
// question needs (the dynamic-linking facts, the symbols, the references,
// the hash table, the dlopen notes) and nothing more. A File serves one
// goroutine at a time.
type File struct {
	r      io.ReaderAt
	size   int64
	name   string
	closer io.Closer
	pages  *Pages
	// pr reads for every question; scanners are the headers parsed, with
	// and without the section headers, kept for the next question.
	pr       *pagedReader
	scanners [2]*scanner
}

// Open opens the regular file at path; Close closes it. The file is opened
// and read with plain system calls: os.Open offers every file to the
// runtime's network poller, which refuses regular files, at the cost of
// five more system calls per file, and a scan opens thousands. O_NONBLOCK:
// a FIFO named where an object was expected must not stop the caller.
func Open(path string) (*File, error) {
	fd, err := eintr.Retry(func() (int, error) {
		return syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if _, err := eintr.Retry(func() (int, error) { return 0, syscall.Fstat(fd, &st) }); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, &FormatError{Path: path, Msg: "not a regular file"}
	}
	return &File{r: FDReader(fd), size: st.Size, name: path, closer: fdCloser(fd)}, nil
}

// FDReader reads an open file descriptor at offsets (pread).
type FDReader int

// ReadAt reads len(p) bytes at off, or fewer with io.EOF at the end.
func (r FDReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := eintr.Retry(func() (int, error) { return syscall.Pread(int(r), p[n:], off+int64(n)) })
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// fdCloser closes a descriptor Open opened.
type fdCloser int

func (c fdCloser) Close() error { return syscall.Close(int(c)) }

// NewFile reads an object of the given size through r; name is used in
// errors only. Close does not close r.
func NewFile(r io.ReaderAt, size int64, name string) *File {
	return &File{r: r, size: size, name: name}
}

// OpenMember opens a member of a zip archive (a wheel) without unpacking
// it. A stored member is read in place through archive, the io.ReaderAt the
// zip.Reader was opened on. A compressed member is read as a stream: reads
// move forward through the decompressor, and a read behind the current
// position reopens it, so memory stays bounded (a few cached pages)
// whatever the member's size.
func OpenMember(archive io.ReaderAt, m *zip.File) (*File, error) {
	size := int64(m.UncompressedSize64)
	if m.UncompressedSize64 > 1<<40 {
		return nil, &FormatError{Path: m.Name, Msg: "implausible uncompressed size"}
	}
	if m.Method == zip.Store && archive != nil {
		off, err := m.DataOffset()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		return NewFile(io.NewSectionReader(archive, off, size), size, m.Name), nil
	}
	s := &streamAt{open: m.Open}
	return &File{r: s, size: size, name: m.Name, closer: s}, nil
}

// UsePages makes the reads of f take their page buffers from p and give
// them back when each read ends, so that reading many files one after
// another does not allocate and clear every page anew. p must serve f
// alone until f's last read.
func (f *File) UsePages(p *Pages) {
	f.pages = p
	if f.pr != nil {
		f.pr.spare = p
	}
}

// Stats counts what the reads of f cost so far.
func (f *File) Stats() Stats {
	if f.pr == nil {
		return Stats{}
	}
	return f.pr.stats
}

// reader is f's paged reader.
func (f *File) reader() *pagedReader {
	if f.pr == nil {
		f.pr = newPagedReader(f.r, f.size).withPages(f.pages)
	}
	return f.pr
}

// scanner parses f's headers once for each way of reading them.
func (f *File) scanner(skipSections bool) (*scanner, error) {
	i := 0
	if skipSections {
		i = 1
	}
	if f.scanners[i] != nil {
		return f.scanners[i], nil
	}
	s, err := startScanner(f.reader(), f.size, f.name, skipSections)
	if err != nil {
		return nil, err
	}
	f.scanners[i] = s
	return s, nil
}

// Close releases the file.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	err := f.closer.Close()
	f.closer = nil
	return err
}

// Info reads the dynamic-linking facts of the object.
//
// The object is read as the loader sees it, without its section header
// table: it sits at the end of the file, away from everything else read, and
// nothing read depends on it, so parsing it cost two more page reads and
// most of the allocations of a read (the results are the same, as
// TestWithoutSectionHeaders checks).
func (f *File) Info() (*Info, error) {
	return withScanner(f, true, (*scanner).scan)
}

// ReadInfo opens the ELF file at path and reads its dynamic-linking facts
// (Open, then Info).
func ReadInfo(path string) (*Info, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Info()
}

// Symbols reads the dynamic symbols that keep selects (nil: all of them).
// It reads what the loader reads: the dynamic segment, then the symbol
// table, the names of the symbols in the string table, and the version
// records (DT_VERSYM, DT_VERDEF, DT_VERNEED); the number of symbols comes
// from DT_HASH, the .dynsym section header, or DT_GNU_HASH, in that order
// of preference. The rest of the file is never read. Symbol 0, the null
// symbol, is left out. An object without a dynamic symbol table has none.
func (f *File) Symbols(keep SymbolFilter) ([]Symbol, error) {
	return f.symbols(keep, false)
}

func (f *File) symbols(keep SymbolFilter, skipSections bool) ([]Symbol, error) {
	return withScanner(f, skipSections, func(s *scanner) ([]Symbol, error) { return s.symbols(keep) })
}

// Lookup finds the definitions of the named symbols through DT_GNU_HASH or
// DT_HASH, as ld.so does: the cost is a few hash buckets and chain entries
// per name, whatever the size of the symbol table. Every version of a name
// is returned (memcpy@GLIBC_2.2.5 and memcpy@@GLIBC_2.14), in symbol table
// order per name; undefined symbols are not definitions and are left out.
// An object without a hash table is read whole.
func (f *File) Lookup(names ...string) ([]Symbol, error) {
	return withScanner(f, false, func(s *scanner) ([]Symbol, error) { return s.lookup(names) })
}

// References reads the references of the object: its undefined dynamic
// symbols of binding STB_GLOBAL or STB_WEAK and default or protected
// visibility that a relocation names, the ones ld.so looks up (local and
// hidden references bind within the object). The symbol table and the
// version indexes are read in chunks and only the names of undefined
// symbols are read from the string table, through a few cached pages, so
// memory stays bounded whatever the size of the object.
func (f *File) References() ([]Reference, error) {
	var out []Reference
	err := f.EachReference(nil, func(r *Reference) { out = append(out, *r) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EachReference calls fn with each reference References lists, in its
// order, without keeping them: r is valid during the call alone. name,
// when not nil, makes each name from its bytes, valid during that call
// alone: a caller that keeps every name once gives back the one it keeps,
// and the thousands of copies References makes are not made.
func (f *File) EachReference(name func([]byte) string, fn func(r *Reference)) error {
	_, err := withScanner(f, true, func(s *scanner) (struct{}, error) { return struct{}{}, s.references(name, fn) })
	return err
}

// SymbolTable opens the dynamic symbol table for lookups through its hash
// table; the table reads through f until its Close. An object without a
// symbol table or a hash table has a table that defines nothing.
func (f *File) SymbolTable() (t *SymbolTable, err error) {
	return withScanner(f, true, func(s *scanner) (*SymbolTable, error) { return s.symbolTable(f.reader()) })
}

// DlopenNotes reads the dlopen notes of the object: from its SHT_NOTE
// sections, or from its PT_NOTE segments when it has no section headers.
// An object without them has none.
func (f *File) DlopenNotes() ([]DlopenNote, error) {
	return withScanner(f, true, (*scanner).dlopenNotes)
}

// Stats counts what reads cost, for benchmarks and the speed targets.
type Stats struct {
	BytesRead int64
	Reads     int
}

// withScanner checks the ELF magic of f, prepares a scanner over it and
// runs fn, counting what was read.
func withScanner[T any](f *File, skipSections bool, fn func(*scanner) (T, error)) (out T, err error) {
	defer func() {
		// debug/elf and our own walk are bounds-checked; this is a last line of
		// defence so that a hostile file can never crash a scan of a whole tree.
		if p := recover(); p != nil {
			var zero T
			out, err = zero, &FormatError{Path: f.name, Msg: fmt.Sprintf("unreadable structure (%v)", p)}
		}
		// The page buffers go back after each question; the parsed
		// headers stay for the next.
		f.reader().release()
	}()
	s, err := f.scanner(skipSections)
	if err != nil {
		return out, err
	}
	return fn(s)
}

// startScanner checks the ELF magic and prepares a scanner.
func startScanner(pr *pagedReader, size int64, name string, skipSections bool) (*scanner, error) {
	var magic [4]byte
	if n, _ := pr.ReadAt(magic[:], 0); n < 4 || !bytes.Equal(magic[:], []byte(elf.ELFMAG)) {
		return nil, notELF(name)
	}
	return newScanner(pr, size, name, skipSections)
}
