package resolver

import (
	"context"
	"debug/elf"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/platform"
)

// linkedArm builds an aarch64 object whose references the loader binds
// (relocations against them), for the oracle's LD_BIND_NOW.
func linkedArm(t *testing.T, spec elfwrite.Linked) []byte {
	t.Helper()
	spec.Machine = elf.EM_AARCH64
	b, err := elfwrite.BuildLinked(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// defs defines names, in version (or unversioned when "").
func defs(version string, names ...string) []elfwrite.Def {
	var out []elfwrite.Def
	for _, n := range names {
		out = append(out, elfwrite.Def{Name: n, Version: version, Type: elf.STT_FUNC})
	}
	return out
}

// refs references names, from version (or unversioned when "").
func refs(version string, names ...string) []elfwrite.Ref {
	var out []elfwrite.Ref
	for _, n := range names {
		out = append(out, elfwrite.Ref{Name: n, Version: version})
	}
	return out
}

// cudaLib is an NVIDIA CUDA library as NVIDIA links them: every symbol in
// the version named after the soname.
func cudaLib(t *testing.T, soname string, symbols ...string) []byte {
	return linkedArm(t, elfwrite.Linked{Soname: soname, Needed: []string{"libc.so.6"}, VersionDefs: []string{soname}, Defs: defs(soname, symbols...)})
}

// torchAarch64Wheel writes, into site, a synthetic tree shaped like a
// current torch aarch64 CUDA wheel (not NVIDIA's or PyTorch's bytes): it
// declares its CUDA 13 wheels (nvidia-cuda-runtime, nvidia-cublas,
// installed), and links NVPL's LAPACK and BLAS and cuDSS, which no
// distribution it requires holds. libtorch_cpu searches only the CUDA 13
// wheels' directory and its own, libtorch_cuda also nvidia/cudss/lib, as
// the wheels' RPATH does; each references what it uses of each library.
func torchAarch64Wheel(t *testing.T, site string) {
	t.Helper()
	writeDist(t, site, "nvidia-cuda-runtime", "13.0.96", nil, map[string][]byte{
		"nvidia/cu13/lib/libcudart.so.13": cudaLib(t, "libcudart.so.13", "cudaMalloc", "cudaFree"),
	}, nil)
	writeDist(t, site, "nvidia-cublas", "13.1.0.3", nil, map[string][]byte{
		"nvidia/cu13/lib/libcublas.so.13": cudaLib(t, "libcublas.so.13", "cublasCreate_v2", "cublasSgemm_v2"),
	}, nil)
	exe := fs.FileMode(0o755)
	writeDist(t, site, "torch", "2.9.0", []string{"nvidia-cuda-runtime==13.0.96", "nvidia-cublas==13.1.0.3"}, map[string][]byte{
		"torch/__init__.py": []byte("\n"),
		"torch/lib/libtorch_cpu.so": linkedArm(t, elfwrite.Linked{Soname: "libtorch_cpu.so",
			Needed: []string{"libnvpl_lapack_lp64_gomp.so.0", "libnvpl_blas_lp64_gomp.so.0", "libgomp.so.1", "libc.so.6"},
			RPath:  elfwrite.Str("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN"),
			Defs:   defs("", "at_cpu"), Refs: refs("", "dgesv_", "dgemm_")}),
		"torch/lib/libtorch_cuda.so": linkedArm(t, elfwrite.Linked{Soname: "libtorch_cuda.so",
			Needed:       []string{"libtorch_cpu.so", "libcudart.so.13", "libcublas.so.13", "libcudss.so.0", "libc.so.6"},
			RPath:        elfwrite.Str("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../../nvidia/cudss/lib:$ORIGIN"),
			VersionNeeds: []elfwrite.VersionNeed{{File: "libcudart.so.13", Versions: []string{"libcudart.so.13"}}, {File: "libcublas.so.13", Versions: []string{"libcublas.so.13"}}},
			Refs:         slices.Concat(refs("", "at_cpu", "cudssCreate", "cudssExecute"), refs("libcudart.so.13", "cudaMalloc"), refs("libcublas.so.13", "cublasCreate_v2"))}),
		// Opened by libtorch_cpu at run time (runtimeopen's table).
		"torch/lib/libtorch_cuda_linalg.so": linkedArm(t, elfwrite.Linked{Soname: "libtorch_cuda_linalg.so",
			Needed:       []string{"libtorch_cuda.so", "libcudart.so.13", "libc.so.6"},
			RPath:        elfwrite.Str("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN"),
			VersionNeeds: []elfwrite.VersionNeed{{File: "libcudart.so.13", Versions: []string{"libcudart.so.13"}}},
			Refs:         refs("libcudart.so.13", "cudaFree")}),
	}, map[string]fs.FileMode{"torch/lib/libtorch_cpu.so": exe, "torch/lib/libtorch_cuda.so": exe, "torch/lib/libtorch_cuda_linalg.so": exe})
}

// undeclaredArchives are NVIDIA-layout archives of NVPL and cuDSS for
// linux-sbsa: the newest cuDSS lacks cudssExecute, which torch calls; the
// one before has it. Their versions are above the embedded catalog's, so
// that they are the newest it knows.
func undeclaredArchives(t *testing.T) []mirrortest.Archive {
	raw := func(soname string, needed []string, symbols ...string) map[string][]byte {
		return map[string][]byte{soname: linkedArm(t, elfwrite.Linked{Soname: soname, Needed: needed, Defs: defs("", symbols...)})}
	}
	gomp := []string{"libgomp.so.1", "libc.so.6"}
	return []mirrortest.Archive{
		{Component: "nvpl_lapack", Product: "nvpl", Version: "0.9.9", Platform: platform.LinuxSBSA, Machine: elf.EM_AARCH64, Raw: raw("libnvpl_lapack_lp64_gomp.so.0", gomp, "dgesv_", "dgetrf_")},
		{Component: "nvpl_blas", Product: "nvpl", Version: "0.9.9", Platform: platform.LinuxSBSA, Machine: elf.EM_AARCH64, Raw: raw("libnvpl_blas_lp64_gomp.so.0", gomp, "dgemm_", "sgemm_")},
		{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: platform.LinuxSBSA, Variant: "cuda13", Machine: elf.EM_AARCH64, Raw: raw("libcudss.so.0", []string{"libc.so.6"}, "cudssCreate")},
		{Component: "libcudss", Product: "cudss", Version: "0.9.9.1", Platform: platform.LinuxSBSA, Variant: "cuda13", Machine: elf.EM_AARCH64, Raw: raw("libcudss.so.0", []string{"libc.so.6"}, "cudssCreate", "cudssExecute")},
	}
}

// judgeInTree runs the tree's own arm64 loader in a chroot on each object,
// binding every symbol (LD_BIND_NOW, LD_WARN): nothing may be missing or
// unbound.
func judgeInTree(t *testing.T, sr *lddtest.Sysroot, objects []string, env []string) {
	t.Helper()
	for _, o := range objects {
		out, err := sr.List(context.Background(), o, append(slices.Clone(lddtest.BindEnv), env...))
		if err != nil {
			t.Fatal(err)
		}
		if out.Fatal != "" {
			t.Errorf("%s: the loader stops: %s", o, out.Fatal)
		}
		for _, l := range out.Lines {
			if l.NotFound {
				t.Errorf("%s: the arm64 ld.so does not find %s", o, l.Name)
			}
		}
		for _, u := range out.UndefinedSymbols() {
			t.Errorf("the arm64 ld.so does not bind %s", u)
		}
		for _, v := range out.VersionErrors {
			t.Errorf("%s: version %s of %s not found", v.RequiredBy, v.Version, v.Provider)
		}
	}
}

// TestTorchAarch64WheelUndeclared resolves, under --root, a synthetic tree
// shaped like a current torch aarch64 CUDA wheel on a DGX Spark. The plan
// names NVPL's LAPACK and BLAS and cuDSS as undeclared by torch; the newest
// cuDSS leaves torch's cudssExecute unbound, so it is refused after its
// download and the release before it is placed, in nvidia/cudss/lib, which
// libtorch_cuda searches; NVPL, which libtorch_cpu searches through no
// directory of its own, goes into the root's /etc/ld.so.conf.d and cache.
// The root's own arm64 ld.so, in a chroot, then finds and binds everything
// with no environment; undo leaves the tree as it was.
func TestTorchAarch64WheelUndeclared(t *testing.T) {
	sr := lddtest.ArmSysroot(t)
	sr.InstallLdconfig(t)
	hostEvidence(t, sr.Root, "dgx-spark")
	site := filepath.Join(sr.Root, "opt/venv/lib/python3.12/site-packages")
	torchAarch64Wheel(t, site)
	m, cat := serveCatalog(t, undeclaredArchives(t))
	prefix := openPrefixIn(t, "", sr.Root)
	before := lddtest.TreeState(t, sr.Root, prefix.Dir())
	cacheBefore, err := os.ReadFile(filepath.Join(sr.Root, "etc/ld.so.cache"))
	if err != nil {
		t.Fatal(err)
	}
	out := resolveInRoot(t, sr, site, cat, prefix)
	if !out.OK || out.Platform != platform.LinuxSBSA || out.CUDAMajor != 13 {
		t.Fatalf("resolve: ok=%v platform=%s cuda=%d stopped=%q unresolved=%+v", out.OK, out.Platform, out.CUDAMajor, out.Stopped, out.Unresolved)
	}
	first := out.Rounds[0]
	var undeclared []string
	for _, u := range first.Plan.Undeclared {
		undeclared = append(undeclared, u.Soname+" "+u.Component+" "+u.Version)
	}
	slices.Sort(undeclared)
	want := []string{"libcudss.so.0 libcudss 0.9.9.1", "libnvpl_blas_lp64_gomp.so.0 nvpl_blas 0.9.9", "libnvpl_lapack_lp64_gomp.so.0 nvpl_lapack 0.9.9"}
	if !slices.Equal(undeclared, want) {
		t.Errorf("undeclared by torch: %q, want %q", undeclared, want)
	}
	if len(first.Refused) != 1 || first.Refused[0].Version != "0.9.9.9" || first.Refused[0].Instead != "0.9.9.1" ||
		!strings.Contains(strings.Join(first.Refused[0].Unbound, " "), "libtorch_cuda.so: undefined symbol: cudssExecute") {
		t.Errorf("refused: %+v, want cuDSS 0.9.9.9 for cudssExecute, 0.9.9.1 instead", first.Refused)
	}
	if _, ok, _ := prefix.Store().Lookup(fetch.Key{Component: "libcudss", Version: "0.9.9.9", Platform: platform.LinuxSBSA, Variant: "cuda13"}); ok {
		t.Errorf("the refused release stayed in the store")
	}
	if m.Requests()["/libcudss/linux-sbsa/libcudss-linux-sbsa-0.9.9.1_cuda13-archive.tar.xz"] != 1 {
		t.Errorf("requests: %v", m.Requests())
	}
	if out.Activation.LdConf == "" || len(out.Activation.LdConfDirs) == 0 || out.Activation.Script != "" {
		t.Errorf("activation %+v: want NVPL through the root's ld.so.conf.d, no script", out.Activation)
	}
	if _, err := os.Stat(filepath.Join(site, "nvidia/cudss/lib/libcudss.so.0")); err != nil {
		t.Errorf("cuDSS not placed where libtorch_cuda searches: %v", err)
	}
	guest := func(p string) string { return strings.TrimPrefix(p, sr.Root) }
	var objects []string
	for _, n := range []string{"libtorch_cpu.so", "libtorch_cuda.so", "libtorch_cuda_linalg.so"} {
		objects = append(objects, guest(filepath.Join(site, "torch/lib", n)))
	}
	judgeInTree(t, sr, objects, nil)

	if _, err := prefix.Undo(context.Background(), []string{"torch"}, nil); err != nil {
		t.Fatal(err)
	}
	if after := lddtest.TreeState(t, sr.Root, prefix.Dir()); !slices.Equal(after, before) {
		t.Errorf("undo did not restore the tree:\nbefore %d entries, after %d; first difference: %s", len(before), len(after), lddtest.Diff(before, after))
	}
	if cacheAfter, _ := os.ReadFile(filepath.Join(sr.Root, "etc/ld.so.cache")); string(cacheAfter) != string(cacheBefore) {
		t.Errorf("undo: ld.so.cache differs from the one before")
	}
	left := 0
	_ = filepath.WalkDir(prefix.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left++
			t.Logf("left in the prefix: %s", p)
		}
		return nil
	})
	if left > 0 {
		t.Errorf("undo left %d files in the prefix", left)
	}
}

// TestUnbindableLibraryIsNamed: when no release of cuDSS defines what
// torch needs of it, resolve stops at once naming cuDSS, the releases
// refused and the unbound reference, and is not kept planning it again
// until its round limit.
func TestUnbindableLibraryIsNamed(t *testing.T) {
	sr := lddtest.ArmSysroot(t)
	sr.InstallLdconfig(t)
	hostEvidence(t, sr.Root, "dgx-spark")
	site := filepath.Join(sr.Root, "opt/venv/lib/python3.12/site-packages")
	torchAarch64Wheel(t, site)
	archives := undeclaredArchives(t)
	archives = slices.DeleteFunc(archives, func(a mirrortest.Archive) bool { return a.Component == "libcudss" && a.Version == "0.9.9.1" })
	_, cat := serveCatalog(t, archives)
	prefix := openPrefixIn(t, "", sr.Root)
	out := resolveInRoot(t, sr, site, cat, prefix)
	if out.OK || out.Stopped == StopRoundLimit || len(out.Rounds) > 2 {
		t.Errorf("stopped %q after %d rounds, ok=%v: want a stop naming cuDSS before the round limit", out.Stopped, len(out.Rounds), out.OK)
	}
	var named bool
	for _, u := range out.Unresolved {
		if u.Soname == "libcudss.so.0" && strings.Contains(u.Reason, "0.9.9.9 refused") && strings.Contains(u.Reason, "cudssExecute") {
			named = true
		}
	}
	if !named {
		t.Errorf("unresolved %+v: want libcudss.so.0 with the refused release and cudssExecute", out.Unresolved)
	}
}

// TestTorchAarch64InRootsOwnPython: with the root alone (no site
// directory named), torch is found in the root's own Python installation,
// read, never run: pip's /usr/local/lib/python3.12/dist-packages, which
// Debian's python3 imports from before apt's /usr/lib/python3/dist-packages
// (an older torch there is not the one), and resolved as when its site
// directory is named; the root's arm64 ld.so then finds everything.
func TestTorchAarch64InRootsOwnPython(t *testing.T) {
	sr := lddtest.ArmSysroot(t)
	sr.InstallLdconfig(t)
	hostEvidence(t, sr.Root, "dgx-spark")
	for p, body := range map[string]string{"usr/bin/python3.12": "#!/bin/sh\ntouch " + sr.Root + "/RAN\n", "usr/lib/python3.12/os.py": ""} {
		full := filepath.Join(sr.Root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("python3.12", filepath.Join(sr.Root, "usr/bin/python3")); err != nil {
		t.Fatal(err)
	}
	writeDist(t, filepath.Join(sr.Root, "usr/lib/python3/dist-packages"), "torch", "2.1.0", nil, map[string][]byte{"torch/__init__.py": []byte("\n")}, nil)
	site := filepath.Join(sr.Root, "usr/local/lib/python3.12/dist-packages")
	torchAarch64Wheel(t, site)
	_, cat := serveCatalog(t, undeclaredArchives(t))
	out := resolveInRoot(t, sr, "", cat, openPrefixIn(t, "", sr.Root))
	if d := out.Target.Dist; d.SiteDir != site || d.Version != "2.9.0" || out.Target.Python.Installation != "python3.12 in /usr, Debian's layout" {
		t.Fatalf("found torch %s in %s (%s); want 2.9.0 in %s", d.Version, d.SiteDir, out.Target.Python.Installation, site)
	}
	if !out.OK || out.Platform != platform.LinuxSBSA || out.CUDAMajor != 13 {
		t.Fatalf("resolve: ok=%v platform=%s cuda=%d stopped=%q unresolved=%+v", out.OK, out.Platform, out.CUDAMajor, out.Stopped, out.Unresolved)
	}
	var objects []string
	for _, n := range []string{"libtorch_cpu.so", "libtorch_cuda.so", "libtorch_cuda_linalg.so"} {
		objects = append(objects, strings.TrimPrefix(filepath.Join(site, "torch/lib", n), sr.Root))
	}
	judgeInTree(t, sr, objects, nil)
	if _, err := os.Stat(filepath.Join(sr.Root, "RAN")); err == nil {
		t.Error("the root's python3 was run")
	}
}

// resolveInRoot resolves torch under the root sr from the catalog cat into
// prefix, with no LD_LIBRARY_PATH; from the site directory site, or the
// root's own Python installation when site is "".
func resolveInRoot(t *testing.T, sr *lddtest.Sysroot, site string, cat *catalog.Catalog, prefix *activation.Prefix) *Outcome {
	t.Helper()
	client, err := fetch.NewClient(fetch.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	target, err := FindTarget(ctx, "torch", TargetOptions{SiteDir: site, Root: sr.Root})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	out, err := Resolve(ctx, target, Options{Loader: ldso.Options{Root: sr.Root, LDLibraryPath: &empty, PreloadSet: true},
		Catalog: cat, Prefix: prefix, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
