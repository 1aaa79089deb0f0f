package debiantorch_test

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/debredist"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/platform"
	"github.com/cudadeps/cudadeps/resolver"
)

// cuda11 are Debian bookworm's CUDA 11.8 packages of the shared corpus as
// the components of NVIDIA's CUDA 11.8.0 release they were built from.
var cuda11 = []debredist.Component{
	{Name: "cuda_cudart", Title: "CUDA Runtime (cudart)", Debs: []string{"libcudart11.0"}},
	{Name: "cuda_cupti", Title: "CUPTI", Debs: []string{"libcupti11.8"}},
	{Name: "cuda_nvtx", Title: "CUDA NVTX", Debs: []string{"libnvtoolsext1"}},
}

// TestDebianCUDA11Arm64 is TestDebianTorchArm64's loop on what the shared
// corpus holds, so that it runs without the network: a Debian bookworm
// arm64 tree (its glibc 2.36, ldconfig, libstdc++, BLAS/LAPACK
// alternatives), a library installed in its multiarch directory as Debian
// installs one (no RPATH) that needs CUDA 11.8's runtime, CUPTI and NVTX
// and cuDNN 9, and refers to symbols each of them really defines (read from
// Debian's libraries, with their versions), none of them installed. The
// mirror on 127.0.0.1 holds Debian's real libcudart11.0, libcupti11.8 and
// libnvtoolsext1 repacked as NVIDIA's linux-sbsa archives of CUDA 11.8.0
// with an NVIDIA-format manifest, and a generated cuDNN stand-in for CUDA
// 11. resolve --root activates the prefix inside the tree through its
// ld.so.conf.d and the cache its own arm64 ldconfig rebuilds; the tree's
// arm64 ld.so in a chroot, binding every symbol, is the judge, before and
// after; undo leaves the tree as it was, its ld.so.cache byte for byte.
func TestDebianCUDA11Arm64(t *testing.T) {
	lddtest.Need(t, os.Geteuid() == 0, "the tree's ldconfig and loader run in a chroot, which needs root")
	files := lddtest.VerifiedDebs(t, filepath.Join(lddtest.SharedDir(t), "corpus", "debian"), "arm64")
	pins, debs, err := debredist.FilePins("arm64", files)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	mirror := filepath.Join(work, "mirror")
	cudaManifest, archives := debredist.Repack(t, mirror, platform.LinuxSBSA, cuda11, debs, pins)
	if len(archives) != len(cuda11) || !strings.HasSuffix(cudaManifest, "redistrib_11.8.0.json") {
		t.Fatalf("repacked %d archives, manifest %s", len(archives), cudaManifest)
	}
	var treeDebs []string
	for pkg, deb := range debs {
		// The driver's library stays out: the tree has no driver.
		if !slices.Contains(debredist.Packages(cuda11), pkg) && pkg != "libnvidia-ml1" {
			treeDebs = append(treeDebs, deb)
		}
	}
	sort.Strings(treeDebs)
	sr := debredist.BuildTree(t, filepath.Join(work, "root"), pins.Arch, treeDebs)
	root := sr.Root

	// The consumer refers to real symbols of the real libraries, in the
	// versions they define them.
	real := t.TempDir()
	for _, c := range cuda11 {
		lddtest.DpkgExtract(t, debs[c.Debs[0]], real)
	}
	lib := filepath.Join(real, "usr", "lib", "aarch64-linux-gnu")
	spec := elfwrite.Linked{Machine: elf.EM_AARCH64, Soname: "libcudaconsumer.so.1",
		Needed: []string{"libcudart.so.11.0", "libcupti.so.11.8", "libnvToolsExt.so.1", "libcudnn.so.9", "libstdc++.so.6", "libc.so.6"}}
	for soname, names := range map[string][]string{
		"libcudart.so.11.0":  {"cudaMalloc", "cudaFree", "cudaGetDeviceCount"},
		"libcupti.so.11.8":   {"cuptiActivityEnable", "cuptiSubscribe"},
		"libnvToolsExt.so.1": {"nvtxRangePushA", "nvtxRangePop"},
	} {
		refs, need := realRefs(t, filepath.Join(lib, soname), names)
		spec.Refs = append(spec.Refs, refs...)
		if need != nil {
			spec.VersionNeeds = append(spec.VersionNeeds, *need)
		}
	}
	spec.VersionNeeds = append(spec.VersionNeeds, elfwrite.VersionNeed{File: "libcudnn.so.9", Versions: []string{"libcudnn.so.9"}})
	spec.Refs = append(spec.Refs, elfwrite.Ref{Name: "cudnnCreate", Version: "libcudnn.so.9"}, elfwrite.Ref{Name: "cudnnDestroy", Version: "libcudnn.so.9"})
	consumer := "/usr/lib/aarch64-linux-gnu/libcudaconsumer.so.1"
	if err := elfwrite.WriteLinked(filepath.Join(root, consumer), spec); err != nil {
		t.Fatal(err)
	}
	sr.RebuildCache(t)
	cudnnManifest, _ := debredist.CudnnStandIn(t, mirror, platform.LinuxSBSA, "9.1.0.70", 11, filepath.Join(root, "usr", "lib", "aarch64-linux-gnu"))
	m := mirrortest.ServeDir(t, mirror)
	ctx := context.Background()
	cat, err := debredist.Catalog(ctx, m.URL, platform.LinuxSBSA, filepath.Base(cudaManifest), filepath.Base(cudnnManifest))
	if err != nil {
		t.Fatal(err)
	}

	missingBefore := judge(t, sr, "", []string{consumer}, nil, false)
	for _, want := range []string{"libcudart.so.11.0", "libcupti.so.11.8", "libnvToolsExt.so.1", "libcudnn.so.9"} {
		if !missingBefore[want] {
			t.Errorf("before: the tree's loader finds %s (missing: %v)", want, missingBefore)
		}
	}
	before := lddtest.TreeState(t, root, filepath.Join(root, "opt", "cudadeps"))
	cacheBefore, err := os.ReadFile(filepath.Join(root, "etc", "ld.so.cache"))
	if err != nil {
		t.Fatal(err)
	}

	prefix, err := activation.OpenIn("", root)
	if err != nil {
		t.Fatal(err)
	}
	client, err := fetch.NewClient(fetch.Options{CacheDir: filepath.Join(work, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	target, err := resolver.FindTarget(ctx, filepath.Join(root, consumer), resolver.TargetOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	out, err := resolver.Resolve(ctx, target, resolver.Options{Loader: ldso.Options{Root: root, LDLibraryPath: &empty, PreloadSet: true},
		Catalog: cat, Prefix: prefix, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if !out.OK || len(out.Unresolved) > 0 || out.Platform != platform.LinuxSBSA || out.CUDAMajor != 11 {
		t.Fatalf("resolve: ok=%v platform=%s cuda=%d stopped=%q unresolved=%+v", out.OK, out.Platform, out.CUDAMajor, out.Stopped, out.Unresolved)
	}
	var components []string
	for _, r := range out.Rounds {
		if r.Plan == nil {
			continue
		}
		for _, s := range r.Plan.Steps {
			components = append(components, fmt.Sprintf("%s %s", s.Component, s.Version))
		}
		for _, ref := range r.Refused {
			t.Errorf("round %d refused %s", r.N, ref)
		}
	}
	sort.Strings(components)
	if want := []string{"cuda_cudart 11.8.89", "cuda_cupti 11.8.87", "cuda_nvtx 11.8.86", "cudnn 9.1.0.70"}; !slices.Equal(components, want) {
		t.Errorf("planned %v, want %v", components, want)
	}
	if out.Activation.LdConf == "" || out.Activation.Script != "" || len(out.Activation.Notes) > 0 {
		t.Errorf("activation %+v: want the root's ld.so.conf.d, no script", out.Activation)
	}
	if missing := judge(t, sr, "", []string{consumer}, nil, true); len(missing) > 0 {
		t.Errorf("after resolve, the tree's loader misses %v", missing)
	}

	if _, err := prefix.Undo(ctx, []string{target.Name}, nil); err != nil {
		t.Fatal(err)
	}
	if after := lddtest.TreeState(t, root, filepath.Join(root, "opt", "cudadeps")); !slices.Equal(after, before) {
		t.Errorf("undo did not restore the tree (%d entries before, %d after): %s", len(before), len(after), lddtest.Diff(before, after))
	}
	if cacheAfter, _ := os.ReadFile(filepath.Join(root, "etc", "ld.so.cache")); string(cacheAfter) != string(cacheBefore) {
		t.Errorf("undo: the tree's ld.so.cache is not as it was")
	}
}

// realRefs are references to names as the library file defines them: in
// the version each is defined in, with the version need that goes with
// them (nil when the library defines no versions).
func realRefs(t *testing.T, file string, names []string) ([]elfwrite.Ref, *elfwrite.VersionNeed) {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	soname, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(soname) != 1 {
		t.Fatalf("%s: no soname: %v", file, err)
	}
	var refs []elfwrite.Ref
	var need *elfwrite.VersionNeed
	for _, n := range names {
		i := slices.IndexFunc(syms, func(s elf.Symbol) bool { return s.Name == n && s.Section != elf.SHN_UNDEF })
		if i < 0 {
			t.Fatalf("%s does not define %s", file, n)
		}
		v := syms[i].Version
		refs = append(refs, elfwrite.Ref{Name: n, Version: v})
		if v == "" {
			continue
		}
		if need == nil {
			need = &elfwrite.VersionNeed{File: soname[0]}
		}
		if !slices.Contains(need.Versions, v) {
			need.Versions = append(need.Versions, v)
		}
	}
	return refs, need
}
