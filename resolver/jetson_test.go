package resolver

import (
	"context"
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/indextest"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/platform"
	"github.com/cudadeps/cudadeps/python/pypi"
)

// hostEvidence copies a real host's evidence files (platform's testdata,
// with their SOURCES) into a sysroot, so that it is that host.
func hostEvidence(t *testing.T, root, host string) {
	t.Helper()
	src := filepath.Join("..", "platform", "testdata", "hosts", host, "root")
	if out, err := exec.Command("cp", "-a", src+"/.", root+"/").CombinedOutput(); err != nil {
		t.Fatalf("cp %s: %v: %s", src, err, out)
	}
}

func arm64(s elfwrite.Spec) elfwrite.Spec { s.Machine = elf.EM_AARCH64; return s }

// jetPackCUDA lays out JetPack 6's CUDA 12.6 under root as JetPack does:
// /usr/local/cuda an absolute link to cuda-12.6, lib64 a link to
// targets/aarch64-linux/lib, which holds libcudart and libcublas (each
// defining, in its soname's version, what torchForJetson calls).
func jetPackCUDA(t *testing.T, root string) {
	t.Helper()
	lib := filepath.Join(root, "usr/local/cuda-12.6/targets/aarch64-linux/lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{
		"libcudart.so.12.6.68":  cudaLib(t, "libcudart.so.12", "cudaMalloc"),
		"libcublas.so.12.6.4.1": cudaLib(t, "libcublas.so.12", "cublasCreate_v2"),
	} {
		if err := os.WriteFile(filepath.Join(lib, file), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"usr/local/cuda-12.6/targets/aarch64-linux/lib/libcudart.so.12": "libcudart.so.12.6.68",
		"usr/local/cuda-12.6/targets/aarch64-linux/lib/libcublas.so.12": "libcublas.so.12.6.4.1",
		"usr/local/cuda-12.6/lib64":                                     "targets/aarch64-linux/lib",
		"usr/local/cuda":                                                "/usr/local/cuda-12.6",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
}

// torchForJetson is what NVIDIA's torch wheels for Jetson are: they
// declare no nvidia-* wheel, link JetPack's CUDA 12 and need cuSPARSELt and
// cuDSS, which JetPack lacks; the library references what it calls of
// each, so that the loader binds them. With bundled, the CUDA runtime and
// cuBLAS lie beside it (as in a wheel that carries them).
func torchForJetson(t *testing.T, site string, bundled bool) {
	t.Helper()
	files := map[string][]byte{
		"torch/__init__.py": []byte("\n"),
		"torch/lib/libtorch_cuda.so": linkedArm(t, elfwrite.Linked{Soname: "libtorch_cuda.so",
			Needed:       []string{"libcudart.so.12", "libcublas.so.12", "libcusparseLt.so.0", "libcudss.so.0", "libc.so.6"},
			RPath:        elfwrite.Str("$ORIGIN:$ORIGIN/../../nvidia/cusparselt/lib:$ORIGIN/../../nvidia/cudss/lib"),
			VersionNeeds: []elfwrite.VersionNeed{{File: "libcudart.so.12", Versions: []string{"libcudart.so.12"}}, {File: "libcublas.so.12", Versions: []string{"libcublas.so.12"}}},
			Refs:         slices.Concat(refs("", "cusparseLtInit", "cudssCreate"), refs("libcudart.so.12", "cudaMalloc"), refs("libcublas.so.12", "cublasCreate_v2"))}),
	}
	if bundled {
		files["torch/lib/libcudart.so.12"] = cudaLib(t, "libcudart.so.12", "cudaMalloc")
		files["torch/lib/libcublas.so.12"] = cudaLib(t, "libcublas.so.12", "cublasCreate_v2")
	}
	writeDist(t, site, "torch", "2.5.0a0+872d972e41.nv24.08", nil, files, map[string]fs.FileMode{"torch/lib/libtorch_cuda.so": 0o755})
}

// l4tArchives are NVIDIA's linux-aarch64 (L4T) CUDA 12 archives of what a
// Jetson's torch needs, their linux-sbsa twins, and libcublas, which
// JetPack already has.
func l4tArchives(t *testing.T) []mirrortest.Archive {
	lib := func(soname string, data []byte) map[string][]byte { return map[string][]byte{soname: data} }
	plain := func(soname, symbol string) []byte {
		return linkedArm(t, elfwrite.Linked{Soname: soname, Needed: []string{"libc.so.6"}, Defs: defs("", symbol)})
	}
	var out []mirrortest.Archive
	for _, p := range []string{platform.LinuxAarch64, platform.LinuxSBSA} {
		out = append(out,
			mirrortest.Archive{Component: "libcudss", Product: "cudss", Version: "0.8.0.10", Platform: p, Variant: "cuda12", Machine: elf.EM_AARCH64, Raw: lib("libcudss.so.0", plain("libcudss.so.0", "cudssCreate"))},
			mirrortest.Archive{Component: "libcusparse_lt", Product: "cusparselt", Version: "0.8.1.1", Platform: p, Variant: "cuda12", Machine: elf.EM_AARCH64, Raw: lib("libcusparseLt.so.0", plain("libcusparseLt.so.0", "cusparseLtInit"))},
			mirrortest.Archive{Component: "libcublas", Product: "cuda", Version: "12.6.4.1", Platform: p, Machine: elf.EM_AARCH64, Raw: lib("libcublas.so.12", cudaLib(t, "libcublas.so.12", "cublasCreate_v2"))},
			mirrortest.Archive{Component: "cuda_cudart", Product: "cuda", Version: "12.6.77", Platform: p, Machine: elf.EM_AARCH64, Raw: lib("libcudart.so.12", cudaLib(t, "libcudart.so.12", "cudaMalloc"))})
	}
	return out
}

type jetsonFixture struct {
	sr     *lddtest.Sysroot
	site   string
	prefix *activation.Prefix
	client *fetch.Client
}

func newJetson(t *testing.T, host string) *jetsonFixture {
	t.Helper()
	sr := lddtest.ArmSysroot(t)
	hostEvidence(t, sr.Root, host)
	f := &jetsonFixture{sr: sr, site: filepath.Join(sr.Root, "opt/venv/lib/python3.10/site-packages"), prefix: openPrefixIn(t, "", sr.Root)}
	var err error
	if f.client, err = fetch.NewClient(fetch.Options{CacheDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *jetsonFixture) resolve(t *testing.T, project string, cat *catalog.Catalog, mod func(*Options)) *Outcome {
	t.Helper()
	ctx := context.Background()
	target, err := FindTarget(ctx, project, TargetOptions{SiteDir: f.site})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	opts := Options{Loader: ldso.Options{Root: f.sr.Root, LDLibraryPath: &empty, PreloadSet: true},
		Catalog: cat, Prefix: f.prefix, Client: f.client}
	if mod != nil {
		mod(&opts)
	}
	out, err := Resolve(ctx, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJetsonOrin resolves a Jetson torch on an Orin (L4T R36.4.7 and the
// tegra234 device tree, as on the real board), under --root: what
// JetPack's CUDA has (libcudart, libcublas) is taken from /usr/local/cuda,
// not downloaded; cuSPARSELt and cuDSS, which torch does not declare, come
// from NVIDIA's linux-aarch64 archives, never the linux-sbsa ones. With
// the root's own ldconfig, JetPack's directory goes into the root's
// ld.so.conf.d and cache, and the arm64 ld.so in a chroot finds and binds
// everything with no environment; without it, into the activation script,
// named as the root sees it. Undo leaves the tree as it was.
func TestJetsonOrin(t *testing.T) {
	for _, ldconfig := range []bool{true, false} {
		name := "the root's ldconfig"
		if !ldconfig {
			name = "no ldconfig in the root"
		}
		t.Run(name, func(t *testing.T) {
			f := newJetson(t, "jetson-orin-nano")
			if ldconfig {
				f.sr.InstallLdconfig(t)
			}
			jetPackCUDA(t, f.sr.Root)
			torchForJetson(t, f.site, false)
			before := lddtest.TreeState(t, f.sr.Root, f.prefix.Dir())
			m, cat := serveCatalog(t, l4tArchives(t))
			out := f.resolve(t, "torch", cat, nil)
			if !out.OK || out.Host == nil || out.Host.Kind != platform.KindJetsonOrin || out.Platform != platform.LinuxAarch64 || out.CUDAMajor != 12 {
				t.Fatalf("resolve: ok=%v host=%+v platform=%s cuda=%d stopped=%q unresolved=%+v", out.OK, out.Host, out.Platform, out.CUDAMajor, out.Stopped, out.Unresolved)
			}
			plan := out.Rounds[0].Plan
			var jp []string
			for _, j := range plan.JetPack {
				jp = append(jp, j.String())
			}
			want := []string{
				"libcublas.so.12: taken from JetPack 6 (L4T R36.4.7), /usr/local/cuda/lib64/libcublas.so.12",
				"libcudart.so.12: taken from JetPack 6 (L4T R36.4.7), /usr/local/cuda/lib64/libcudart.so.12",
			}
			if !slices.Equal(jp, want) {
				t.Errorf("JetPack's libraries: %q, want %q", jp, want)
			}
			var steps, undeclared []string
			for _, s := range plan.Steps {
				steps = append(steps, s.Component+" "+s.Platform)
			}
			for _, u := range plan.Undeclared {
				undeclared = append(undeclared, u.Soname)
			}
			slices.Sort(steps)
			slices.Sort(undeclared)
			if !slices.Equal(steps, []string{"libcudss linux-aarch64", "libcusparse_lt linux-aarch64"}) {
				t.Errorf("downloads %v, want cuDSS and cuSPARSELt for linux-aarch64 only", steps)
			}
			if !slices.Equal(undeclared, []string{"libcudss.so.0", "libcusparseLt.so.0"}) {
				t.Errorf("undeclared by torch: %v, want cuDSS and cuSPARSELt", undeclared)
			}
			for p, n := range m.Requests() {
				if strings.Contains(p, "linux-sbsa") || strings.Contains(p, "libcublas") || strings.Contains(p, "cuda_cudart") {
					t.Errorf("fetched %s (%d times)", p, n)
				}
			}
			var env []string
			envDirs, err := f.prefix.EnvDirs()
			if err != nil {
				t.Fatal(err)
			}
			if ldconfig {
				if !slices.Contains(out.Activation.LdConfDirs, "/usr/local/cuda/lib64") || len(envDirs) > 0 {
					t.Fatalf("activation %+v, script directories %v; want JetPack's /usr/local/cuda/lib64 in the root's ld.so.conf.d", out.Activation, envDirs)
				}
			} else {
				if !slices.Equal(envDirs, []string{"/usr/local/cuda/lib64"}) || len(out.Activation.Notes) == 0 {
					t.Fatalf("script directories %v (notes %q); want JetPack's /usr/local/cuda/lib64, as the root names it, and why", envDirs, out.Activation.Notes)
				}
				env = []string{"LD_LIBRARY_PATH=" + strings.Join(envDirs, ":")}
			}
			judgeInTree(t, f.sr, []string{strings.TrimPrefix(filepath.Join(f.site, "torch/lib/libtorch_cuda.so"), f.sr.Root)}, env)
			if _, err := f.prefix.Undo(context.Background(), []string{"torch"}, nil); err != nil {
				t.Fatal(err)
			}
			if after := lddtest.TreeState(t, f.sr.Root, f.prefix.Dir()); !slices.Equal(after, before) {
				t.Errorf("undo did not restore the tree: first difference %s", lddtest.Diff(before, after))
			}
		})
	}
}

// TestWrongArmPlatformRefused: an archive built for the other aarch64
// platform is refused with one line saying why, whether --platform asked
// for it or a catalog layer lists it under the wrong platform; nothing is
// downloaded.
func TestWrongArmPlatformRefused(t *testing.T) {
	t.Run("linux-sbsa on an Orin, by --platform", func(t *testing.T) {
		f := newJetson(t, "jetson-orin-nano")
		torchForJetson(t, f.site, true)
		m, cat := serveCatalog(t, l4tArchives(t))
		out := f.resolve(t, "torch", cat, func(o *Options) { o.Platform = platform.LinuxSBSA })
		if out.PlatformOverride != "--platform linux-sbsa instead of linux-aarch64 (Jetson Orin (Tegra234))" {
			t.Errorf("override: %q", out.PlatformOverride)
		}
		wantRefused(t, out, m, "libcudss.so.0", "libcudss 0.8.0.10 (libcudss-linux-sbsa-0.8.0.10_cuda12-archive.tar.xz) is a linux-sbsa build, for Arm servers (SBSA); this host is a Jetson Orin (Tegra234) with L4T R36.4.7, whose CUDA 12 libraries are NVIDIA's linux-aarch64 (L4T) builds", "drop --platform")
	})
	t.Run("linux-aarch64 listed as linux-sbsa, on a DGX Spark", func(t *testing.T) {
		f := newJetson(t, "dgx-spark")
		torchForJetson(t, f.site, true)
		var mislabelled []mirrortest.Archive
		for _, a := range l4tArchives(t) {
			if a.Platform == platform.LinuxAarch64 {
				a.ListedAs = platform.LinuxSBSA
				mislabelled = append(mislabelled, a)
			}
		}
		m, cat := serveCatalog(t, mislabelled)
		out := f.resolve(t, "torch", cat, nil)
		if out.Host.Kind != platform.KindDGXSpark || out.Platform != platform.LinuxSBSA {
			t.Fatalf("host %s, platform %s", out.Host.Kind, out.Platform)
		}
		wantRefused(t, out, m, "libcusparseLt.so.0", "libcusparse_lt 0.8.1.1 (libcusparse_lt-linux-aarch64-0.8.1.1_cuda12-archive.tar.xz) is a linux-aarch64 build, for Jetson's L4T CUDA 12 (it needs the Tegra driver); this host is a GB10 (DGX Spark), which takes linux-sbsa builds", "linux-sbsa archive")
	})
}

func wantRefused(t *testing.T, out *Outcome, m *mirrortest.Mirror, soname, reason, advice string) {
	t.Helper()
	if n := m.Total(); n != 0 {
		t.Errorf("%d requests to the mirror, want none: %v", n, m.Requests())
	}
	if out.OK || len(out.Rounds[0].Plan.Steps) != 0 || out.Stopped != "no archive provides what is missing" {
		t.Errorf("ok=%v steps=%d stopped=%q", out.OK, len(out.Rounds[0].Plan.Steps), out.Stopped)
	}
	for _, u := range out.Unresolved {
		if u.Soname == soname {
			if u.Reason != reason || !strings.Contains(u.Advice, advice) {
				t.Errorf("%s: %q (advice %q)\nwant %q (advice with %q)", soname, u.Reason, u.Advice, reason, advice)
			}
			return
		}
	}
	t.Errorf("%s not refused: %+v", soname, out.Unresolved)
}

// TestJetsonRefusesSBSAWheels: on an Orin, the pinned nvidia-* wheel the
// index has for aarch64 is an SBSA build: refused with its reason (source
// pypi), and NVIDIA's linux-aarch64 archive is taken instead (auto).
func TestJetsonRefusesSBSAWheels(t *testing.T) {
	f := newJetson(t, "jetson-orin-nano")
	libs := map[string][]byte{"nvidia/cusparselt/lib/libcusparseLt.so.0": elfBytes(t, arm64(elfwrite.Spec{Soname: "libcusparseLt.so.0", Needed: []string{"libc.so.6"}}))}
	writeDist(t, f.site, "nvidia-cusparselt-cu12", "0.8.1", nil, libs, nil)
	writeDist(t, f.site, "gpupkg", "1.0", []string{"nvidia-cusparselt-cu12==0.8.1"}, map[string][]byte{
		"gpupkg/__init__.py": []byte("\n"),
		"gpupkg/lib/libgpupkg.so": elfBytes(t, arm64(elfwrite.Spec{Soname: "libgpupkg.so", Needed: []string{"libcudart.so.12", "libcusparseLt.so.0", "libc.so.6"},
			RPath: elfwrite.Str("$ORIGIN/../../nvidia/cusparselt/lib")})),
	}, map[string]fs.FileMode{"gpupkg/lib/libgpupkg.so": 0o755})
	jetPackCUDA(t, f.sr.Root)
	// The wheel's library is gone from the disk; RECORD still lists it.
	if err := os.Remove(filepath.Join(f.site, "nvidia/cusparselt/lib/libcusparseLt.so.0")); err != nil {
		t.Fatal(err)
	}
	ix := indextest.Serve(t, indextest.Wheel{Project: "nvidia-cusparselt-cu12", Version: "0.8.1", Tags: "py3-none-manylinux_2_28_aarch64", Files: libs})
	index, err := pypi.NewClient(pypi.Options{Indexes: []string{ix.URL}})
	if err != nil {
		t.Fatal(err)
	}
	_, cat := serveCatalog(t, l4tArchives(t))
	out := f.resolve(t, "gpupkg", cat, func(o *Options) { o.DryRun, o.Index, o.Source = true, index, SourcePyPI })
	found := false
	for _, u := range out.Unresolved {
		if u.Soname == "libcusparseLt.so.0" {
			found = true
			if !strings.Contains(u.Reason, "nvidia_cusparselt_cu12-0.8.1-py3-none-manylinux_2_28_aarch64.whl (an SBSA build, for Arm servers: it does not run on this Jetson Orin (Tegra234) with L4T R36.4.7") {
				t.Errorf("reason %q", u.Reason)
			}
		}
	}
	if !found {
		t.Errorf("source pypi: the SBSA wheel was not refused: steps %+v unresolved %+v", out.Rounds[0].Plan.Steps, out.Unresolved)
	}
	out = f.resolve(t, "gpupkg", cat, func(o *Options) { o.DryRun, o.Index, o.Source = true, index, SourceAuto })
	var steps []string
	for _, s := range out.Rounds[0].Plan.Steps {
		steps = append(steps, string(s.Source)+" "+s.Component+" "+s.Platform)
	}
	if !slices.Equal(steps, []string{"nvidia libcusparse_lt linux-aarch64"}) {
		t.Errorf("source auto: steps %v, want NVIDIA's linux-aarch64 cuSPARSELt; unresolved %+v", steps, out.Unresolved)
	}
}

// TestEmbeddedCatalogServesJetson: the two libraries a Jetson's torch
// misses come from NVIDIA's linux-aarch64 (L4T) CUDA 12 archives in the
// embedded catalog (generated from the real cuSPARSELt and cuDSS manifests).
func TestEmbeddedCatalogServesJetson(t *testing.T) {
	cat, err := catalog.Load(context.Background(), catalog.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for soname, component := range map[string]string{"libcusparseLt.so.0": "libcusparse_lt", "libcudss.so.0": "libcudss"} {
		m, err := cat.Which(soname, catalog.Query{Platform: platform.LinuxAarch64, CUDAMajor: 12})
		if err != nil {
			t.Fatalf("%s for linux-aarch64, CUDA 12: %v", soname, err)
		}
		if m.Component != component || m.Platform != platform.LinuxAarch64 || platform.ArchivePlatform(m.URL) != platform.LinuxAarch64 {
			t.Errorf("%s: %s %s for %s (%s)", soname, m.Component, m.Version, m.Platform, m.URL)
		}
	}
}
