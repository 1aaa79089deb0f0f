package fetch

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzExtract feeds arbitrary bytes to the extractor (pure-Go decoders) and
// checks that it never panics, never writes outside the directory it was
// given, leaves nothing behind when it fails, and on success leaves only
// links that stay inside the component directory.
//
//	go test -fuzz=FuzzExtract -fuzztime=5m ./fetch/
func FuzzExtract(f *testing.F) {
	seed := func(b []byte) { f.Add(b) }
	good := tarBytes(f, redistMembers(2000))
	seed(good)
	seed(xzBytes(f, good))
	seed(gzBytes(f, good))
	seed(zipBytes(f, []member{file("nvidia/cu13/lib/libx.so.13", "x"), dir("nvidia/cu13/include/")}))
	seed(tarBytes(f, []member{file("lib/a", "a"), symlink("lib/b", "a"), hardlink("lib/c", "lib/a")}))
	for _, h := range hostileArchives("/OUTSIDE") {
		if h.zip {
			seed(zipBytes(f, h.ms))
		} else {
			seed(tarBytes(f, h.ms))
		}
	}
	lim := Limits{MaxBytes: 1 << 20, MaxEntries: 500}.withDefaults()
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
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
		res, err := extractFile(context.Background(), src, out, lim, decoder{}, src)
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
	})
}

func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}
