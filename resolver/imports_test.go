package resolver

import (
	"context"
	"debug/elf"
	"path/filepath"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/torchenv"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// In the healthy torch environment, libtorch_nvshmem.so binds a symbol of
// libc10_cuda.so that it does not need: torch._C loads libc10_cuda.so
// first. The resolve loads each library of torch after torch's extension
// modules, as importing torch does, and finds nothing to do; it names no
// undefined symbol.
func TestResolveLoadsLibrariesAfterTheirModules(t *testing.T) {
	python, site := venvSite(t)
	torchenv.Build(t, torchenv.Options{Site: site, ELF: true})
	torchenv.LinkSymbol(t, site, "torch/lib/libc10_cuda.so", "torch/lib/libtorch_nvshmem.so", "_ZN3c104cuda9SetDeviceEa")
	driver := t.TempDir()
	if err := elfwrite.Write(filepath.Join(driver, "libcuda.so.1"), elfwrite.Spec{Soname: "libcuda.so.1", Machine: elf.EM_X86_64, Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	target, err := FindTarget(ctx, "torch", TargetOptions{Python: python})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(ctx, catalog.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Resolve(ctx, target, Options{Loader: ldso.Options{LDLibraryPath: &driver, PreloadSet: true}, Catalog: cat, CUDAMajor: 13, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := out.Rounds[0].Missing; len(n) != 0 {
		t.Errorf("missing: %+v", n)
	}
	nvshmem := filepath.Join(site, "torch/lib/libtorch_nvshmem.so")
	seen := false
	for _, r := range out.FinalScan.Roots {
		if r.Path != nvshmem {
			continue
		}
		seen = true
		if r.UndefinedSymbols == nil || len(r.UndefinedSymbols) != 0 || !r.OK {
			t.Errorf("libtorch_nvshmem.so: undefined symbols %v, ok %v", r.UndefinedSymbols, r.OK)
		}
		if r.Import == nil || len(r.Import.After) == 0 {
			t.Errorf("libtorch_nvshmem.so was loaded after nothing: %+v", r.Import)
		}
	}
	if !seen {
		t.Error("libtorch_nvshmem.so is not among the resolve's roots")
	}
}
