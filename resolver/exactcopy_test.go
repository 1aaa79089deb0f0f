package resolver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/shquote"
	"github.com/cudadeps/cudadeps/internal/testkit/torchenv"
)

// analyzeWith is check's analysis of target in the fixture, the built-in
// catalog's, with llp as LD_LIBRARY_PATH.
func (f *absentFixture) analyzeWith(t *testing.T, target, llp string) *Analysis {
	t.Helper()
	f.useBaseCatalog(t)
	tg, err := FindTarget(context.Background(), target, TargetOptions{Python: f.python})
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

// putCopy writes the fixture's own file of soname (under its lib
// directory libDir) into dir as release names it, libcudnn_graph.so.9.14.0,
// with the soname linked to it, as NVIDIA's packages lay out a system copy;
// a copy put there before is replaced.
func (f *absentFixture) putCopy(t *testing.T, dir, libDir, soname, release string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.site, libDir, soname))
	if err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, soname+"*"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	stem, _, _ := strings.Cut(soname, ".so")
	real := stem + ".so." + release
	if err := os.WriteFile(filepath.Join(dir, real), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, soname)); err != nil {
		t.Fatal(err)
	}
}

// putCuDNN puts a copy of each of the fixture's cuDNN libraries into dir
// at release, as a system's cuDNN lays them out (every sub-library there).
func (f *absentFixture) putCuDNN(t *testing.T, dir, release string) {
	t.Helper()
	libDir := filepath.Join("nvidia", "cudnn", "lib")
	names, err := filepath.Glob(filepath.Join(f.site, libDir, "libcudnn*.so.9"))
	if err != nil || len(names) < 4 {
		t.Fatalf("the fixture's cuDNN: %v %v", names, err)
	}
	for _, n := range names {
		f.putCopy(t, dir, libDir, filepath.Base(n), release)
	}
}

// cudnnTooOld is how torch's convolution fails on an older cuDNN.
const cudnnTooOld = "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 19, 0) but found runtime version (9, 14, 0)."

// resolveWhileRunFails resolves torch in the fixture with opts, its run
// check a command that prints line and fails, as torch's probe would;
// proxies that lead nowhere keep any download but from 127.0.0.1 here.
func (f *absentFixture) resolveWhileRunFails(t *testing.T, opts Options, line string) *Outcome {
	t.Helper()
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:9")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:9")
	opts.Check = "echo " + shquote.Quote(line) + "; exit 1"
	tg, err := FindTarget(context.Background(), "torch", TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Resolve(context.Background(), tg, opts)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return out
}

// wrongCopies are the analysis' wrong_copy problems, by soname.
func wrongCopies(a *Analysis) map[string]string {
	out := map[string]string{}
	for _, p := range a.Problems() {
		if p.Kind == ProblemWrongCopy {
			out[p.Subject] = p.Detail
		}
	}
	return out
}

// TestSameReleaseOnLDLibraryPath: the environment intact, and a CUDA
// toolkit's library directory on LD_LIBRARY_PATH (module load cuda) with
// nvJitLink, which the loader then takes first for the libraries that
// reach it through DT_RUNPATH. At exactly the release nvidia-nvjitlink is
// installed at, that copy is no wrong copy: the analysis check gives has no
// problem and a note; at another release it is a wrong copy.
func TestSameReleaseOnLDLibraryPath(t *testing.T) {
	f := intactFixture(t)
	infos, err := filepath.Glob(filepath.Join(f.site, "nvidia_nvjitlink-*.dist-info"))
	if err != nil || len(infos) != 1 {
		t.Fatalf("nvidia-nvjitlink's .dist-info: %v %v", infos, err)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(infos[0]), "nvidia_nvjitlink-"), ".dist-info")
	toolkit := t.TempDir()
	llp := f.driver + ":" + toolkit
	libDir := filepath.Join("nvidia", "cu13", "lib")

	f.putCopy(t, toolkit, libDir, "libnvJitLink.so.13", version)
	loaded := realLoaderWith(t, filepath.Join(f.site, libDir, "libcusparse.so.12"), llp)
	if p := loaded["libnvJitLink.so.13"]; filepath.Dir(p) != toolkit {
		t.Fatalf("the fixture is wrong: ld.so takes libnvJitLink.so.13 from %q", p)
	}
	a := f.analyzeWith(t, "torch", llp)
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

	f.putCopy(t, toolkit, libDir, "libnvJitLink.so.13", "13.0.39")
	a = f.analyzeWith(t, "torch", llp)
	if _, ok := wrongCopies(a)["libnvJitLink.so.13"]; !ok || len(a.Notes()) != 0 {
		t.Errorf("another release on LD_LIBRARY_PATH: problems %+v, notes %q", a.Problems(), a.Notes())
	}
}

// TestOlderSubLibraryOnLDLibraryPath: the environment intact, and a
// directory with an older cuDNN's sub-libraries on LD_LIBRARY_PATH (the
// system's cuDNN 9.14 where torch pins 9.19). libcudnn.so.9 opens them at
// run time by soname, and dlopen searches LD_LIBRARY_PATH before its
// DT_RUNPATH: torch's conv2d then fails on the GPU machine with "PyTorch
// was compiled against (9, 19, 0) but found runtime version (9, 14, 0)".
// The analysis must call those opens wrong copies.
func TestOlderSubLibraryOnLDLibraryPath(t *testing.T) {
	for _, release := range []string{"9.14.0", "9.19.0"} {
		t.Run(release, func(t *testing.T) { subLibrariesOnLDLibraryPath(t, release) })
	}
}

// subLibrariesOnLDLibraryPath is TestOlderSubLibraryOnLDLibraryPath with
// the copies at release. At 9.19.0, the installed release, they are wrong
// copies still: cuDNN 9.19.0 is built for CUDA 12 and for CUDA 13 under the
// same sonames, and a file's name does not say which build it is.
func subLibrariesOnLDLibraryPath(t *testing.T, release string) {
	f := intactFixture(t)
	old := t.TempDir()
	f.putCuDNN(t, old, release)
	a := f.analyzeWith(t, "torch", f.driver+":"+old)
	wrong := wrongCopies(a)
	for _, soname := range []string{"libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_engines_precompiled.so.9"} {
		d := wrong[soname]
		if !strings.Contains(d, filepath.Join(old, soname)) || !strings.Contains(d, "("+release+")") {
			t.Errorf("%s: %q", soname, d)
		}
		if shared := strings.Contains(d, "builds for several CUDA majors share this soname"); shared != (release == "9.19.0") {
			t.Errorf("%s: said the builds share the soname: %v (%q)", soname, shared, d)
		}
	}
	if _, ok := wrong["libcudnn.so.9"]; ok {
		t.Errorf("libcudnn.so.9, which torch's RPATH finds first, called a wrong copy: %q", wrong["libcudnn.so.9"])
	}
	if !slices.ContainsFunc(a.Outcome.Unresolved, func(u Unresolved) bool {
		return u.Kind == UnresolvedShadowed && u.Soname == "libcudnn_graph.so.9" && strings.Contains(u.Advice, "remove "+old+" from LD_LIBRARY_PATH")
	}) {
		t.Errorf("no advice to take %s off LD_LIBRARY_PATH: %+v", old, a.Outcome.Unresolved)
	}
}

// TestRunFailureOfWrongSubLibraries: the older cuDNN's sub-libraries on
// LD_LIBRARY_PATH, and the run failing as torch's does there ("found
// runtime version (9, 14, 0)", blamed on libcudnn.so.9, whose own copy
// loads). No other cuDNN may be fetched for it (on the GPU machine resolve
// planned NVIDIA's 9.27 archive into pip's nvidia/cudnn/lib): what placement
// cannot win is reported with the entry to remove, and nothing changes.
func TestRunFailureOfWrongSubLibraries(t *testing.T) {
	f := intactFixture(t)
	old := t.TempDir()
	f.putCuDNN(t, old, "9.14.0")
	before := snapshot(t, f.site)
	f.useBaseCatalog(t)
	opts := f.options(t, false)
	llp := f.driver + ":" + old
	opts.Loader.LDLibraryPath = &llp
	out := f.resolveWhileRunFails(t, opts, cudnnTooOld)
	if out.OK || len(out.Rounds) != 1 || out.Verify == nil || !slices.Contains(out.Verify.Blamed(), "libcudnn.so.9") {
		t.Errorf("ok %v, %d round(s), stopped %q, verify %+v", out.OK, len(out.Rounds), out.Stopped, out.Verify)
	}
	if !slices.ContainsFunc(out.Unresolved, func(u Unresolved) bool {
		return u.Kind == UnresolvedShadowed && u.Soname == "libcudnn_graph.so.9" && strings.Contains(u.Advice, "remove "+old+" from LD_LIBRARY_PATH")
	}) {
		t.Errorf("unresolved %+v", out.Unresolved)
	}
	if after := snapshot(t, f.site); after != before {
		t.Errorf("resolve changed the tree:\n%s", diffLines(before, after))
	}
}

// TestRunMissAtTheOwnersRelease: the environment intact, and the run
// failing to open libcudnn_graph.so.9, which nvidia-cudnn-cu13 9.19.0.56
// installs (a dlopen by name that misses its directory). The copy the next
// round brings for it comes at that release, from the mirror that has it,
// not the newest the catalog knows (9.27): a sub-library of another
// release beside the cuDNN 9.19 core fails at run time.
func TestRunMissAtTheOwnersRelease(t *testing.T) {
	f := intactFixture(t, "nvidia-cudnn-cu13")
	m := f.serveArchives(t, false)
	opts := f.options(t, false)
	opts.Source = SourceNVIDIA
	out := f.resolveWhileRunFails(t, opts, "OSError: libcudnn_graph.so.9: cannot open shared object file: No such file or directory")
	var steps []string
	for _, r := range out.Rounds {
		if r.Plan != nil {
			for _, st := range r.Plan.Steps {
				steps = append(steps, st.Component+" "+st.Version)
			}
		}
	}
	// A placement the dlopen still misses gets one more try through
	// LD_LIBRARY_PATH: the same archive again.
	if len(steps) == 0 || slices.ContainsFunc(steps, func(s string) bool { return s != "cudnn 9.19.0.56" }) || m.Total() == 0 {
		t.Errorf("steps %q, %d mirror requests", steps, m.Total())
	}
	if _, err := undo(t, context.Background(), f.prefix, "torch"); err != nil {
		t.Fatal(err)
	}
}

// TestPinnedCompanionAbsent: a distribution the target pins to one release
// that is not NVIDIA's, uninstalled as pip does: the JAX plugin without
// jax-cuda13-pjrt (JAX then runs on the CPU), torch without triton. Its
// own files load whole, so nothing but the metadata says so: check's
// analysis names the distribution with the pip command, and resolve does
// not call the target whole. Ranges (torch's sympy>=1.13.3, absent from
// the fixture too) are no such companion.
func TestPinnedCompanionAbsent(t *testing.T) {
	f := intactFixture(t)
	for target, companion := range map[string]string{"jax-cuda13-plugin": "jax-cuda13-pjrt", "torch": "triton"} {
		if a := f.analyzeWith(t, target, f.driver); slices.ContainsFunc(a.Problems(), func(p Problem) bool { return p.Kind == ProblemDist }) {
			t.Errorf("%s intact: %+v", target, a.Problems())
		}
		infos, _ := filepath.Glob(filepath.Join(f.site, strings.ReplaceAll(companion, "-", "_")+"-*.dist-info"))
		if len(infos) != 1 {
			t.Fatalf("%s's .dist-info: %v", companion, infos)
		}
		version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(infos[0]), strings.ReplaceAll(companion, "-", "_")+"-"), ".dist-info")
		torchenv.Uninstall(t, f.site, companion)
		a := f.analyzeWith(t, target, f.driver)
		var dists []string
		for _, p := range a.Problems() {
			if p.Kind == ProblemDist {
				dists = append(dists, p.Subject)
				if want := "pip install '" + companion + "==" + version + "'"; p.Subject == companion && !strings.Contains(p.Advice, want) {
					t.Errorf("%s: advice %q, want %q", target, p.Advice, want)
				}
			}
		}
		if !slices.Equal(dists, []string{companion}) {
			t.Errorf("%s without %s: distribution problems %q", target, companion, dists)
		}
		if a.Outcome.OK {
			t.Errorf("%s without %s: resolve's dry run calls it whole", target, companion)
		}
	}
}
