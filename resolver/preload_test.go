package resolver

import (
	"context"
	"io/fs"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// TestPathfinderPreloadsBeforeTheModule: CuPy loads libcublas.so.13 by path
// from site-packages (CUDA Python's pathfinder) before it imports the
// module that needs it, which has no RUNPATH: the module's need is met by
// that copy, so nothing is missing while the wheel's file is there, and
// the need comes back once it is gone.
func TestPathfinderPreloadsBeforeTheModule(t *testing.T) {
	for _, present := range []bool{true, false} {
		python, site := venvSite(t)
		ext := "cpython-312-x86_64-linux-gnu.so"
		writeDist(t, site, "cupy-cuda13x", "14.0.0", nil, map[string][]byte{
			"cupy/__init__.py":                      nil,
			"cupy_backends/cuda/libs/cublas." + ext: elfBytes(t, elfwrite.Spec{Needed: []string{"libcublas.so.13", "libc.so.6"}}),
		}, map[string]fs.FileMode{"cupy_backends/cuda/libs/cublas." + ext: 0o755})
		lib := map[string][]byte{}
		if present {
			lib["nvidia/cu13/lib/libcublas.so.13"] = elfBytes(t, elfwrite.Spec{Soname: "libcublas.so.13", Needed: []string{"libc.so.6"}})
		}
		writeDist(t, site, "nvidia-cublas", "13.1.0.3", nil, lib, map[string]fs.FileMode{"nvidia/cu13/lib/libcublas.so.13": 0o755})
		ctx := context.Background()
		target, err := FindTarget(ctx, "cupy-cuda13x", TargetOptions{Python: python})
		if err != nil {
			t.Fatal(err)
		}
		cat, err := catalog.Load(ctx, catalog.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		empty := ""
		out, err := Resolve(ctx, target, Options{Loader: ldso.Options{LDLibraryPath: &empty, PreloadSet: true}, Catalog: cat, CUDAMajor: 13, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		missing := false
		for _, n := range out.Rounds[0].Missing {
			missing = missing || n.Soname == "libcublas.so.13"
		}
		if missing == present {
			t.Errorf("nvidia/cu13/lib/libcublas.so.13 present: %v; the resolve finds libcublas.so.13 missing: %v", present, missing)
		}
	}
}
