package resolver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/indextest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/python/pypi"
)

// cudnnWheel is nvidia-cudnn-cu13 at version for tags, with the libraries
// the pin fixture's RECORD lists (the same bytes, so the same hashes).
func cudnnWheel(t *testing.T, version, tags string) indextest.Wheel {
	files := map[string][]byte{"nvidia/cudnn/__init__.py": nil}
	for _, n := range cudnnSonames {
		files["nvidia/cudnn/lib/"+n] = elfBytes(t, elfwrite.Spec{Soname: n, Needed: []string{"libc.so.6"}})
	}
	return indextest.Wheel{Project: "nvidia-cudnn-cu13", Version: version, Tags: tags, Files: files}
}

func (f *pinFixture) resolveWheels(t *testing.T, cat *catalog.Catalog, dryRun bool, source Source, ix *indextest.Index) (*Outcome, error) {
	t.Helper()
	fx := &fixture{prefix: f.prefix, catalog: cat}
	opts := fx.options(t, dryRun)
	opts.Verify = false
	opts.Loader = ldso.Options{LDLibraryPath: &f.llp, PreloadSet: true}
	opts.Source = source
	if ix != nil {
		c, err := pypi.NewClient(pypi.Options{Indexes: []string{ix.URL}})
		if err != nil {
			t.Fatal(err)
		}
		opts.Index = c
	}
	target, err := FindTarget(context.Background(), "gpupkg", TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	return Resolve(context.Background(), target, opts)
}

// TestPinnedWheelFromIndex: the package pins nvidia-cudnn-cu13==9.19.0.56,
// whose files are gone, while an older cuDNN sits on LD_LIBRARY_PATH. With
// an index that has the pinned wheel (among a newer release, one for
// aarch64 and one for a glibc newer than any), auto takes exactly that
// wheel for this host, not NVIDIA's archive of the same release; every
// library its RECORD lists comes back at the RECORD path with the wheel's
// bytes; and the real ld.so then takes the restored copy. Over JSON (PEP
// 691, sizes given) and HTML (PEP 503, sizes asked for).
func TestPinnedWheelFromIndex(t *testing.T) {
	for _, html := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "html"}[html], func(t *testing.T) {
			f := newPinFixture(t, false)
			want := cudnnWheel(t, "9.19.0.56", "py3-none-manylinux_2_27_x86_64")
			ix := indextest.Serve(t, want,
				cudnnWheel(t, "9.19.0.56", "py3-none-manylinux_2_27_aarch64"),
				indextest.Wheel{Project: "nvidia-cudnn-cu13", Version: "9.19.0.56", Tags: "py3-none-manylinux_2_99_x86_64", Files: map[string][]byte{"nvidia/cudnn/lib/libcudnn.so.9": []byte("not this one")}},
				cudnnWheel(t, "9.27.0.42", "py3-none-manylinux_2_27_x86_64"))
			ix.HTML = html
			m, cat := cudnnMirror(t, "9.19.0.56")
			out, err := f.resolveWheels(t, cat, false, SourceAuto, ix)
			if err != nil {
				t.Fatal(err)
			}
			if !out.OK {
				t.Fatalf("resolve: %s, unresolved %+v", out.Stopped, out.Unresolved)
			}
			steps := out.Rounds[0].Plan.Steps
			if len(steps) != 1 {
				t.Fatalf("steps = %+v", steps)
			}
			st := steps[0]
			data := ix.File(want.Filename())
			sum := sha256.Sum256(data)
			if st.Source != SourcePyPI || st.Project != "nvidia-cudnn-cu13" || st.Version != "9.19.0.56" || st.Filename != want.Filename() ||
				st.Index != ix.URL || st.SHA256 != hex.EncodeToString(sum[:]) || st.Size != int64(len(data)) {
				t.Fatalf("step = %+v, want the wheel %s (%d bytes) from %s", st, want.Filename(), len(data), ix.URL)
			}
			if st.Key().Component != "nvidia-cudnn-cu13" || st.Key().Platform != "manylinux_2_27_x86_64" {
				t.Errorf("store key %v", st.Key())
			}
			if m.Total() != 0 || ix.Downloads() != 1 {
				t.Errorf("%d requests to NVIDIA's mirror, %d downloads from the index; want 0 and 1", m.Total(), ix.Downloads())
			}
			dir := filepath.Join(f.site, "nvidia/cudnn/lib")
			for _, n := range cudnnSonames {
				if !slices.Contains(st.Provides, n) {
					t.Errorf("%s, which RECORD lists, is not restored: provides %v", n, st.Provides)
				}
				got, err := os.ReadFile(filepath.Join(dir, n))
				if err != nil || !bytes.Equal(got, want.Files["nvidia/cudnn/lib/"+n]) {
					t.Errorf("%s at the RECORD path: %v, or not the wheel's file", n, err)
				}
				real, _ := filepath.EvalSymlinks(filepath.Join(dir, n))
				if !strings.HasPrefix(real, physical(f.prefix)) {
					t.Errorf("%s resolves to %s, outside the store", n, real)
				}
			}
			if p := realLoaderWith(t, f.lib, f.llp)["libcudnn.so.9"]; filepath.Dir(p) != dir {
				t.Fatalf("after resolve ld.so takes libcudnn.so.9 from %q, want %s", p, dir)
			}
		})
	}
}

// TestPinnedWheelSHA256Mismatch: an index whose sha256 is not the file's
// is refused, and nothing is placed or kept in the store.
func TestPinnedWheelSHA256Mismatch(t *testing.T) {
	f := newPinFixture(t, false)
	w := cudnnWheel(t, "9.19.0.56", "py3-none-manylinux_2_27_x86_64")
	ix := indextest.Serve(t, w)
	wrong := sha256.Sum256([]byte("another file"))
	ix.StateSHA256(w.Filename(), hex.EncodeToString(wrong[:]))
	_, cat := cudnnMirror(t, "9.19.0.56")
	_, err := f.resolveWheels(t, cat, false, SourcePyPI, ix)
	if err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("resolve with a wrong sha256: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(f.site, "nvidia/cudnn/lib/libcudnn.so.9")); err == nil {
		t.Fatal("a library was placed from an unverified wheel")
	}
	wh, _ := pypi.ParseWheel(w.Filename())
	fx := &fixture{prefix: f.prefix, catalog: cat}
	if _, ok, _ := fx.options(t, true).Prefix.Store().Lookup(wh.Key()); ok {
		t.Fatal("the unverified wheel is in the store")
	}
}

// TestPinnedWheelMissingOnIndex: the index has another version only. auto
// takes NVIDIA's archive at the pin instead, and the loader finds it where
// RECORD says; pypi reports it unresolved with what the index has.
func TestPinnedWheelMissingOnIndex(t *testing.T) {
	f := newPinFixture(t, false)
	ix := indextest.Serve(t, cudnnWheel(t, "9.14.0.64", "py3-none-manylinux_2_27_x86_64"))
	m, cat := cudnnMirror(t, "9.19.0.56")

	out, err := f.resolveWheels(t, cat, true, SourcePyPI, ix)
	if err != nil {
		t.Fatal(err)
	}
	if out.OK || len(out.Rounds[0].Plan.Steps) != 0 {
		t.Fatalf("pypi without the pinned wheel: ok=%v steps %+v", out.OK, out.Rounds[0].Plan.Steps)
	}
	var reason string
	var kind UnresolvedKind
	for _, u := range out.Unresolved {
		if u.Soname == "libcudnn.so.9" {
			reason, kind = u.Reason, u.Kind
		}
	}
	if !strings.Contains(reason, "9.19.0.56") || !strings.Contains(reason, "it has: 9.14.0.64") || kind != UnresolvedNoWheel {
		t.Fatalf("unresolved = %s %q", kind, reason)
	}
	if m.Total() != 0 || ix.Downloads() != 0 {
		t.Fatalf("a dry run downloaded")
	}

	out, err = f.resolveWheels(t, cat, false, SourceAuto, ix)
	if err != nil {
		t.Fatal(err)
	}
	onlySubLibrariesLeft(t, out, f.sysDir)
	st := out.Rounds[0].Plan.Steps[0]
	if st.Source != SourceNVIDIA || st.Component != "cudnn" || st.Version != "9.19.0.56" || m.Total() == 0 || ix.Downloads() != 0 {
		t.Fatalf("auto took %s %s %s; %d mirror requests, %d index downloads", st.Source, st.Component, st.Version, m.Total(), ix.Downloads())
	}
	dir := filepath.Join(f.site, "nvidia/cudnn/lib")
	if p := realLoaderWith(t, f.lib, f.llp)["libcudnn.so.9"]; filepath.Dir(p) != dir {
		t.Fatalf("ld.so takes libcudnn.so.9 from %q, want %s", p, dir)
	}
}

// TestSourcePyPIWithoutIndex: wheels only, and no index: refused before
// anything is scanned.
func TestSourcePyPIWithoutIndex(t *testing.T) {
	f := newPinFixture(t, false)
	_, cat := cudnnMirror(t, "9.19.0.56")
	if _, err := f.resolveWheels(t, cat, true, SourcePyPI, nil); !errors.Is(err, ErrNoIndex) {
		t.Fatalf("err = %v", err)
	}
	if _, err := f.resolveWheels(t, cat, true, "conda", nil); err == nil || !strings.Contains(err.Error(), "conda") {
		t.Fatalf("unknown source: %v", err)
	}
}
