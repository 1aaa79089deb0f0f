package scan

import (
	"context"
	"debug/elf"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/torchenv"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/runtimeopen"
)

// c10CUDASymbol stands for the symbols libtorch_nvshmem.so takes from
// libc10_cuda.so without needing it (the corpus records no symbols): torch
// loads libc10_cuda.so first, through torch._C.
const c10CUDASymbol = "_ZN3c104cuda9SetDeviceEa"

// torchSite builds the real torch 2.11 environment (dist-info folders and
// skeleton ELF files) with libtorch_nvshmem.so referring to c10CUDASymbol,
// which libc10_cuda.so defines; and a directory with the driver's
// libcuda.so.1.
func torchSite(t *testing.T) (site, driver string) {
	t.Helper()
	site = torchenv.Build(t, torchenv.Options{ELF: true})
	torchenv.LinkSymbol(t, site, "torch/lib/libc10_cuda.so", "torch/lib/libtorch_nvshmem.so", c10CUDASymbol)
	driver = t.TempDir()
	if err := elfwrite.Write(filepath.Join(driver, "libcuda.so.1"), elfwrite.Spec{Soname: "libcuda.so.1", Machine: elf.EM_X86_64, Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	return site, driver
}

func scanWithImports(t *testing.T, driver string, targets ...string) *Report {
	t.Helper()
	ctx := context.Background()
	l, err := ldso.New(ctx, ldso.Options{LDLibraryPath: &driver, PreloadSet: true, NoPreloadFile: true})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := runtimeopen.Load()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, l, targets, Options{Symbols: true, RuntimeOpens: runtimeopen.NewResolver(tab, l)})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A scan of the healthy torch environment's torch, torchvision and
// torchaudio loads each file as its import does: torchvision's and
// torchaudio's modules after torch's (whose libc10.so, libtorch.so they
// need with no RPATH that finds them), libtorch_nvshmem.so after torch._C
// (which loads the libc10_cuda.so whose symbol it binds). Every object
// loads; those that fail only on their own say so, and the real loader
// agrees both ways: on its own (ld.so --list, LD_BIND_NOW) it misses the
// same libraries and symbol, and with the files of the import loaded first
// (LD_PRELOAD of them and all they load: the global scope the import
// leaves) it finds and binds everything.
func TestScanLoadsAsImported(t *testing.T) {
	ld, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so")
	site, driver := torchSite(t)
	rep := scanWithImports(t, driver, filepath.Join(site, "torch"), filepath.Join(site, "torchvision"), filepath.Join(site, "torchaudio"))
	if !rep.OK() {
		for _, r := range rep.Roots {
			if !r.OK {
				t.Errorf("%s fails in its import: missing %v, undefined %v, version errors %v", r.Path, r.Missing, r.UndefinedSymbols, r.VersionErrors)
			}
		}
	}
	only := map[string]*Root{}
	for _, r := range rep.Roots {
		if r.Import == nil {
			// Programs (torch/bin/protoc) run; no import loads them.
			if !strings.HasPrefix(r.Path, filepath.Join(site, "torch/bin")+"/") {
				t.Errorf("%s was not loaded as imported", r.Path)
			}
			continue
		}
		if r.Import.OnlyInImport {
			rel, _ := filepath.Rel(site, r.Path)
			only[rel] = r
		}
	}
	var got []string
	for rel := range only {
		got = append(got, rel)
	}
	slices.Sort(got)
	want := []string{"torch/lib/libtorch_nvshmem.so", "torchaudio/lib/_torchaudio.abi3.so", "torchaudio/lib/libtorchaudio.abi3.so",
		"torchaudio/lib/torchaudio_prefixctc.abi3.so", "torchvision/_C.so", "torchvision/image.so"}
	if !slices.Equal(got, want) {
		t.Errorf("loaded only in their import:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := only["torch/lib/libtorch_nvshmem.so"]; r != nil && (r.Import.Alone.UndefinedSymbols != 1 || len(r.Import.Alone.MissingLibraries) != 0) {
		t.Errorf("libtorch_nvshmem.so on its own: %+v", r.Import.Alone)
	}
	if r := only["torchvision/_C.so"]; r != nil {
		if !slices.Contains(r.Import.Alone.MissingLibraries, "libtorch.so") || !slices.Contains(r.Import.After, filepath.Join(site, "torch/_C.cpython-312-x86_64-linux-gnu.so")) {
			t.Errorf("torchvision/_C.so: %+v", r.Import)
		}
	}
	env := []string{"LD_LIBRARY_PATH=" + driver}
	for rel, r := range only {
		alone, err := lddtest.List(context.Background(), ld, r.Path, append(slices.Clone(env), lddtest.BindEnv...))
		if err != nil {
			t.Fatal(err)
		}
		var notFound []string
		for _, line := range alone.Lines {
			if line.NotFound {
				notFound = append(notFound, line.Name)
			}
		}
		slices.Sort(notFound)
		model := slices.Sorted(slices.Values(r.Import.Alone.MissingLibraries))
		if !slices.Equal(notFound, model) || len(alone.UndefinedSymbols()) != r.Import.Alone.UndefinedSymbols {
			t.Errorf("%s on its own: ld.so misses %v and %d symbols, the model %v and %d", rel, notFound, len(alone.UndefinedSymbols()), model, r.Import.Alone.UndefinedSymbols)
		}
		pre := loadedAfter(t, ld, r.Import.After, env)
		in, err := lddtest.List(context.Background(), ld, r.Path, append(append(slices.Clone(env), "LD_PRELOAD="+strings.Join(pre, " ")), lddtest.BindEnv...))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range in.Lines {
			if line.NotFound {
				t.Errorf("%s after its import's files: ld.so does not find %s", rel, line.Name)
			}
		}
		if u := in.UndefinedSymbols(); len(u) > 0 || in.Fatal != "" {
			t.Errorf("%s after its import's files: undefined %v %s", rel, u, in.Fatal)
		}
	}
}

// loadedAfter lists the files of after and everything ld.so loads for
// each, each once, in that order, the loader itself left out: what
// LD_PRELOAD holds to start a process in the state those files' loads
// leave it.
func loadedAfter(t *testing.T, ld string, after, env []string) []string {
	t.Helper()
	var out []string
	for _, f := range after {
		o, err := lddtest.List(context.Background(), ld, f, env)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range append([]string{f}, pathsOf(o)...) {
			if !slices.Contains(out, p) && !strings.Contains(filepath.Base(p), "ld-linux") {
				out = append(out, p)
			}
		}
	}
	return out
}

func pathsOf(o *lddtest.Output) []string {
	var out []string
	for _, l := range o.Lines {
		if l.Path != "" {
			out = append(out, l.Path)
		}
	}
	return out
}
