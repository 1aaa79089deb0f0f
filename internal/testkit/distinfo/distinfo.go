// Package distinfo reads, for tests, the dist-info folders that the shared corpus keeps in gzip'ed tar archives.
package distinfo

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Folder is one dist-info folder ("torch-2.11.0.dist-info") and its
// regular files, by their path inside it ("RECORD", "licenses/LICENSE").
type Folder struct {
	Dir   string
	Files map[string][]byte
}

// maxFile bounds the bytes read of one file: a RECORD runs to a megabyte.
const maxFile = 64 << 20

// Read returns the dist-info folders at the top of the archive tgz,
// sorted by name. Links, other folders and names that climb out are
// passed over.
func Read(t testing.TB, tgz string) []Folder {
	t.Helper()
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", tgz, err)
	}
	byDir := map[string]*Folder{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", tgz, err)
		}
		name := strings.TrimPrefix(path.Clean(h.Name), "./")
		dir, rest, ok := strings.Cut(name, "/")
		if !ok || h.Typeflag != tar.TypeReg || !strings.HasSuffix(dir, ".dist-info") || rest == ".." || strings.HasPrefix(rest, "../") {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxFile))
		if err != nil {
			t.Fatalf("%s: %s: %v", tgz, name, err)
		}
		if byDir[dir] == nil {
			byDir[dir] = &Folder{Dir: dir, Files: map[string][]byte{}}
		}
		byDir[dir].Files[rest] = data
	}
	out := make([]Folder, 0, len(byDir))
	for _, d := range byDir {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b Folder) int { return strings.Compare(a.Dir, b.Dir) })
	return out
}

// Unpack writes the dist-info folders of tgz (as Read gives them) into
// dir, as an installer leaves them in a site directory.
func Unpack(t testing.TB, tgz, dir string) {
	t.Helper()
	for _, f := range Read(t, tgz) {
		for name, data := range f.Files {
			p := filepath.Join(dir, f.Dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
