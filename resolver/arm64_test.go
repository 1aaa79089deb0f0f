package resolver

import (
	"context"
	"debug/elf"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// TestResolveArm64Sysroot prepares an aarch64 tree from this host: the
// package lives in an arm64 sysroot, is read without an interpreter, the
// NVIDIA platform follows from the ELF machine (linux-sbsa) and the CUDA
// major from libcudart, and afterwards the arm64 loader under qemu finds
// everything with no environment.
func TestResolveArm64Sysroot(t *testing.T) {
	sr := lddtest.ArmSysroot(t)
	site := filepath.Join(sr.Root, "opt/venv/lib/python3.12/site-packages")
	arm := func(s elfwrite.Spec) elfwrite.Spec { s.Machine = elf.EM_AARCH64; return s }
	writeDist(t, site, "gpupkg", "1.0", []string{"nvidia-cuda-runtime"}, map[string][]byte{
		"gpupkg/__init__.py": []byte("\n"),
		"gpupkg/lib/libgpupkg.so": elfBytes(t, arm(elfwrite.Spec{Soname: "libgpupkg.so", Needed: []string{"libcudart.so.13", "libnvpl_lapack_lp64_gomp.so.0", "libcudss.so.0", "libc.so.6"},
			RPath: elfwrite.Str("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../../nvidia/cudss/lib:$ORIGIN")})),
	}, map[string]fs.FileMode{"gpupkg/lib/libgpupkg.so": 0o755})
	writeDist(t, site, "nvidia-cuda-runtime", "13.0", nil, map[string][]byte{
		"nvidia/cu13/lib/libcudart.so.13": elfBytes(t, arm(elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}})),
	}, map[string]fs.FileMode{"nvidia/cu13/lib/libcudart.so.13": 0o755})

	_, cat := serveCatalog(t, []mirrortest.Archive{
		{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-sbsa", Variant: "cuda13", Machine: elf.EM_AARCH64,
			Libs:  map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}},
			Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}},
		{Component: "nvpl_lapack", Product: "nvpl", Version: "9.9.9", Platform: "linux-sbsa", Machine: elf.EM_AARCH64,
			Libs:  map[string]elfwrite.Spec{"libnvpl_lapack_lp64_gomp.so.0": {Soname: "libnvpl_lapack_lp64_gomp.so.0", Needed: []string{"libgomp.so.1", "libc.so.6"}}},
			Links: map[string]string{}},
	})
	ctx := context.Background()
	prefix := filepath.Join(sr.Root, "opt/cudadeps")
	client, err := fetch.NewClient(fetch.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	target, err := FindTarget(ctx, "gpupkg", TargetOptions{SiteDir: site})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	out, err := Resolve(ctx, target, Options{
		Loader:  ldso.Options{Root: sr.Root, LDLibraryPath: &empty, PreloadSet: true},
		Catalog: cat, Prefix: openPrefixIn(t, prefix, sr.Root), Client: client, Verify: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out.OK || out.Platform != "linux-sbsa" || out.CUDAMajor != 13 {
		t.Fatalf("resolve: ok=%v platform=%s cuda=%d stopped=%q unresolved=%+v", out.OK, out.Platform, out.CUDAMajor, out.Stopped, out.Unresolved)
	}
	guest := strings.TrimPrefix(filepath.Join(site, "gpupkg/lib/libgpupkg.so"), sr.Root)
	res, err := sr.List(ctx, guest, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, l := range res.Lines {
		if l.NotFound {
			t.Errorf("after resolve, the arm64 ld.so does not find %s", l.Name)
		}
		found[l.Name] = true
	}
	for _, want := range []string{"libcudss.so.0", "libnvpl_lapack_lp64_gomp.so.0", "libgomp.so.1"} {
		if !found[want] {
			t.Errorf("the arm64 ld.so did not list %s: %v", want, res.Raw)
		}
	}
}
