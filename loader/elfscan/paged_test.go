package elfscan

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// TestPagesReusedAcrossReads reads a file through more pages than are
// cached, twice over, with buffers handed from read to read: every byte
// comes back as written, whichever buffer served it.
func TestPagesReusedAcrossReads(t *testing.T) {
	data := make([]byte, (maxCachedPages+40)*pageSize+123)
	for i := range data {
		data[i] = byte(i*7 + i/pageSize)
	}
	var spare Pages
	for round := 0; round < 3; round++ {
		pr := newPagedReader(bytes.NewReader(data), int64(len(data))).withPages(&spare)
		for _, off := range []int64{0, 5000, int64(len(data)) - 10, pageSize * 3, pageSize*maxCachedPages + 17, 1, 123456, int64(len(data)) - 123} {
			for _, n := range []int{1, 16, 300, pageSize + 5} {
				if off+int64(n) > int64(len(data)) {
					continue
				}
				got := make([]byte, n)
				if _, err := pr.ReadAt(got, off); err != nil {
					t.Fatalf("round %d: ReadAt(%d, %d): %v", round, n, off, err)
				}
				if !bytes.Equal(got, data[off:off+int64(n)]) {
					t.Fatalf("round %d: ReadAt(%d, %d) returned other bytes", round, n, off)
				}
			}
		}
		// Touch every page so the oldest are evicted and their buffers reused.
		b := make([]byte, 1)
		for off := int64(0); off < int64(len(data)); off += pageSize {
			if _, err := pr.ReadAt(b, off); err != nil || b[0] != data[off] {
				t.Fatalf("round %d: page at %d: %v", round, off, err)
			}
		}
		pr.release()
		if len(spare.free) == 0 || len(spare.free) > maxSparePages {
			t.Fatalf("round %d: %d spare buffers after release", round, len(spare.free))
		}
	}
}

// TestUsePagesReadsTheSame reads objects one after another with one
// set of page buffers and compares each result with a plain Read.
func TestUsePagesReadsTheSame(t *testing.T) {
	var files []string
	dir := t.TempDir()
	for i, spec := range []elfwrite.Spec{
		{Soname: "liba.so.1", Needed: []string{"libc.so.6", "libm.so.6"}, RunPath: elfwrite.Str("$ORIGIN")},
		{Soname: "libb.so", VersionDefs: []string{"B_1", "B_2"}, VersionNeeds: []elfwrite.VersionNeed{{File: "libc.so.6", Versions: []string{"GLIBC_2.2.5", "GLIBC_2.34"}}}},
		{Needed: []string{"libz.so.1"}, RPath: elfwrite.Str("/opt/x:/opt/y"), NoSectionHeaders: true},
	} {
		p := filepath.Join(dir, string(rune('a'+i))+".so")
		if err := elfwrite.Write(p, spec); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	_ = filepath.WalkDir(hostLibDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && len(files) < 400 {
			files = append(files, p)
		}
		return nil
	})
	var pages Pages
	for _, p := range files {
		want, werr := ReadInfo(p)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		ef := NewFile(f, st.Size(), p)
		ef.UsePages(&pages)
		got, gerr := ef.Info()
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: with reused pages %+v, %v; alone %+v, %v", p, got, gerr, want, werr)
		}
		// References walk the symbol and relocation tables through the
		// spare buffers, of every size one after another.
		gotRefs, gerr := ef.References()
		f.Close()
		wantRefs, werr := referencesOf(p)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(gotRefs, wantRefs) {
			t.Errorf("%s: references with reused pages differ (%v; alone %v)", p, gerr, werr)
		}
	}
}

func referencesOf(path string) ([]Reference, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.References()
}
