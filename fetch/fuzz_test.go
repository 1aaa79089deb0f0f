package fetch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/fuzzseed"
)

// extractSeeds are FuzzExtract's seed corpus (testdata/fuzz/FuzzExtract):
// each compressed format and a wheel, each holding one small file. They are
// a few hundred bytes: the fuzzer minimises every input that finds new
// coverage by trying to drop each subset of its bytes, which costs the
// square of its length in runs.
func extractSeeds(t testing.TB) map[string][]byte {
	one := bareTar(t, []member{file("t/a", "a")})
	return map[string][]byte{
		"one.tar.xz":  xzBytes(t, one),
		"one.tar.gz":  gzBytes(t, one),
		"one.tar.zst": zstdBytes(t, one),
		"one.whl":     zipBytes(t, []member{file("a", "a")}),
	}
}

// entrySeeds are FuzzExtractEntries' seed corpus: the archives of the
// tests (an NVIDIA layout, links, every hostile one) in the short form
// entriesArchive reads.
func entrySeeds() map[string][]byte {
	seeds := map[string][]byte{
		"redist": describe(false, redistMembers(1)),
		"links":  describe(false, []member{file("lib/a", "a"), symlink("lib/b", "a"), hardlink("lib/c", "lib/a")}),
		"wheel":  describe(true, []member{file("nvidia/cu13/lib/libx.so.13", "x"), dir("nvidia/cu13/include/")}),
	}
	for i, h := range hostileArchives("/OUTSIDE") {
		seeds[fmt.Sprintf("hostile-%02d", i)] = describe(h.zip, h.ms)
	}
	return seeds
}

// TestFuzzSeeds keeps the committed seed corpora what extractSeeds and
// entrySeeds make (CUDADEPS_UPDATE_SEEDS=1 rewrites them).
func TestFuzzSeeds(t *testing.T) {
	fuzzseed.Check(t, "FuzzExtract", extractSeeds(t))
	fuzzseed.Check(t, "FuzzExtractEntries", entrySeeds())
}

// bareTar is a tar without its end-of-archive blocks (1 KiB of zeros the
// reader does without).
func bareTar(t testing.TB, ms []member) []byte {
	b := tarBytes(t, ms)
	return b[:len(b)-1024]
}

// entry kinds of the short form, by tar type.
var entryKinds = map[byte]byte{'f': tar.TypeReg, 'd': tar.TypeDir, 'l': tar.TypeSymlink, 'h': tar.TypeLink, 'c': tar.TypeChar, 'b': tar.TypeBlock, 'p': tar.TypeFifo}

// describe writes members in the short form: "zip" on the first line for
// a zip archive, then one entry a line, "KIND NAME" or "KIND NAME>TARGET"
// (KIND f file, d directory, l symbolic link, h hard link, c, b, p
// devices and FIFOs); a file holds one byte.
func describe(zipped bool, ms []member) []byte {
	var b strings.Builder
	if zipped {
		b.WriteString("zip\n")
	}
	for _, m := range ms {
		kind := byte('f')
		for k, typ := range entryKinds {
			if typ == m.typ && m.typ != 0 {
				kind = k
			}
		}
		b.WriteByte(kind)
		b.WriteString(" " + m.name)
		if m.link != "" {
			b.WriteString(">" + m.link)
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// entriesArchive builds the tar or zip archive a short form describes;
// nil when archive/tar or archive/zip cannot write it.
func entriesArchive(desc []byte) []byte {
	lines := strings.Split(string(desc), "\n")
	zipped := len(lines) > 0 && lines[0] == "zip"
	if zipped {
		lines = lines[1:]
	}
	var buf bytes.Buffer
	tw, zw := tar.NewWriter(&buf), zip.NewWriter(&buf)
	for _, line := range lines {
		if len(line) < 3 || line[1] != ' ' {
			continue
		}
		typ, ok := entryKinds[line[0]]
		if !ok {
			continue
		}
		name, link, _ := strings.Cut(line[2:], ">")
		var err error
		if zipped {
			err = zipEntry(zw, name, typ, link)
		} else {
			err = tarEntry(tw, name, typ, link)
		}
		if err != nil {
			return nil
		}
	}
	closer := io.Closer(tw)
	if zipped {
		closer = zw
	}
	if closer.Close() != nil {
		return nil
	}
	return buf.Bytes()
}

func tarEntry(tw *tar.Writer, name string, typ byte, link string) error {
	h := &tar.Header{Name: name, Typeflag: typ, Linkname: link, Mode: 0o644}
	if typ == tar.TypeReg {
		h.Size = 1
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if typ == tar.TypeReg {
		_, err := tw.Write([]byte{'x'})
		return err
	}
	return nil
}

func zipEntry(zw *zip.Writer, name string, typ byte, link string) error {
	h := &zip.FileHeader{Name: name, Method: zip.Store}
	body := []byte{'x'}
	switch typ {
	case tar.TypeDir:
		h.SetMode(fs.ModeDir | 0o755)
		body = nil
	case tar.TypeSymlink:
		h.SetMode(fs.ModeSymlink | 0o777)
		body = []byte(link)
	default:
		h.SetMode(0o644)
	}
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}

// FuzzExtract feeds arbitrary bytes to the extractor (pure-Go decoders).
// Its seeds are in testdata/fuzz/FuzzExtract; docs/testing.md says how to
// run it.
func FuzzExtract(f *testing.F) {
	base := fuzzDir(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkExtract(t, base, data) })
}

// FuzzExtractEntries fuzzes the entries of archives rather than their
// bytes: names, link targets and kinds in the short form entriesArchive
// reads, where the rules against hostile archives are, in inputs small
// enough to minimise in a moment.
func FuzzExtractEntries(f *testing.F) {
	base := fuzzDir(f)
	f.Fuzz(func(t *testing.T, desc []byte) {
		if len(desc) > 4096 {
			return
		}
		if data := entriesArchive(desc); data != nil {
			checkExtract(t, base, data)
		}
	})
}

// fuzzLimits keep each run short (every entry is a file made and removed).
var fuzzLimits = Limits{MaxBytes: 64 << 10, MaxEntries: 64, MaxNameBytes: 64 << 10}.withDefaults()

// checkExtract extracts data and checks that the extractor never panics,
// never writes outside the directory it was given, fails with one line,
// and on success leaves only links that stay inside the component
// directory.
func checkExtract(t *testing.T, base string, data []byte) {
	root, err := os.MkdirTemp(base, "")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	src := filepath.Join(root, "archive")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Deep enough that any "../" chain the fuzzer keeps short lands
	// inside root, where the walk below sees it.
	out := filepath.Join(root, "d1", "d2", "d3", "d4", "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := extractFile(context.Background(), src, out, fuzzLimits, decoder{}, src)
	filepath.WalkDir(root, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil || p == root || p == src || strings.HasPrefix(out, p+string(filepath.Separator)) {
			return nil
		}
		if p != out && !strings.HasPrefix(p, out+string(filepath.Separator)) {
			t.Fatalf("written outside the extraction directory: %s", p)
		}
		return nil
	})
	if err != nil {
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("multi-line error: %q", err)
		}
		return
	}
	comp := filepath.Join(out, filepath.FromSlash(res.root))
	filepath.WalkDir(out, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, _ := os.Readlink(p)
		if !within(comp, filepath.Join(filepath.Dir(p), target)) {
			t.Fatalf("symlink %s -> %s leaves %s", p, target, comp)
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			realComp, _ := filepath.EvalSymlinks(comp)
			if !within(realComp, real) {
				t.Fatalf("symlink %s resolves to %s, outside %s", p, real, comp)
			}
		}
		return nil
	})
}

// fuzzDir is where a fuzz target's runs work: in memory (/dev/shm) where
// there is one, else in the test's temporary directory.
func fuzzDir(f *testing.F) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "cudadeps-fuzz-"); err == nil {
			f.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return f.TempDir()
}

func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}
