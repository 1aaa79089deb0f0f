package resolver

import (
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// TestResolveTorchSkeleton resolves the skeleton of a real PyTorch 2.11 +
// CUDA 13 environment from which the nvidia-cusparselt wheel is missing:
// libtorch_cuda.so's RPATH names $ORIGIN/../../nvidia/cusparselt/lib, which
// no longer exists; cudadeps creates it and links cuSPARSELt there, and the
// real loader then finds everything but the driver's libcuda.so.1, which
// resolve reports with advice instead of fetching.
func TestResolveTorchSkeleton(t *testing.T) {
	site, _ := torchtree.Tree(t, torchtree.Options{Keep: torchtree.Without("nvidia/cusparselt/")})
	_, cat := serveCatalog(t, []mirrortest.Archive{{
		Component: "libcusparse_lt", Product: "cusparselt", Version: "9.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs:  map[string]elfwrite.Spec{"libcusparseLt.so.0.9.9": {Soname: "libcusparseLt.so.0", Needed: []string{"libc.so.6"}}},
		Links: map[string]string{"libcusparseLt.so.0": "libcusparseLt.so.0.9.9"},
	}})
	ctx := context.Background()
	prefix := filepath.Join(t.TempDir(), "prefix")
	client, _ := fetch.NewClient(fetch.Options{CacheDir: t.TempDir()})
	torchDir := filepath.Join(site, "torch")
	target, err := FindTarget(ctx, torchDir, TargetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	out, err := Resolve(ctx, target, Options{Loader: ldso.Options{LDLibraryPath: &empty, PreloadSet: true}, Catalog: cat, Prefix: openPrefix(t, prefix), Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if out.CUDAMajor != 13 || out.Platform != "linux-x86_64" {
		t.Errorf("platform %s, CUDA %d", out.Platform, out.CUDAMajor)
	}
	placed := filepath.Join(site, "nvidia/cusparselt/lib/libcusparseLt.so.0")
	if _, err := os.Lstat(placed); err != nil {
		t.Fatalf("cuSPARSELt not placed in the directory torch's RPATH names: %v (rounds %+v)", err, out.Rounds)
	}
	// The driver library is never fetched; without a driver on this host it
	// stays, with advice, and nothing else does.
	for _, u := range out.Unresolved {
		if u.Soname != "libcuda.so.1" || u.Kind != UnresolvedDriver || u.Advice == "" {
			t.Errorf("unresolved %+v", u)
		}
	}
	ld, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so")
	res, err := lddtest.List(ctx, ld, filepath.Join(torchDir, "lib/libtorch_cuda.so"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sawSparse := false
	for _, l := range res.Lines {
		if l.NotFound && l.Name != "libcuda.so.1" {
			t.Errorf("ld.so does not find %s after resolve", l.Name)
		}
		if l.Name == "libcusparseLt.so.0" {
			sawSparse = !l.NotFound && strings.HasSuffix(l.Path, "nvidia/cusparselt/lib/libcusparseLt.so.0")
		}
	}
	if !sawSparse {
		t.Errorf("ld.so did not load libcusparseLt.so.0 from nvidia/cusparselt/lib:\n%s", res.Raw)
	}
}
