package resolver

import (
	"context"
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// pinFixture is a venv whose package pins nvidia-cudnn-cu13==9.19.0.56,
// whose cuDNN files are gone, while an older cuDNN (9.14) sits in a
// directory of LD_LIBRARY_PATH, as a system toolkit would.
type pinFixture struct {
	python, site, lib, sysDir, prefix string
	llp                               string
}

func venvSite(t *testing.T) (python, site string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	venv := filepath.Join(t.TempDir(), "venv")
	out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput()
	lddtest.Need(t, err == nil, "python3 -m venv failed: %s", out)
	python = filepath.Join(venv, "bin", "python3")
	env, err := pyenv.Discover(context.Background(), python)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range env.SiteDirs {
		if strings.HasPrefix(d, venv) {
			return python, d
		}
	}
	t.Fatalf("no site-packages inside the venv: %v", env.SiteDirs)
	return "", ""
}

// cudnnSonames are what the nvidia-cudnn-cu13 wheel's RECORD lists.
var cudnnSonames = []string{"libcudnn.so.9", "libcudnn_adv.so.9", "libcudnn_cnn.so.9", "libcudnn_engines_precompiled.so.9",
	"libcudnn_engines_runtime_compiled.so.9", "libcudnn_graph.so.9", "libcudnn_heuristic.so.9", "libcudnn_ops.so.9"}

// cudnnLibs are a cuDNN release's files, with links named as NVIDIA's
// archives name them (libcudnn.so.9 → libcudnn.so.9.14.0).
func cudnnLibs(version string) (map[string]elfwrite.Spec, map[string]string) {
	short := strings.Join(strings.Split(version, ".")[:3], ".")
	libs := map[string]elfwrite.Spec{}
	links := map[string]string{}
	for _, n := range cudnnSonames {
		stem := strings.TrimSuffix(n, ".9")
		needed := []string{"libc.so.6"}
		if n != "libcudnn.so.9" {
			needed = append(needed, "libcudnn.so.9")
		}
		libs[stem+"."+short] = elfwrite.Spec{Soname: n, Needed: needed, RunPath: elfwrite.Str("$ORIGIN")}
		links[n] = stem + "." + short
	}
	return libs, links
}

func newPinFixture(t *testing.T, runpath bool) *pinFixture {
	t.Helper()
	f := &pinFixture{}
	f.python, f.site = venvSite(t)
	spec := elfwrite.Spec{Soname: "libgpupkg.so", Needed: []string{"libcudnn.so.9", "libc.so.6"}}
	if runpath {
		spec.RunPath = elfwrite.Str("$ORIGIN/../../nvidia/cudnn/lib")
	} else {
		spec.RPath = elfwrite.Str("$ORIGIN/../../nvidia/cudnn/lib")
	}
	writeDist(t, f.site, "gpupkg", "1.0", []string{"nvidia-cudnn-cu13==9.19.0.56"}, map[string][]byte{
		"gpupkg/__init__.py":      []byte(""),
		"gpupkg/lib/libgpupkg.so": elfBytes(t, spec),
	}, map[string]fs.FileMode{"gpupkg/lib/libgpupkg.so": 0o755})
	wheel := map[string][]byte{}
	for _, n := range cudnnSonames {
		wheel["nvidia/cudnn/lib/"+n] = elfBytes(t, elfwrite.Spec{Soname: n, Needed: []string{"libc.so.6"}})
	}
	writeDist(t, f.site, "nvidia-cudnn-cu13", "9.19.0.56", nil, wheel, nil)
	// The wheel's files are gone; its RECORD still lists them.
	if err := os.RemoveAll(filepath.Join(f.site, "nvidia/cudnn/lib")); err != nil {
		t.Fatal(err)
	}
	f.lib = filepath.Join(f.site, "gpupkg/lib/libgpupkg.so")
	f.sysDir = filepath.Join(t.TempDir(), "system-cudnn")
	libs, links := cudnnLibs("9.14.0.64")
	for name, s := range libs {
		s.Machine = elf.EM_X86_64
		if err := elfwrite.Write(filepath.Join(f.sysDir, name), s); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(f.sysDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	f.llp = f.sysDir
	f.prefix = filepath.Join(t.TempDir(), "prefix")
	return f
}

func cudnnMirror(t *testing.T, versions ...string) (*mirrortest.Mirror, *catalog.Catalog) {
	t.Helper()
	var archives []mirrortest.Archive
	for _, v := range versions {
		libs, links := cudnnLibs(v)
		archives = append(archives, mirrortest.Archive{Component: "cudnn", Product: "cudnn", Version: v, Platform: "linux-x86_64",
			Variant: "cuda13", Libs: libs, Links: links, Machine: elf.EM_X86_64})
	}
	m := mirrortest.Serve(t, archives)
	// Only the mirror's releases: the built-in catalog's cuDNN releases
	// would answer the pin otherwise.
	data, err := os.ReadFile(m.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "https://developer.download.nvidia.com/compute/cudnn/redist/", strings.TrimSuffix(m.URL, "/")+"/")
	cat, err := catalog.Parse([]byte(text), m.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	return m, cat
}

func (f *pinFixture) resolve(t *testing.T, cat *catalog.Catalog, dryRun bool) *Outcome {
	t.Helper()
	fx := &fixture{prefix: f.prefix, catalog: cat}
	opts := fx.options(t, dryRun)
	opts.Verify = false
	opts.Loader = ldso.Options{LDLibraryPath: &f.llp, PreloadSet: true}
	target, err := FindTarget(context.Background(), "gpupkg", TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Resolve(context.Background(), target, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPinnedRestoredWhereRecordSays: the loader takes an older cuDNN from
// LD_LIBRARY_PATH; resolve reports it with both versions, restores 9.19
// (not the newest, 9.27) exactly where the wheel's RECORD puts it, with
// the sub-library that only a dlopen would ask for, and then the real
// loader finds the restored copy first; the sub-libraries it opens at run
// time still come from LD_LIBRARY_PATH, and resolve says so.
func TestPinnedRestoredWhereRecordSays(t *testing.T) {
	f := newPinFixture(t, false)
	before := realLoaderWith(t, f.lib, f.llp)
	if p := before["libcudnn.so.9"]; !strings.HasPrefix(p, f.sysDir) {
		t.Fatalf("the fixture is wrong: ld.so takes libcudnn.so.9 from %q", p)
	}
	_, cat := cudnnMirror(t, "9.14.0.64", "9.19.0.56", "9.27.0.42")
	out := f.resolve(t, cat, false)
	i := slices.IndexFunc(out.Shadowed, func(sh Shadow) bool { return sh.Soname == "libcudnn.so.9" })
	if i < 0 {
		t.Fatalf("shadowed = %+v", out.Shadowed)
	}
	sh := out.Shadowed[i]
	if sh.FoundVersion != "9.14.0" || sh.Owner.Version != "9.19.0.56" || sh.Owner.Dist != "nvidia-cudnn-cu13" || sh.Via != ldso.ViaLDLibraryPath || !sh.Fixable {
		t.Fatalf("shadow = %+v", sh)
	}
	if len(out.Incomplete) != 1 || !strings.Contains(out.Incomplete[0], "nvidia-cudnn-cu13 9.19.0.56 is installed but 8 of its") {
		t.Errorf("incomplete = %q", out.Incomplete)
	}
	onlySubLibrariesLeft(t, out, f.sysDir)
	step := out.Rounds[0].Plan.Steps[0]
	if step.Version != "9.19.0.56" || !strings.Contains(step.Pin, "pinned 9.19.0.56") {
		t.Fatalf("step = %s %s (%s)", step.Component, step.Version, step.Pin)
	}
	want := filepath.Join(f.site, "nvidia/cudnn/lib")
	for _, name := range []string{"libcudnn.so.9", "libcudnn_cnn.so.9"} {
		real, err := filepath.EvalSymlinks(filepath.Join(want, name))
		if err != nil || !strings.Contains(real, "9.19.0") {
			t.Errorf("%s at the RECORD path resolves to %q (%v)", name, real, err)
		}
	}
	after := realLoaderWith(t, f.lib, f.llp)
	if p := after["libcudnn.so.9"]; filepath.Dir(p) != want {
		t.Fatalf("after resolve ld.so takes libcudnn.so.9 from %q, want %s", p, want)
	}
}

// onlySubLibrariesLeft: what a resolve in the pin fixture leaves is the
// cuDNN sub-libraries the restored libcudnn.so.9 opens at run time, which
// dlopen still takes from the older release on LD_LIBRARY_PATH (searched
// before the opener's own DT_RUNPATH, as torch's failing convolution shows
// on the GPU machine): resolve says so, with the entry to remove, and does
// not claim success.
func onlySubLibrariesLeft(t *testing.T, out *Outcome, sysDir string) {
	t.Helper()
	if out.OK || len(out.Unresolved) == 0 {
		t.Fatalf("resolve claims success while the sub-libraries come from %s: %s", sysDir, out.Stopped)
	}
	for _, u := range out.Unresolved {
		if u.Kind != UnresolvedShadowed || u.Soname == "libcudnn.so.9" || !strings.HasPrefix(u.Soname, "libcudnn_") ||
			!strings.Contains(u.Reason, "(9.14.0) via ld_library_path") || !strings.Contains(u.Advice, "opens it at run time: remove "+sysDir+" from LD_LIBRARY_PATH") {
			t.Errorf("unresolved: %+v", u)
		}
	}
}

// TestPinnedShadowByLDLibraryPathBeforeRunpath: with RUNPATH, the older
// copy on LD_LIBRARY_PATH wins even after the restore, as ld.so says;
// resolve says so and how to fix it, and does not claim success.
func TestPinnedShadowByLDLibraryPathBeforeRunpath(t *testing.T) {
	f := newPinFixture(t, true)
	_, cat := cudnnMirror(t, "9.19.0.56")
	out := f.resolve(t, cat, false)
	after := realLoaderWith(t, f.lib, f.llp)
	if p := after["libcudnn.so.9"]; !strings.HasPrefix(p, f.sysDir) {
		t.Fatalf("ld.so takes libcudnn.so.9 from %q; the fixture expects LD_LIBRARY_PATH to win over RUNPATH", p)
	}
	if out.OK {
		t.Fatalf("resolve claims success while ld.so takes the 9.14 copy")
	}
	found := false
	for _, u := range out.Unresolved {
		if u.Soname == "libcudnn.so.9" && u.Kind == UnresolvedShadowed && strings.Contains(u.Advice, "in this shell: unset LD_LIBRARY_PATH") {
			found = true
		}
	}
	if !found {
		t.Fatalf("unresolved = %+v", out.Unresolved)
	}
}

// TestPinnedRefusesOlder: a catalog with only releases below the pin is
// refused, with what it has.
func TestPinnedRefusesOlder(t *testing.T) {
	f := newPinFixture(t, false)
	_, cat := cudnnMirror(t, "9.12.0.46", "9.14.0.64")
	out := f.resolve(t, cat, true)
	if out.OK {
		t.Fatal("a dry run with nothing at the pin is not OK")
	}
	var msg string
	var kind UnresolvedKind
	for _, u := range out.Unresolved {
		if u.Soname == "libcudnn.so.9" {
			msg, kind = u.Reason, u.Kind
		}
	}
	if !strings.Contains(msg, "9.19.0.56") || !strings.Contains(msg, "9.14.0.64, 9.12.0.46") || kind != UnresolvedPinRefused {
		t.Fatalf("refusal = %s %q", kind, msg)
	}
	m, err := cat.WhichPinned("libcudnn.so.9", catalog.Query{Platform: "linux-x86_64", CUDAMajor: 13}, catalog.Pin{Version: "9.19.0.56", By: "x"})
	var pe *catalog.PinError
	if !errors.As(err, &pe) {
		t.Fatalf("WhichPinned = %v, %v", m, err)
	}
}

// TestNotIntoAnotherDistributionsDirectory: of two RPATH directories, the
// existing one belongs to another wheel (nvidia-nvshmem's lib); an
// unowned library goes to the other, created for it.
func TestNotIntoAnotherDistributionsDirectory(t *testing.T) {
	python, site := venvSite(t)
	writeDist(t, site, "gpupkg", "1.0", []string{"nvidia-nvshmem-cu13"}, map[string][]byte{
		"gpupkg/__init__.py": []byte(""),
		"gpupkg/lib/libgpupkg.so": elfBytes(t, elfwrite.Spec{Soname: "libgpupkg.so", Needed: []string{"libcudnn.so.9", "libc.so.6"},
			RPath: elfwrite.Str("$ORIGIN/../../nvidia/nvshmem/lib:$ORIGIN/../../gpupkg_libs")}),
	}, map[string]fs.FileMode{"gpupkg/lib/libgpupkg.so": 0o755})
	writeDist(t, site, "nvidia-nvshmem-cu13", "3.4.5", nil, map[string][]byte{
		"nvidia/nvshmem/lib/libnvshmem_host.so.3": elfBytes(t, elfwrite.Spec{Soname: "libnvshmem_host.so.3", Needed: []string{"libc.so.6"}}),
	}, nil)
	_, cat := cudnnMirror(t, "9.19.0.56")
	f := &pinFixture{python: python, site: site, llp: "", prefix: filepath.Join(t.TempDir(), "prefix")}
	out := f.resolve(t, cat, false)
	if !out.OK {
		t.Fatalf("resolve: %s %+v", out.Stopped, out.Unresolved)
	}
	pl := out.Rounds[0].Decisions[0].Placements
	want := physical(filepath.Join(site, "gpupkg_libs"))
	if len(pl) != 1 || pl[0].HostDir != want {
		t.Fatalf("placements = %+v, want %s", pl, want)
	}
	if _, err := os.Lstat(filepath.Join(site, "nvidia/nvshmem/lib/libcudnn.so.9")); err == nil {
		t.Fatal("linked into nvidia-nvshmem's directory")
	}
	got := realLoaderWith(t, filepath.Join(site, "gpupkg/lib/libgpupkg.so"), "")
	if filepath.Dir(got["libcudnn.so.9"]) != want {
		t.Fatalf("ld.so takes libcudnn.so.9 from %q", got["libcudnn.so.9"])
	}
}

// realLoaderWith runs the host's ld.so on file with LD_LIBRARY_PATH set to
// llp (and nothing else of this environment) and returns where it found
// each name.
func realLoaderWith(t *testing.T, file, llp string) map[string]string {
	t.Helper()
	ld, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so")
	var env []string
	if llp != "" {
		env = []string{"LD_LIBRARY_PATH=" + llp}
	}
	out, err := lddtest.List(context.Background(), ld, file, env)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range out.Lines {
		got[l.Name] = l.Path
	}
	return got
}

// realSite unpacks the real dist-info folders of the GPU machine's
// environment (torch 2.11.0+cu130, jax, cupy, cuda-toolkit, nvidia-*) into
// a site-packages directory.
func realSite(t *testing.T) string {
	t.Helper()
	tgz := filepath.Join(lddtest.SharedDir(t), "corpus/torch/torch-2.11.0-cu130-x86_64-distinfo.tgz")
	_, err := os.Stat(tgz)
	lddtest.Need(t, err == nil, "no %s", tgz)
	site := t.TempDir()
	if out, err := exec.Command("tar", "xzf", tgz, "-C", site).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	return site
}

// TestRequirementsOfRealDistributions: torch's pins reach the nvidia-*
// wheels through cuda-toolkit's extras, and the JAX plugin's through its
// own with-cuda extra, as pip installed them.
func TestRequirementsOfRealDistributions(t *testing.T) {
	site := realSite(t)
	meta := func(glob string) string {
		m, _ := filepath.Glob(filepath.Join(site, glob, "METADATA"))
		if len(m) != 1 {
			t.Fatalf("%s: %v", glob, m)
		}
		data, err := os.ReadFile(m[0])
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	// Expected values read from the METADATA text itself.
	pinOf := func(text, name string) string {
		for _, line := range strings.Split(text, "\n") {
			if rest, ok := strings.CutPrefix(line, "Requires-Dist: "+name+"=="); ok {
				v, _, _ := strings.Cut(rest, ";")
				return strings.TrimSuffix(strings.TrimSpace(v), ".*")
			}
		}
		return ""
	}
	torchMeta, toolkitMeta := meta("torch-*.dist-info"), meta("cuda_toolkit-*.dist-info")
	torch, err := FindTarget(context.Background(), "torch", TargetOptions{SiteDir: site})
	if err != nil {
		t.Fatal(err)
	}
	if want := pinOf(torchMeta, "nvidia-cudnn-cu13"); want == "" || torch.Pins["nvidia-cudnn-cu13"].Exact != want {
		t.Errorf("cudnn pin = %+v, METADATA says %q", torch.Pins["nvidia-cudnn-cu13"], want)
	}
	if want := pinOf(toolkitMeta, "nvidia-cublas"); want == "" || !strings.HasPrefix(torch.Pins["nvidia-cublas"].Requirement, "nvidia-cublas==") {
		t.Errorf("cublas pin through cuda-toolkit[cublas] = %+v, METADATA says %q", torch.Pins["nvidia-cublas"], want)
	}
	names := map[string]bool{}
	for _, d := range torch.Requires {
		names[pymeta.NormalizeName(d.Name)] = true
	}
	for _, n := range []string{"nvidia-cublas", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cudnn-cu13", "nvidia-cusparselt-cu13", "nvidia-nvjitlink"} {
		if !names[n] {
			t.Errorf("torch's requirements lack %s: %v", n, names)
		}
	}
	if names["nvidia-npp"] {
		t.Errorf("nvidia-npp is only in cuda-toolkit's [npp] and [all] extras, which torch does not ask for")
	}
	lay := newLayout(torch, nil, "")
	if o := lay.Owner("libcudnn.so.9"); o == nil || o.Dist != "nvidia-cudnn-cu13" || !strings.HasSuffix(o.Path, "nvidia/cudnn/lib/libcudnn.so.9") {
		t.Errorf("libcudnn.so.9 owner = %+v", o)
	}
	if o := lay.Owner("libnvrtc-builtins.so.13.0"); o == nil || !strings.HasSuffix(o.Path, "nvidia/cu13/lib/libnvrtc-builtins.so.13.0") {
		t.Errorf("libnvrtc-builtins owner = %+v", o)
	}
	if got := lay.CUDAMajor(); got != 13 {
		t.Errorf("CUDA major from the wheels' names = %d", got)
	}
	plugin, err := FindTarget(context.Background(), "jax-cuda13-plugin", TargetOptions{SiteDir: site})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range plugin.Requires {
		found = found || pymeta.NormalizeName(d.Name) == "nvidia-cudnn-cu13"
	}
	if !found {
		t.Errorf("the JAX plugin's [with-cuda] requirements are not followed")
	}
}

// TestPinnedFamilyNeverMixed: the pinned cuDNN's archive lacks two engine
// libraries that a newer release has; the six it has come from the pinned
// release, the two are refused, and nothing of the newer release is planned.
func TestPinnedFamilyNeverMixed(t *testing.T) {
	f := newPinFixture(t, false)
	var archives []mirrortest.Archive
	for _, v := range []string{"9.19.0.56", "9.27.0.42"} {
		libs, links := cudnnLibs(v)
		if v == "9.19.0.56" {
			for _, gone := range []string{"libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9"} {
				delete(libs, links[gone])
				delete(links, gone)
			}
		}
		archives = append(archives, mirrortest.Archive{Component: "cudnn", Product: "cudnn", Version: v, Platform: "linux-x86_64",
			Variant: "cuda13", Libs: libs, Links: links, Machine: elf.EM_X86_64})
	}
	m := mirrortest.Serve(t, archives)
	data, err := os.ReadFile(m.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse([]byte(strings.ReplaceAll(string(data), "https://developer.download.nvidia.com/compute/cudnn/redist/", m.URL)), m.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	out := f.resolve(t, cat, true)
	for _, st := range out.Rounds[0].Plan.Steps {
		if st.Version != "9.19.0.56" {
			t.Errorf("planned %s %s for %v", st.Component, st.Version, st.Provides)
		}
	}
	var refused []string
	for _, u := range out.Unresolved {
		if u.Kind == UnresolvedPinRefused && strings.Contains(u.Reason, "never mixed") {
			refused = append(refused, u.Soname)
		}
	}
	slices.Sort(refused)
	if !slices.Equal(refused, []string{"libcudnn_engines_precompiled.so.9", "libcudnn_heuristic.so.9"}) {
		t.Errorf("refused %v; unresolved %+v", refused, out.Unresolved)
	}
}
