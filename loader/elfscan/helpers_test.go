package elfscan

import (
	"archive/zip"
	"io"
)

// readMember reads the dynamic-linking facts of a zip member.
func readMember(archive io.ReaderAt, m *zip.File) (*Info, error) {
	f, err := OpenMember(archive, m)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Info()
}

// symbolsOfFile opens path and reads the symbols keep selects.
func symbolsOfFile(path string, keep SymbolFilter) ([]Symbol, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Symbols(keep)
}

// lookupFile opens path and looks names up.
func lookupFile(path string, names ...string) ([]Symbol, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Lookup(names...)
}

// lookupStats looks names up in f and says what it cost.
func lookupStats(f *File, names ...string) ([]Symbol, Stats, error) {
	syms, err := f.Lookup(names...)
	return syms, f.Stats(), err
}
