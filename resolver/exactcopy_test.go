package resolver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
)

// TestSameReleaseOnLDLibraryPath: the environment intact, and a CUDA
// toolkit's library directory on LD_LIBRARY_PATH (module load cuda) with
// nvJitLink, which the loader then takes first for the libraries that
// reach it through DT_RUNPATH. At exactly the release nvidia-nvjitlink is
// installed at, that copy is no wrong copy: the analysis check gives has no
// problem and a note; at another release it is a wrong copy.
func TestSameReleaseOnLDLibraryPath(t *testing.T) {
	f := intactFixture(t)
	base, err := catalog.Load(context.Background(), catalog.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.catalog = base
	infos, err := filepath.Glob(filepath.Join(f.site, "nvidia_nvjitlink-*.dist-info"))
	if err != nil || len(infos) != 1 {
		t.Fatalf("nvidia-nvjitlink's .dist-info: %v %v", infos, err)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(infos[0]), "nvidia_nvjitlink-"), ".dist-info")
	own := filepath.Join(f.site, "nvidia", "cu13", "lib", "libnvJitLink.so.13")
	data, err := os.ReadFile(own)
	if err != nil {
		t.Fatal(err)
	}
	toolkit := t.TempDir()
	put := func(release string) {
		t.Helper()
		old, _ := filepath.Glob(filepath.Join(toolkit, "libnvJitLink.so*"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		real := "libnvJitLink.so." + release
		if err := os.WriteFile(filepath.Join(toolkit, real), data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(toolkit, "libnvJitLink.so.13")); err != nil {
			t.Fatal(err)
		}
	}
	llp := f.driver + ":" + toolkit
	analyze := func() *Analysis {
		t.Helper()
		tg, err := FindTarget(context.Background(), "torch", TargetOptions{Python: f.python})
		if err != nil {
			t.Fatal(err)
		}
		opts := f.options(t, true)
		opts.Loader.LDLibraryPath = &llp
		a, err := Analyze(context.Background(), tg, opts)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	wrong := func(a *Analysis) bool {
		return slices.ContainsFunc(a.Problems(), func(p Problem) bool {
			return p.Kind == ProblemWrongCopy && p.Subject == "libnvJitLink.so.13"
		})
	}

	put(version)
	loaded := realLoaderWith(t, filepath.Join(f.site, "nvidia", "cu13", "lib", "libcusparse.so.12"), llp)
	if p := loaded["libnvJitLink.so.13"]; filepath.Dir(p) != toolkit {
		t.Fatalf("the fixture is wrong: ld.so takes libnvJitLink.so.13 from %q", p)
	}
	a := analyze()
	// The fixture's distributions hold their ELF files only: files
	// missing from the non-NVIDIA ones are its own, and no other problem.
	for _, p := range a.Problems() {
		if p.Kind != ProblemFiles {
			t.Errorf("the same release on LD_LIBRARY_PATH: %+v", p)
		}
	}
	notes := a.Notes()
	if len(notes) != 1 || !strings.Contains(notes[0], filepath.Join(toolkit, "libnvJitLink.so.13")) || !strings.Contains(notes[0], version) {
		t.Errorf("notes: %q", notes)
	}

	put("13.0.39")
	a = analyze()
	if !wrong(a) || len(a.Notes()) != 0 {
		t.Errorf("another release on LD_LIBRARY_PATH: problems %+v, notes %q", a.Problems(), a.Notes())
	}
}
