package resolver

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/indextest"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/internal/testkit/torchenv"
	"github.com/cudadeps/cudadeps/python/declared"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pypi"
)

// absentFixture is a venv holding the real torch 2.11.0+cu130 environment's
// metadata with skeleton libraries, from which every nvidia-* distribution
// was uninstalled as pip does (cuda-toolkit stays); packed holds what they
// were, to be served as wheels or NVIDIA archives.
type absentFixture struct {
	fixture
	packed []torchenv.Packed
	// driver is a directory with the driver's libcuda.so.1, as the host's
	// NVIDIA driver would put it on the loader's path.
	driver string
}

func newAbsentFixture(t *testing.T) *absentFixture {
	t.Helper()
	var names []string
	for _, n := range torchenv.NVIDIA() {
		if n != "nvidia-ml-py" {
			names = append(names, n)
		}
	}
	f := intactFixture(t, names...)
	torchenv.Uninstall(t, f.site, torchenv.NVIDIA()...)
	return f
}

// options are the fixture's resolve options, with the driver's directory
// on LD_LIBRARY_PATH.
func (f *absentFixture) options(t *testing.T, dryRun bool) Options {
	t.Helper()
	opts := f.fixture.options(t, dryRun)
	opts.Loader.LDLibraryPath = &f.driver
	return opts
}

// serveArchives serves the packed distributions as NVIDIA archives of the
// same releases and layers a catalog of them over the built-in one (with
// alone, the catalog is the mirror's only: no other archive exists).
func (f *absentFixture) serveArchives(t *testing.T, alone bool) *mirrortest.Mirror {
	t.Helper()
	var archives []mirrortest.Archive
	for _, p := range f.packed {
		if a, ok := p.Archive(t, "linux-x86_64"); ok {
			archives = append(archives, a)
		}
	}
	m := mirrortest.Serve(t, archives)
	data, err := os.ReadFile(m.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, a := range archives {
		text = strings.ReplaceAll(text, "https://developer.download.nvidia.com/compute/"+a.Product+"/redist/", strings.TrimSuffix(m.URL, "/")+"/")
	}
	layer, err := catalog.Parse([]byte(text), m.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	if alone {
		f.catalog = layer
		return m
	}
	base, err := catalog.Load(context.Background(), catalog.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f.catalog, err = catalog.Layer(base, layer); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *absentFixture) resolve(t *testing.T, target string, source Source, dryRun bool) *Outcome {
	t.Helper()
	opts := f.options(t, dryRun)
	opts.Verify = false
	opts.Source = source
	tg, err := FindTarget(context.Background(), target, TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Resolve(context.Background(), tg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// With --source nvidia, every absent distribution that NVIDIA publishes
// archives of comes back at torch's pins, each file at the path its wheel's
// RECORD gives; NCCL and NVSHMEM, which have no archive, are named with the
// wheel to take, and the resolve does not claim success.
func TestAbsentDistributionsFromArchives(t *testing.T) {
	f := newAbsentFixture(t)
	m := f.serveArchives(t, false)
	dry := f.resolve(t, "torch", SourceNVIDIA, true)
	if dry.Distributions == nil {
		t.Fatal("no declared closure in the outcome")
	}
	for _, d := range dry.Distributions.Dists {
		if d.Name != "cuda-toolkit" && d.State != declared.Absent {
			t.Errorf("%s: state %s before the resolve", d.Name, d.State)
		}
	}
	var planned []string
	for _, st := range dry.Rounds[0].Plan.Steps {
		if st.Restore == nil {
			t.Errorf("step %s %s restores no distribution", st.Component, st.Version)
			continue
		}
		planned = append(planned, st.Restore.Dist+" "+st.Component+" "+st.Version)
	}
	slices.Sort(planned)
	want := []string{
		"nvidia-cublas libcublas 13.1.0.3", "nvidia-cuda-cupti cuda_cupti 13.0.85", "nvidia-cuda-nvrtc cuda_nvrtc 13.0.88",
		"nvidia-cuda-runtime cuda_cudart 13.0.96", "nvidia-cudnn-cu13 cudnn 9.19.0.56", "nvidia-cufft libcufft 12.0.0.61",
		"nvidia-cufile libcufile 1.15.1.6", "nvidia-curand libcurand 10.4.0.35", "nvidia-cusolver libcusolver 12.0.4.66",
		"nvidia-cusparse libcusparse 12.6.3.3", "nvidia-cusparselt-cu13 libcusparse_lt 0.8.0.4", "nvidia-nvjitlink libnvjitlink 13.0.88",
		"nvidia-nvtx cuda_nvtx 13.0.85",
	}
	if !slices.Equal(planned, want) {
		t.Errorf("planned:\n%s\nwant:\n%s", strings.Join(planned, "\n"), strings.Join(want, "\n"))
	}
	out := f.resolve(t, "torch", SourceNVIDIA, false)
	if out.OK {
		t.Fatal("resolve claims success without NCCL and NVSHMEM")
	}
	var named []string
	for _, u := range out.Unresolved {
		if u.Kind == UnresolvedDistribution {
			named = append(named, u.Soname)
			if !strings.Contains(u.Reason, "NVIDIA publishes no archive") || !strings.Contains(u.Reason, "==") {
				t.Errorf("%s: %s", u.Soname, u.Reason)
			}
		}
	}
	slices.Sort(named)
	if !slices.Equal(named, []string{"nvidia-nccl-cu13", "nvidia-nvshmem-cu13"}) {
		t.Errorf("unresolved distributions: %v (%+v)", named, out.Unresolved)
	}
	for _, u := range out.Unresolved {
		if u.Soname == "nvidia-nvshmem-cu13" && !strings.Contains(u.Reason, "nvidia-nvshmem-cu13==3.4.5") {
			t.Errorf("NVSHMEM: %s", u.Reason)
		}
	}
	for _, rel := range []string{"nvidia/cu13/lib/libcublasLt.so.13", "nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9",
		"nvidia/cusparselt/lib/libcusparseLt.so.0", "nvidia/cu13/lib/libnvrtc-builtins.so.13.0"} {
		if _, err := os.Stat(filepath.Join(f.site, rel)); err != nil {
			t.Errorf("%s was not restored at its RECORD path: %v", rel, err)
		}
	}
	if m.Total() == 0 {
		t.Error("the mirror saw no request")
	}
	// The real loader finds torch's CUDA libraries where they were put,
	// but for NCCL and NVSHMEM.
	got := realLoaderWith(t, filepath.Join(f.site, "torch/lib/libtorch_cuda.so"), f.driver)
	for name, p := range got {
		if strings.HasPrefix(name, "libnccl") || strings.HasPrefix(name, "libnvshmem") {
			continue
		}
		if p == "" && (strings.HasPrefix(name, "libcu") || strings.HasPrefix(name, "libnv")) {
			t.Errorf("ld.so does not find %s", name)
		}
	}
}

// serveWheels serves the packed distributions as their wheels (and their
// METADATA beside them, PEP 658) on a 127.0.0.1 index.
func (f *absentFixture) serveWheels(t *testing.T, leave ...string) *indextest.Index {
	t.Helper()
	var wheels []indextest.Wheel
	for _, p := range f.packed {
		if !slices.Contains(leave, p.Name) {
			wheels = append(wheels, p.Wheel())
		}
	}
	ix := indextest.Serve(t, wheels...)
	ix.CoreMetadata = true
	return ix
}

// useBaseCatalog gives the fixture the built-in catalog when it has none.
func (f *absentFixture) useBaseCatalog(t *testing.T) {
	t.Helper()
	if f.catalog == nil {
		base, err := catalog.Load(context.Background(), catalog.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f.catalog = base
	}
}

// resolveWhole resolves torch from the index and wants it whole, with
// dist intact after.
func (f *absentFixture) resolveWhole(t *testing.T, ix *indextest.Index, dist string) *Outcome {
	t.Helper()
	out := f.resolveFromIndex(t, "torch", SourceAuto, ix, false)
	if !out.OK {
		t.Fatalf("resolve: %s; unresolved %+v", out.Stopped, out.Unresolved)
	}
	if d := out.DistributionsAfter.Find(dist); d == nil || d.State != declared.Intact {
		t.Errorf("after: %s", distStates(out))
	}
	return out
}

// installFromIndex resolves torch with --source pypi, wants it whole and
// every declared distribution intact after, and gives the first round's
// steps.
func (f *absentFixture) installFromIndex(t *testing.T, ix *indextest.Index) (*Outcome, []*Step) {
	t.Helper()
	out := f.resolveFromIndex(t, "torch", SourcePyPI, ix, false)
	if !out.OK {
		t.Fatalf("resolve: %s; unresolved %+v; notes %q", out.Stopped, out.Unresolved, out.Notes)
	}
	for _, d := range out.DistributionsAfter.Dists {
		if d.State != declared.Intact {
			t.Errorf("after the resolve %s is %s (%s)", d.Name, d.State, d.Detail)
		}
	}
	return out, out.Rounds[0].Plan.Steps
}

func (f *absentFixture) resolveFromIndex(t *testing.T, target string, source Source, ix *indextest.Index, dryRun bool) *Outcome {
	t.Helper()
	f.useBaseCatalog(t)
	opts := f.options(t, dryRun)
	opts.Verify = false
	opts.Source = source
	cl, err := pypi.NewClient(pypi.Options{Indexes: []string{ix.URL}})
	if err != nil {
		t.Fatal(err)
	}
	opts.Index = cl
	tg, err := FindTarget(context.Background(), target, TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Resolve(context.Background(), tg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pip runs the host's pip on the fixture's interpreter (pip --python).
func (f *absentFixture) pip(t *testing.T, args ...string) (string, error) {
	t.Helper()
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	if out, err := exec.Command(py, "-m", "pip", "--version").CombinedOutput(); err != nil {
		lddtest.Need(t, false, "pip is not installed for python3: %s", out)
	}
	cmd := exec.Command(py, append([]string{"-m", "pip", "--python", f.python, "--disable-pip-version-check", "--no-input"}, args...)...)
	cmd.Env = append(os.Environ(), "PIP_CONFIG_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// With --source pypi, every absent distribution comes back as an installed
// distribution from the exact pinned wheel: files at their RECORD paths,
// a .dist-info whose INSTALLER names cudadeps, pip check clean; undo
// restores the tree byte for byte.
func TestAbsentDistributionsFromIndex(t *testing.T) {
	f := newAbsentFixture(t)
	ix := f.serveWheels(t)
	before := snapshot(t, f.site)
	out, steps := f.installFromIndex(t, ix)
	var installed []string
	for _, st := range steps {
		if st.Restore == nil || st.Restore.Mode != RestoreInstall {
			t.Errorf("step %s: %+v", st.Filename, st.Restore)
			continue
		}
		installed = append(installed, st.Restore.Dist+" "+st.Restore.Version)
	}
	slices.Sort(installed)
	want := []string{"nvidia-cublas 13.1.0.3", "nvidia-cuda-cupti 13.0.85", "nvidia-cuda-nvrtc 13.0.88", "nvidia-cuda-runtime 13.0.96",
		"nvidia-cudnn-cu13 9.19.0.56", "nvidia-cufft 12.0.0.61", "nvidia-cufile 1.15.1.6", "nvidia-curand 10.4.0.35",
		"nvidia-cusolver 12.0.4.66", "nvidia-cusparse 12.6.3.3", "nvidia-cusparselt-cu13 0.8.0", "nvidia-nccl-cu13 2.28.9",
		"nvidia-nvjitlink 13.0.88", "nvidia-nvshmem-cu13 3.4.5", "nvidia-nvtx 13.0.85"}
	if !slices.Equal(installed, want) {
		t.Errorf("installed:\n%s\nwant:\n%s", strings.Join(installed, "\n"), strings.Join(want, "\n"))
	}
	if len(out.Activation.Distributions) != len(want) || len(out.Activation.InPlace) != 0 {
		t.Errorf("activation: distributions %q, libraries linked into %q", out.Activation.Distributions, out.Activation.InPlace)
	}
	for _, d := range out.DistributionsAfter.Dists {
		if d.Name != "cuda-toolkit" && d.Installer != Installer {
			t.Errorf("%s: INSTALLER %q", d.Name, d.Installer)
		}
	}
	got := realLoaderWith(t, filepath.Join(f.site, "torch/lib/libtorch_cuda.so"), f.driver)
	for name, p := range got {
		if p == "" {
			t.Errorf("ld.so does not find %s", name)
		}
	}
	f.restoredFromIndex(t, ix, before)
}

// restoredFromIndex checks what follows a resolve that installed the
// declared distributions from the index: pip check names none of them (the
// fixture lacks the environment's pure Python dependencies, numpy...: pip
// check may name those), a second resolve has nothing to do and downloads
// nothing, and undo gives back the tree as before (a snapshot).
func (f *absentFixture) restoredFromIndex(t *testing.T, ix *indextest.Index, before string) {
	t.Helper()
	msg, _ := f.pip(t, "check")
	for _, line := range strings.Split(msg, "\n") {
		if strings.Contains(line, "nvidia") || strings.Contains(line, "cuda-toolkit") {
			t.Errorf("pip check: %s", line)
		}
	}
	n := ix.Downloads()
	again := f.resolveFromIndex(t, "torch", SourcePyPI, ix, false)
	if !again.OK || len(again.Rounds) != 1 || ix.Downloads() != n {
		t.Errorf("second resolve: ok %v, %d rounds, %d downloads", again.OK, len(again.Rounds), ix.Downloads()-n)
	}
	if _, err := undo(t, context.Background(), f.prefix, "torch"); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, f.site); after != before {
		t.Errorf("undo left the tree changed:\n%s", diffLines(before, after))
	}
}

// diffLines lists the lines only one of two snapshots has.
func diffLines(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range la {
		if !slices.Contains(lb, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range lb {
		if !slices.Contains(la, l) {
			out = append(out, "+ "+l)
		}
	}
	if len(out) > 40 {
		out = append(out[:40], fmt.Sprintf("... and %d more", len(out)-40))
	}
	return strings.Join(out, "\n")
}

// oldCopies puts older releases of cuDNN and cuBLAS, and cuSPARSELt at
// exactly the pinned release, in a directory of LD_LIBRARY_PATH, named as
// NVIDIA's packages name them (libcudnn.so.9 → libcudnn.so.9.14.0): the lib
// directory of a conda environment that holds CUDA packages.
func (f *absentFixture) oldCopies(t *testing.T) string {
	t.Helper()
	env := t.TempDir()
	dir := filepath.Join(env, "lib")
	for _, d := range []string{dir, filepath.Join(env, "conda-meta")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for soname, real := range map[string]string{
		"libcudnn.so.9": "libcudnn.so.9.14.0", "libcublas.so.13": "libcublas.so.13.0.0.19", "libcublasLt.so.13": "libcublasLt.so.13.0.0.19",
		"libcusparseLt.so.0": "libcusparseLt.so.0.8.0.4",
	} {
		if err := elfwrite.Write(filepath.Join(dir, real), elfwrite.Spec{Soname: soname, Machine: elf.EM_X86_64, Needed: []string{"libc.so.6"}}); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(dir, soname)); err != nil {
			t.Fatal(err)
		}
	}
	f.driver += ":" + dir
	return dir
}

// TestAbsentWithOlderCopiesVisible: every nvidia-* distribution absent,
// older copies of cuDNN and cuBLAS on LD_LIBRARY_PATH, cuSPARSELt there at
// exactly its pin. --source auto takes the exact wheels from the index, and
// cuDNN, which the index lacks, from NVIDIA's archive of the same release;
// the pinned cuSPARSELt copy is accepted and said so. torch's RPATH then
// wins over LD_LIBRARY_PATH, as ld.so says, with the old copies still
// visible.
func TestAbsentWithOlderCopiesVisible(t *testing.T) {
	f := newAbsentFixture(t)
	old := f.oldCopies(t)
	ix := f.serveWheels(t, "nvidia-cudnn-cu13", "nvidia-cusparselt-cu13")
	var keep []torchenv.Packed
	for _, p := range f.packed {
		if p.Name == "nvidia-cudnn-cu13" {
			keep = append(keep, p)
		}
	}
	f.packed = keep
	f.serveArchives(t, true)
	before := realLoaderWith(t, filepath.Join(f.site, "torch/lib/libtorch_cuda.so"), f.driver)
	if p := before["libcudnn.so.9"]; filepath.Dir(p) != old {
		t.Fatalf("the fixture is wrong: ld.so takes libcudnn.so.9 from %q", p)
	}
	dry := f.resolveFromIndex(t, "torch", SourceAuto, ix, true)
	shadowed := map[string]string{}
	for _, sh := range dry.Shadowed {
		shadowed[sh.Soname] = sh.FoundVersion
		if sh.Exact != (sh.Soname == "libcusparseLt.so.0") {
			t.Errorf("%s %s: exact %v", sh.Soname, sh.FoundVersion, sh.Exact)
		}
		if sh.Conda != filepath.Dir(old) || !strings.Contains(sh.String(), "conda environment") {
			t.Errorf("%s: not named as a conda package: %s", sh.Soname, sh.String())
		}
	}
	if shadowed["libcudnn.so.9"] != "9.14.0" || shadowed["libcublas.so.13"] != "13.0.0.19" {
		t.Errorf("wrong copies reported: %v", shadowed)
	}
	out := f.resolveFromIndex(t, "torch", SourceAuto, ix, false)
	if !out.OK {
		for _, r := range out.Rounds {
			for _, n := range r.Missing {
				t.Logf("round %d: missing %s (owner %+v)", r.N, n.Soname, n.Owner)
			}
		}
		t.Fatalf("resolve: %s; unresolved %+v", out.Stopped, out.Unresolved)
	}
	modes := map[string]RestoreMode{}
	for _, st := range out.Rounds[0].Plan.Steps {
		if st.Restore != nil {
			modes[st.Restore.Dist] = st.Restore.Mode
		}
	}
	if modes["nvidia-cudnn-cu13"] != RestoreSupply || modes["nvidia-cublas"] != RestoreInstall || modes["nvidia-cusparselt-cu13"] != "" {
		t.Errorf("restore modes: %v", modes)
	}
	if !slices.ContainsFunc(out.Notes, func(n string) bool {
		return strings.Contains(n, "nvidia-cusparselt-cu13") && strings.Contains(n, "no source has it") && strings.Contains(n, "exactly the required 0.8.0") && strings.Contains(n, "accepted")
	}) {
		t.Errorf("notes: %q", out.Notes)
	}
	after := realLoaderWith(t, filepath.Join(f.site, "torch/lib/libtorch_cuda.so"), f.driver)
	for _, name := range []string{"libcudnn.so.9", "libcublas.so.13", "libcublasLt.so.13", "libcudart.so.13"} {
		if !strings.HasPrefix(after[name], f.site) {
			t.Errorf("after the resolve ld.so takes %s from %q", name, after[name])
		}
	}
	if p := after["libcusparseLt.so.0"]; filepath.Dir(p) != old {
		t.Errorf("the accepted cuSPARSELt is taken from %q", p)
	}
	msg, _ := f.pip(t, "check")
	if !strings.Contains(msg, "nvidia-cudnn-cu13") {
		t.Errorf("pip check does not list the supplied cuDNN:\n%s", msg)
	}
	for _, line := range strings.Split(msg, "\n") {
		if strings.Contains(line, "nvidia-") && !strings.Contains(line, "nvidia-cudnn-cu13") && !strings.Contains(line, "nvidia-cusparselt-cu13") {
			t.Errorf("pip check: %s", line)
		}
	}
	// The second resolve accepts the supplied distribution as it is.
	again := f.resolveFromIndex(t, "torch", SourceAuto, ix, true)
	if d := again.Distributions.Find("nvidia-cudnn-cu13"); d == nil || d.State != declared.Supplied {
		t.Errorf("second resolve: cuDNN %+v", d)
	}
	if !again.OK || len(again.Rounds[0].Missing) != 0 {
		t.Errorf("second resolve: ok %v, missing %v", again.OK, again.Rounds[0].Missing)
	}
}

// installedBy reads who installed a distribution of site now ("" when it
// is not installed).
func installedBy(t *testing.T, site, name string) string {
	t.Helper()
	env, err := pyenv.FromSiteDir(site, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := env.Find(name)
	if err != nil {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(d.InfoDir, "INSTALLER"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(data))
}

// TestAbsentUndoCases: distributions restored for torch that the JAX
// plugin uses too stay whole when torch is undone; a distribution pip
// reinstalled over cudadeps' copy is left to pip; one pip uninstalled is
// reported and undo still succeeds.
func TestAbsentUndoCases(t *testing.T) {
	f := newAbsentFixture(t)
	ix := f.serveWheels(t)
	before := snapshot(t, f.site)
	if out := f.resolveFromIndex(t, "torch", SourcePyPI, ix, false); !out.OK {
		t.Fatalf("resolve torch: %s %+v", out.Stopped, out.Unresolved)
	}
	jax := f.resolveFromIndex(t, "jax-cuda13-plugin", SourcePyPI, ix, false)
	if !jax.OK {
		t.Fatalf("resolve jax-cuda13-plugin: %s %+v %q", jax.Stopped, jax.Unresolved, jax.Notes)
	}
	intact := map[string]bool{}
	for _, d := range jax.DistributionsAfter.Dists {
		intact[d.Name] = d.State == declared.Intact
	}
	if !intact["nvidia-cublas"] || !intact["nvidia-cudnn-cu13"] {
		t.Fatalf("the JAX plugin's closure after its resolve: %v", intact)
	}
	if _, err := undo(t, context.Background(), f.prefix, "torch"); err != nil {
		t.Fatal(err)
	}
	again := f.resolveFromIndex(t, "jax-cuda13-plugin", SourcePyPI, ix, true)
	for _, d := range again.Distributions.Dists {
		if intact[d.Name] && d.State != declared.Intact {
			t.Errorf("after undo torch, the JAX plugin's %s is %s (%s)", d.Name, d.State, d.Detail)
		}
	}
	got := realLoaderWith(t, filepath.Join(f.site, "jax_plugins/xla_cuda13/xla_cuda_plugin.so"), f.driver)
	for name, p := range got {
		if p == "" {
			t.Errorf("after undo torch, ld.so does not find %s for the JAX plugin", name)
		}
	}
	if _, err := undo(t, context.Background(), f.prefix, "jax-cuda13-plugin"); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, f.site); after != before {
		t.Errorf("undo of both left the tree changed:\n%s", diffLines(before, after))
	}

	// pip reinstalls cuBLAS over cudadeps' copy, then uninstalls cuRAND.
	if out := f.resolveFromIndex(t, "torch", SourcePyPI, ix, false); !out.OK {
		t.Fatalf("resolve torch again: %s %+v", out.Stopped, out.Unresolved)
	}
	if msg, err := f.pip(t, "install", "--force-reinstall", "--no-deps", "--index-url", ix.URL, "nvidia-cublas==13.1.0.3"); err != nil {
		t.Fatalf("pip install: %v\n%s", err, msg)
	}
	if msg, err := f.pip(t, "uninstall", "-y", "nvidia-curand"); err != nil {
		t.Fatalf("pip uninstall: %v\n%s", err, msg)
	}
	if got := installedBy(t, f.site, "nvidia-cublas"); got != "pip" {
		t.Fatalf("cuBLAS after pip's reinstall: INSTALLER %q", got)
	}
	reps, err := undo(t, context.Background(), f.prefix, "torch")
	if err != nil {
		t.Fatalf("undo after pip: %v", err)
	}
	if got := installedBy(t, f.site, "nvidia-cublas"); got != "pip" {
		t.Errorf("undo touched pip's cuBLAS: INSTALLER %q", got)
	}
	if _, err := os.Stat(filepath.Join(f.site, "nvidia/cu13/lib/libcublasLt.so.13")); err != nil {
		t.Errorf("undo removed pip's libcublasLt: %v", err)
	}
	if installedBy(t, f.site, "nvidia-cufft") != "" {
		t.Error("undo left cudadeps' cuFFT installed")
	}
	var gone, left int
	for _, r := range reps {
		gone += len(r.AlreadyRemoved)
		left += len(r.Left)
	}
	if gone == 0 || left == 0 {
		t.Errorf("undo reported %d files already removed (by pip uninstall) and %d left (pip's); want both", gone, left)
	}
}

// TestAbsentCupyAlone resolves CuPy on its own with every NVIDIA
// distribution absent. Its [ctk] extra is counted (CuPy needs cuBLAS),
// and of the distributions that extra names, only those whose libraries
// CuPy needs come back: nvidia-cuda-runtime, which nothing of CuPy loads,
// is left out with a note and is no need of its own (the GPU machine's
// run planned nothing for it and stopped with "no archive provides what
// is missing").
func TestAbsentCupyAlone(t *testing.T) {
	f := newAbsentFixture(t)
	ix := f.serveWheels(t)
	out := f.resolveFromIndex(t, "cupy-cuda13x", SourcePyPI, ix, false)
	if !out.OK {
		t.Fatalf("resolve: %s; unresolved %+v; notes %q", out.Stopped, out.Unresolved, out.Notes)
	}
	var restored []string
	for _, r := range out.Rounds {
		if r.Plan == nil {
			continue
		}
		for _, st := range r.Plan.Steps {
			if st.Restore != nil {
				restored = append(restored, st.Restore.Dist)
			}
		}
	}
	if len(restored) == 0 || !slices.Contains(restored, "nvidia-cublas") {
		t.Errorf("restored %q: want CuPy's libraries back", restored)
	}
	for _, r := range out.Rounds {
		if r.Plan == nil {
			continue
		}
		for _, n := range r.Missing {
			for _, st := range r.Plan.Steps {
				if slices.Contains(st.Provides, n.Soname) {
					goto planned
				}
			}
			t.Errorf("round %d: %s missing and nothing planned for it (needed by %q)", r.N, n.Soname, n.NeededBy)
		planned:
		}
	}
}

// TestNeverInstalled is what `pip install --no-deps torch` leaves: no
// nvidia-* distribution and no cuda-toolkit, whose extras pin the
// toolkit's wheels. torch's own metadata still names every pin (through
// the catalog's record of cuda-toolkit 13.0.2); with the index serving the
// exact wheels, cuda-toolkit among them, resolve installs all of them,
// pip check is clean, a second resolve has nothing to do, and undo gives
// the tree back as it was.
func TestNeverInstalled(t *testing.T) {
	f := newAbsentFixture(t)
	f.packed = append(f.packed, torchenv.Pack(t, f.site, "cuda-toolkit")...)
	torchenv.Uninstall(t, f.site, "cuda-toolkit")
	ix := f.serveWheels(t)
	before := snapshot(t, f.site)
	out, steps := f.installFromIndex(t, ix)
	var installed []string
	for _, st := range steps {
		if st.Restore != nil && st.Restore.Mode == RestoreInstall {
			installed = append(installed, st.Restore.Dist)
		}
	}
	if !slices.Contains(installed, "cuda-toolkit") || !slices.Contains(installed, "nvidia-cublas") {
		t.Errorf("installed %q; notes %q", installed, out.Notes)
	}
	f.restoredFromIndex(t, ix, before)
}

// TestOtherVersionReportedNotReplaced: cuDNN installed at another release
// than torch pins (its .dist-info and METADATA say 9.14.0), the exact
// wheel on the index. pip owns that distribution: resolve names it, with
// the pin and the pip command that installs the pinned release, and
// replaces none of its files; every other declared distribution is intact.
func TestOtherVersionReportedNotReplaced(t *testing.T) {
	f := intactFixture(t, "nvidia-cudnn-cu13")
	site := f.site
	relabel(t, site, "nvidia_cudnn_cu13", "9.19.0.56", "9.14.0")
	ix := f.serveWheels(t)
	before := snapshot(t, site)
	for _, dry := range []bool{true, false} {
		out := f.resolveFromIndex(t, "torch", SourceAuto, ix, dry)
		if out.OK {
			t.Fatalf("dry run %v: resolve claims success with cuDNN at another version; notes %q; dists %s", dry, out.Notes, distStates(out))
		}
		var found bool
		for _, u := range out.Unresolved {
			if u.Kind == UnresolvedDistribution && u.Soname == "nvidia-cudnn-cu13" {
				found = strings.Contains(u.Reason, "9.14.0 is installed; torch 2.11.0 requires nvidia-cudnn-cu13==9.19.0.56") && strings.Contains(u.Advice, "pip install 'nvidia-cudnn-cu13==9.19.0.56'")
			}
		}
		if !found {
			t.Errorf("dry run %v: unresolved %+v", dry, out.Unresolved)
		}
		if p := out.Rounds[0].Plan; p != nil {
			for _, st := range p.Steps {
				t.Errorf("dry run %v: a step: %s %+v", dry, st.Filename, st.Restore)
			}
		}
		for _, d := range out.DistributionsAfter.Dists {
			if want := d.Name != "nvidia-cudnn-cu13"; (d.State == declared.Intact) != want {
				t.Errorf("dry run %v: %s is %s (%s)", dry, d.Name, d.State, d.Detail)
			}
		}
	}
	// The run fails as torch fails with that cuDNN; the failure blames
	// libcudnn.so.9, whose owner is left to pip: no other cuDNN is fetched.
	opts := f.options(t, false)
	opts.Source = SourceAuto
	out := f.resolveWhileRunFails(t, opts, cudnnTooOld)
	if out.OK || len(out.Rounds) != 1 || out.Verify == nil || !slices.Contains(out.Verify.Blamed(), "libcudnn.so.9") {
		t.Errorf("with the run failing: ok %v, %d round(s), stopped %q, verify %+v", out.OK, len(out.Rounds), out.Stopped, out.Verify)
	}
	if !slices.ContainsFunc(out.Unresolved, func(u Unresolved) bool { return u.Kind == UnresolvedDistribution && u.Soname == "nvidia-cudnn-cu13" }) {
		t.Errorf("with the run failing: unresolved %+v", out.Unresolved)
	}
	if after := snapshot(t, site); after != before {
		t.Errorf("resolve changed the tree:\n%s", diffLines(before, after))
	}
	if ix.Downloads() != 0 {
		t.Errorf("%d downloads", ix.Downloads())
	}
}

// relabel makes an installed distribution say another version, as an
// older release installed by pip does: the .dist-info directory's name, its
// METADATA and the RECORD's own lines.
func relabel(t *testing.T, site, project, from, to string) {
	t.Helper()
	oldInfo, newInfo := project+"-"+from+".dist-info", project+"-"+to+".dist-info"
	if err := os.Rename(filepath.Join(site, oldInfo), filepath.Join(site, newInfo)); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"METADATA": func(s string) string { return strings.Replace(s, "Version: "+from+"\n", "Version: "+to+"\n", 1) },
		"RECORD":   func(s string) string { return strings.ReplaceAll(s, oldInfo+"/", newInfo+"/") },
	} {
		p := filepath.Join(site, newInfo, name)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(edit(string(data))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func distStates(out *Outcome) string {
	var b strings.Builder
	for _, d := range out.DistributionsAfter.Dists {
		fmt.Fprintf(&b, "%s %s %s (%s); ", d.Name, d.Version, d.State, d.Detail)
	}
	return b.String()
}

// TestDamagedDistributionMadeWhole: one library of nvidia-cufft deleted
// (its .dist-info stays): the plan takes that library from the exact
// wheel on the index, and after the resolve the distribution is whole
// again, every RECORD file at its recorded size.
func TestDamagedDistributionMadeWhole(t *testing.T) {
	python, site := venvSite(t)
	torchenv.Build(t, torchenv.Options{Site: site, ELF: true, Consistent: true})
	f := &absentFixture{fixture: fixture{python: python, site: site, prefix: filepath.Join(t.TempDir(), "prefix")}}
	f.packed = torchenv.Pack(t, site, "nvidia-cufft")
	f.driver = t.TempDir()
	if err := elfwrite.Write(filepath.Join(f.driver, "libcuda.so.1"), elfwrite.Spec{Soname: "libcuda.so.1", Machine: elf.EM_X86_64, Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(site, "nvidia", "cu13", "lib", "libcufft.so.12")); err != nil {
		t.Fatal(err)
	}
	ix := f.serveWheels(t)
	dry := f.resolveFromIndex(t, "torch", SourceAuto, ix, true)
	if d := dry.Distributions.Find("nvidia-cufft"); d == nil || d.State != declared.Damaged {
		t.Fatalf("before: %s", distStates(dry))
	}
	if p := dry.Rounds[0].Plan; p == nil || len(p.Steps) != 1 || !slices.Equal(p.Steps[0].Provides, []string{"libcufft.so.12"}) || !strings.HasPrefix(p.Steps[0].Filename, "nvidia_cufft-12.0.0.61-") {
		t.Fatalf("plan: %+v", p)
	}
	f.resolveWhole(t, ix, "nvidia-cufft")
}

// TestOtherVersionPlacedByCudadeps: cudadeps restored the distributions at
// torch's pins, then the pins moved (an upgrade with --no-deps: cuda-toolkit
// now pins cuFFT 12.0.0.99). cuFFT is at another version, and cudadeps
// placed it: the advice is to undo that resolve, and following it, the
// next resolve restores cuFFT at the new pin from the index.
func TestOtherVersionPlacedByCudadeps(t *testing.T) {
	f := newAbsentFixture(t)
	for _, p := range f.packed {
		if p.Name == "nvidia-cufft" {
			newer := p
			newer.Version = "12.0.0.99"
			f.packed = append(f.packed, newer)
			break
		}
	}
	ix := f.serveWheels(t)
	if out := f.resolveFromIndex(t, "torch", SourcePyPI, ix, false); !out.OK {
		t.Fatalf("first resolve: %s; unresolved %+v", out.Stopped, out.Unresolved)
	}
	infos, err := filepath.Glob(filepath.Join(f.site, "cuda_toolkit-*.dist-info", "METADATA"))
	if err != nil || len(infos) != 1 {
		t.Fatalf("cuda-toolkit's METADATA: %v %v", infos, err)
	}
	data, err := os.ReadFile(infos[0])
	if err != nil {
		t.Fatal(err)
	}
	moved := strings.ReplaceAll(string(data), "nvidia-cufft==12.0.0.61.*", "nvidia-cufft==12.0.0.99.*")
	if moved == string(data) {
		t.Fatal("cuda-toolkit does not pin nvidia-cufft==12.0.0.61.*")
	}
	if err := os.WriteFile(infos[0], []byte(moved), 0o644); err != nil {
		t.Fatal(err)
	}
	out := f.resolveFromIndex(t, "torch", SourcePyPI, ix, true)
	i := slices.IndexFunc(out.Unresolved, func(u Unresolved) bool { return u.Kind == UnresolvedDistribution && u.Soname == "nvidia-cufft" })
	if out.OK || i < 0 || !strings.Contains(out.Unresolved[i].Advice, "cudadeps undo torch") || !strings.Contains(out.Unresolved[i].Reason, "12.0.0.61 is installed") {
		t.Fatalf("after the pins moved: ok %v, unresolved %+v", out.OK, out.Unresolved)
	}
	if _, err := undo(t, context.Background(), f.prefix, "torch"); err != nil {
		t.Fatal(err)
	}
	out = f.resolveFromIndex(t, "torch", SourcePyPI, ix, false)
	if !out.OK {
		t.Fatalf("the advice followed: %s; unresolved %+v", out.Stopped, out.Unresolved)
	}
	if d := out.DistributionsAfter.Find("nvidia-cufft"); d == nil || d.State != declared.Intact || d.InstalledVersion != "12.0.0.99" {
		t.Errorf("after: %s", distStates(out))
	}
}

// intactFixture is the full environment, intact, with the wheels of names
// packed aside, and the driver's directory on LD_LIBRARY_PATH: what the
// tests then damage, relabel or uninstall.
func intactFixture(t *testing.T, names ...string) *absentFixture {
	t.Helper()
	python, site := venvSite(t)
	torchenv.Build(t, torchenv.Options{Site: site, ELF: true, Consistent: true})
	f := &absentFixture{fixture: fixture{python: python, site: site, prefix: filepath.Join(t.TempDir(), "prefix")}}
	f.packed = torchenv.Pack(t, site, names...)
	f.driver = t.TempDir()
	if err := elfwrite.Write(filepath.Join(f.driver, "libcuda.so.1"), elfwrite.Spec{Soname: "libcuda.so.1", Machine: elf.EM_X86_64, Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDamagedHeaderReported: a header of nvidia-cuda-runtime deleted (its
// libraries all load). check calls the distribution damaged; resolve, dry
// run or not, does not call it whole either: it names the file and the
// reinstall that brings it back, and changes nothing.
func TestDamagedHeaderReported(t *testing.T) {
	f := intactFixture(t, "nvidia-cuda-runtime")
	headers, err := filepath.Glob(filepath.Join(f.site, "nvidia", "cu13", "include", "*.h"))
	if err != nil || len(headers) == 0 {
		t.Fatalf("headers: %v %v", headers, err)
	}
	if err := os.Remove(headers[0]); err != nil {
		t.Fatal(err)
	}
	ix := f.serveWheels(t)
	before := snapshot(t, f.site)
	for _, dry := range []bool{true, false} {
		out := f.resolveFromIndex(t, "torch", SourceAuto, ix, dry)
		i := slices.IndexFunc(out.Unresolved, func(u Unresolved) bool {
			return u.Kind == UnresolvedDistribution && u.Soname == "nvidia-cuda-runtime"
		})
		if out.OK || i < 0 || !strings.Contains(out.Unresolved[i].Reason, filepath.Base(headers[0])) ||
			!strings.Contains(out.Unresolved[i].Advice, "pip install --force-reinstall --no-deps 'nvidia-cuda-runtime==13.0.96'") {
			t.Errorf("dry run %v: ok %v, unresolved %+v", dry, out.OK, out.Unresolved)
		}
	}
	if after := snapshot(t, f.site); after != before {
		t.Errorf("resolve changed the tree:\n%s", diffLines(before, after))
	}
	// check's analysis names the problem with the same advice.
	tg, err := FindTarget(context.Background(), "torch", TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	a, err := Analyze(context.Background(), tg, f.options(t, true))
	if err != nil {
		t.Fatal(err)
	}
	problems := a.Problems()
	if i := slices.IndexFunc(problems, func(p Problem) bool { return p.Kind == ProblemDist && p.Subject == "nvidia-cuda-runtime" }); i < 0 ||
		!strings.Contains(problems[i].Advice, "pip install --force-reinstall --no-deps 'nvidia-cuda-runtime==13.0.96'") {
		t.Errorf("check: %+v", problems)
	}
}

// TestDamagedFromArchiveOfOtherSize: libcufft.so.12 deleted, and NVIDIA's
// archive of the release holds a copy of another size than the wheel's
// RECORD says (archives and wheels are built apart). Placed at its RECORD
// path, it restores the distribution: resolve succeeds.
func TestDamagedFromArchiveOfOtherSize(t *testing.T) {
	f := intactFixture(t, "nvidia-cufft")
	lib := filepath.Join("nvidia", "cu13", "lib", "libcufft.so.12")
	for i := range f.packed {
		if data, ok := f.packed[i].Files["nvidia/cu13/lib/libcufft.so.12"]; ok {
			f.packed[i].Files["nvidia/cu13/lib/libcufft.so.12"] = append(slices.Clone(data), make([]byte, 4096)...)
		}
	}
	if err := os.Remove(filepath.Join(f.site, lib)); err != nil {
		t.Fatal(err)
	}
	f.serveArchives(t, false)
	out := f.resolve(t, "torch", SourceNVIDIA, false)
	if !out.OK {
		t.Fatalf("stopped %q, unresolved %+v", out.Stopped, out.Unresolved)
	}
	if _, err := os.Stat(filepath.Join(f.site, lib)); err != nil {
		t.Fatal(err)
	}
	if d := out.DistributionsAfter.Find("nvidia-cufft"); d == nil || d.State != declared.Intact {
		t.Errorf("after: %s", distStates(out))
	}
	// check's analysis, from the same records, agrees.
	a := f.analyzeWith(t, "torch", f.driver)
	for _, p := range a.Problems() {
		if p.Subject == "nvidia-cufft" || p.Subject == "libcufft.so.12" {
			t.Errorf("check: %+v", p)
		}
	}
}

// TestCheckLeavesUnneededExtras: on the intact environment, the JAX
// plugin's inferred [with-cuda] extra also names nvidia-cuda-nvcc and
// nvidia-nvvm, never installed there, whose files nothing of JAX loads.
// resolve notes them and leaves them out; check's analysis must not call
// them problems either (it did: check exited 3 on a healthy environment).
func TestCheckLeavesUnneededExtras(t *testing.T) {
	f := intactFixture(t)
	f.useBaseCatalog(t)
	for _, target := range []string{"jax-cuda13-plugin", "cupy-cuda13x", "torch"} {
		a := f.analyzeWith(t, target, f.driver)
		for _, p := range a.Problems() {
			if p.Kind == ProblemDist {
				t.Errorf("%s: %+v", target, p)
			}
		}
		if target == "jax-cuda13-plugin" {
			if d := a.Outcome.Distributions.Find("nvidia-cuda-nvcc"); d == nil || d.State != declared.Absent || d.ViaExtra != "with-cuda" {
				t.Errorf("nvcc: %+v", d)
			}
		}
	}
	// Installed at a release the plugin's requirement does not admit
	// (12.9.86 against >=13.0.48), it is no problem of the plugin's
	// either: nothing of JAX loads it.
	info := filepath.Join(f.site, "nvidia_cuda_nvcc-12.9.86.dist-info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"METADATA": "Metadata-Version: 2.1\nName: nvidia-cuda-nvcc\nVersion: 12.9.86\n",
		"RECORD":   "nvidia_cuda_nvcc-12.9.86.dist-info/METADATA,,\nnvidia_cuda_nvcc-12.9.86.dist-info/RECORD,,\n",
	} {
		if err := os.WriteFile(filepath.Join(info, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := f.analyzeWith(t, "jax-cuda13-plugin", f.driver)
	if d := a.Outcome.Distributions.Find("nvidia-cuda-nvcc"); d == nil || d.State != declared.OtherVersion {
		t.Fatalf("nvcc at 12.9.86: %+v", d)
	}
	for _, p := range a.Problems() {
		if p.Kind == ProblemDist {
			t.Errorf("nvcc at another release: %+v", p)
		}
	}
	if slices.ContainsFunc(a.Outcome.Unresolved, func(u Unresolved) bool { return u.Soname == "nvidia-cuda-nvcc" }) {
		t.Errorf("resolve: %+v", a.Outcome.Unresolved)
	}
}

// TestDamagedPackageDirRepaired: nvidia/cudnn removed, headers and Python
// files with the libraries, its .dist-info left (rm -rf of the package's
// directory). The exact wheel that brings the libraries back brings the
// other files its RECORD lists too: the distribution is whole again, the
// dry run promises as much, and undo gives the damaged tree back exactly.
func TestDamagedPackageDirRepaired(t *testing.T) {
	f := intactFixture(t, "nvidia-cudnn-cu13")
	if err := os.RemoveAll(filepath.Join(f.site, "nvidia", "cudnn")); err != nil {
		t.Fatal(err)
	}
	ix := f.serveWheels(t)
	before := snapshot(t, f.site)
	dry := f.resolveFromIndex(t, "torch", SourceAuto, ix, true)
	var repairs []string
	for _, st := range dry.Rounds[0].Plan.Steps {
		repairs = append(repairs, st.Repairs...)
	}
	if len(repairs) == 0 || slices.ContainsFunc(repairs, func(p string) bool { return strings.Contains(p, ".so") || !strings.HasPrefix(p, "nvidia/cudnn/") }) {
		t.Fatalf("repairs %q", repairs)
	}
	if slices.ContainsFunc(dry.Unresolved, func(u Unresolved) bool { return u.Soname == "nvidia-cudnn-cu13" }) {
		t.Errorf("dry run: %+v", dry.Unresolved)
	}
	f.resolveWhole(t, ix, "nvidia-cudnn-cu13")
	for _, rel := range repairs {
		if _, err := os.Stat(filepath.Join(f.site, filepath.FromSlash(rel))); err != nil {
			t.Error(err)
		}
	}
	if _, err := undo(t, context.Background(), f.prefix, "torch"); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, f.site); after != before {
		t.Errorf("undo left the tree changed:\n%s", diffLines(before, after))
	}
}
