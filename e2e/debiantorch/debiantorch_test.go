// Package debiantorch_test resolves Debian arm64 trees whose CUDA libraries are taken away (trixie's CUDA build of torch; a bookworm tree of the shared corpus) from NVIDIA-layout archives repacked from Debian's own CUDA packages, and judges the result with the tree's arm64 ld.so in a chroot.
package debiantorch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/debredist"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/platform"
	"github.com/cudadeps/cudadeps/resolver"
)

// debsVar names the folder e2e/foreign/fetch-debs.sh filled with the
// packages of pins-trixie-arm64.txt.
const debsVar = "CUDADEPS_ARM64_TORCH_DEBS"

// TestDebianTorchArm64 is the whole loop on real aarch64 ELF. The tree is
// Debian trixie's arm64 torch 2.6 built for CUDA (pins-trixie-arm64.txt):
// its CUDA 12.4 libraries are not installed, cuDNN is absent as in Debian.
// The mirror on 127.0.0.1 holds Debian's CUDA packages repacked as
// NVIDIA's linux-sbsa archives of the CUDA 12.4.1 release, with an
// NVIDIA-format manifest, and a generated cuDNN stand-in (see
// debredist.CudnnStandIn). resolve --root places everything into the
// prefix inside the tree: Debian's objects have no RPATH, so the root's
// /etc/ld.so.conf.d and its cache, rebuilt by the tree's own arm64
// ldconfig, activate it. The judge is the tree's ld.so in a chroot: every
// library of torch, and each extension module loaded into the tree's
// python3.13, loads with every symbol bound (LD_BIND_NOW). Undo leaves the
// tree as it was, its ld.so.cache byte for byte.
//
// It is an oracle test: the packages are its data, 61 of them, 1.27 GB:
// torch's CUDA packages with the CUDA 12.4 libraries, NCCL and driver
// library they load (1.23 GB), and the 40 MB of other libraries their
// objects load, which the tree's loader needs (seeds-trixie-arm64.txt
// says how they were chosen). Without them (the folder
// CUDADEPS_ARM64_TORCH_DEBS names) it skips, or fails under
// CUDADEPS_REQUIRE_ORACLES=1. `.ci/run` fetches them with
// `e2e/foreign/fetch-debs.sh --current`, which takes each pinned package
// at the version trixie's Packages index lists now (Debian replaces
// versions in point releases and drops the old files) and writes that
// list beside them, where this test reads it. Time: about 25 s to fetch
// at 50 MB/s (`.ci/run` allows 30 minutes), and 145 to 160 s for the test
// on a shared two-core machine, unpacking and repacking the packages most
// of it (200 MB of memory at most).
func TestDebianTorchArm64(t *testing.T) {
	start := time.Now()
	lap := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
	pins, debs := debredist.Fetched(t, debsVar, "pins-trixie-arm64.txt")
	lddtest.Need(t, os.Geteuid() == 0, "the tree's ldconfig and loader run in a chroot, which needs root")
	var bytes int64
	for _, p := range pins.List {
		bytes += p.Size
	}
	lap(fmt.Sprintf("%d pinned packages verified (%.2f GB)", len(pins.List), float64(bytes)/1e9))

	work := t.TempDir()
	mirror := filepath.Join(work, "mirror")
	cuda := debredist.CUDAComponents()
	cudaManifest, archives := debredist.Repack(t, mirror, platform.LinuxSBSA, cuda, debs, pins)
	lap(fmt.Sprintf("%d CUDA packages repacked as %d linux-sbsa archives", len(debredist.Packages(cuda)), len(archives)))
	var treeDebs []string
	for pkg, deb := range debs {
		if !slices.Contains(debredist.Packages(cuda), pkg) {
			treeDebs = append(treeDebs, deb)
		}
	}
	sort.Strings(treeDebs)
	sr := debredist.BuildTree(t, filepath.Join(work, "root"), pins.Arch, treeDebs)
	root := sr.Root
	lap(fmt.Sprintf("tree of %d packages unpacked, its ld.so.cache built", len(treeDebs)))
	cudnnManifest, _ := debredist.CudnnStandIn(t, mirror, platform.LinuxSBSA, "9.0.0.312", 12, filepath.Join(root, "usr", "lib"))
	m := mirrortest.ServeDir(t, mirror)
	ctx := context.Background()
	cat, err := debredist.Catalog(ctx, m.URL, platform.LinuxSBSA, filepath.Base(cudaManifest), filepath.Base(cudnnManifest))
	if err != nil {
		t.Fatal(err)
	}

	// Torch's objects: the libraries of libtorch-cuda-2.6 and the
	// extension modules of python3-torch-cuda.
	var libs, modules []string
	for _, pkg := range []string{"libtorch-cuda-2.6", "python3-torch-cuda"} {
		for _, f := range debredist.PackageFiles(t, debs[pkg]) {
			switch {
			case strings.Contains(f, ".cpython-"):
				modules = append(modules, "/"+f)
			case strings.Contains(filepath.Base(f), ".so."):
				libs = append(libs, "/"+f)
			}
		}
	}
	if len(libs) < 10 || len(modules) < 1 {
		t.Fatalf("torch's objects: %v %v", libs, modules)
	}
	missingBefore := judge(t, sr, "/usr/bin/python3.13", libs, modules, false)
	for _, want := range []string{"libcublas.so.12", "libcudart.so.12", "libcudnn.so.9", "libcusolver.so.11", "libnvrtc.so.12"} {
		if !missingBefore[want] {
			t.Errorf("before: the tree's loader finds %s (missing: %v)", want, missingBefore)
		}
	}
	before := lddtest.TreeState(t, root, filepath.Join(root, "opt", "cudadeps"))
	cacheBefore, err := os.ReadFile(filepath.Join(root, "etc", "ld.so.cache"))
	if err != nil {
		t.Fatal(err)
	}
	lap("the tree's loader misses what it should")

	prefix, err := activation.OpenIn("", root)
	if err != nil {
		t.Fatal(err)
	}
	client, err := fetch.NewClient(fetch.Options{CacheDir: filepath.Join(work, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	// One resolve per object of torch, as a user makes each load: the first
	// (the extension module torch is imported by) brings nearly everything,
	// the others what only they need (libcaffe2_nvrtc, NVRTC).
	var components []string
	var out *resolver.Outcome
	var targets []string
	for _, o := range append(slices.Clone(modules), libs...) {
		target, err := resolver.FindTarget(ctx, filepath.Join(root, o), resolver.TargetOptions{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target.Name)
		empty := ""
		out, err = resolver.Resolve(ctx, target, resolver.Options{Loader: ldso.Options{Root: root, LDLibraryPath: &empty, PreloadSet: true},
			Catalog: cat, Prefix: prefix, Client: client})
		if err != nil {
			t.Fatal(err)
		}
		if !out.OK || len(out.Unresolved) > 0 || out.Platform != platform.LinuxSBSA || out.CUDAMajor != 12 && out.CUDAMajor != 0 {
			t.Fatalf("resolve %s: ok=%v platform=%s cuda=%d stopped=%q unresolved=%+v", o, out.OK, out.Platform, out.CUDAMajor, out.Stopped, out.Unresolved)
		}
		for _, r := range out.Rounds {
			if r.Plan == nil {
				continue
			}
			for _, s := range r.Plan.Steps {
				components = append(components, fmt.Sprintf("%s round %d: %s", filepath.Base(o), r.N, s.Component))
			}
			for _, ref := range r.Refused {
				t.Errorf("%s: round %d refused %s", o, r.N, ref)
			}
		}
	}
	lap(fmt.Sprintf("%d objects resolved", len(targets)))
	t.Logf("archives: %s", strings.Join(components, "; "))
	for _, want := range []string{
		"_C.cpython-313-aarch64-linux-gnu.so round 1: cudnn", "_C.cpython-313-aarch64-linux-gnu.so round 1: cuda_cudart",
		"_C.cpython-313-aarch64-linux-gnu.so round 1: libcublas", "_C.cpython-313-aarch64-linux-gnu.so round 1: libcufft",
		"_C.cpython-313-aarch64-linux-gnu.so round 1: libcurand", "_C.cpython-313-aarch64-linux-gnu.so round 1: libcusparse",
		"_C.cpython-313-aarch64-linux-gnu.so round 1: libcusolver", "_C.cpython-313-aarch64-linux-gnu.so round 2: libnvjitlink",
		"libcaffe2_nvrtc.so.2.6.0 round 1: cuda_nvrtc",
	} {
		if !slices.Contains(components, want) {
			t.Errorf("not planned: %s", want)
		}
	}
	if out.Activation.LdConf == "" || out.Activation.Script != "" || len(out.Activation.Notes) > 0 {
		t.Errorf("activation %+v: want the root's ld.so.conf.d, no script", out.Activation)
	}
	if missing := judge(t, sr, "/usr/bin/python3.13", libs, modules, true); len(missing) > 0 {
		t.Errorf("after resolve, the tree's loader misses %v", missing)
	}
	lap(fmt.Sprintf("%d libraries and %d extension modules of torch judged by the arm64 ld.so", len(libs), len(modules)))

	if _, err := prefix.Undo(ctx, targets, nil); err != nil {
		t.Fatal(err)
	}
	if after := lddtest.TreeState(t, root, filepath.Join(root, "opt", "cudadeps")); !slices.Equal(after, before) {
		t.Errorf("undo did not restore the tree (%d entries before, %d after): %s", len(before), len(after), lddtest.Diff(before, after))
	}
	if cacheAfter, _ := os.ReadFile(filepath.Join(root, "etc", "ld.so.cache")); string(cacheAfter) != string(cacheBefore) {
		t.Errorf("undo: the tree's ld.so.cache is not as it was")
	}
	lap("undone")
}

// judge runs the tree's loader on prog with each object preloaded, binding
// every symbol (LD_BIND_NOW): torch's libraries are loaded into the
// interpreter (libtorch_python refers to the interpreter's symbols), its
// extension modules as an import loads them; with prog "", on each object
// itself. It returns the
// names the loader does not find; with strict, any miss, unbound symbol or
// version error fails the test.
func judge(t *testing.T, sr *lddtest.Sysroot, prog string, libs, modules []string, strict bool) map[string]bool {
	t.Helper()
	missing := map[string]bool{}
	for _, o := range append(slices.Clone(libs), modules...) {
		env, file := slices.Clone(lddtest.BindEnv), o
		if prog != "" {
			env, file = append(env, "LD_PRELOAD="+o), prog
		}
		what := o
		out, err := sr.List(context.Background(), file, env)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range out.Lines {
			if l.NotFound {
				missing[l.Name] = true
			}
		}
		if !strict {
			continue
		}
		if out.Fatal != "" {
			t.Errorf("%s: the loader stops: %s", what, out.Fatal)
		}
		for _, l := range out.Lines {
			if l.NotFound {
				t.Errorf("%s: the arm64 ld.so does not find %s", what, l.Name)
			}
		}
		for _, u := range out.UndefinedSymbols() {
			t.Errorf("%s: the arm64 ld.so does not bind %s", what, u)
		}
		for _, v := range out.VersionErrors {
			t.Errorf("%s: version %s of %s not found (required by %s)", what, v.Version, v.Provider, v.RequiredBy)
		}
	}
	return missing
}
