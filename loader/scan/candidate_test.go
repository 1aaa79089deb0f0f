package scan

import (
	"io/fs"
	"path"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
)

// TestCandidateRule checks the rule name by name: shared objects by any
// of their names read, sources, byte code, headers, data and metadata
// passed over without a stat, the rest read when executable.
func TestCandidateRule(t *testing.T) {
	for name, want := range map[string]candidacy{
		"libc10.so":                              readFile,
		"libcudart.so.13":                        readFile,
		"libcupti.so.2025.1.1":                   readFile,
		"_C.cpython-312-x86_64-linux-gnu.so":     readFile,
		"_cffi_backend.abi3.so":                  readFile,
		"libc.so":                                readFile, // a linker script: read, then found no ELF
		"torch_shm_manager":                      readIfExecutable,
		"protoc-3.13.0.0":                        readIfExecutable,
		"cmath":                                  readIfExecutable, // libcu++'s headers have no extension
		"libnvrtc-builtins.alt.so.13.0":          readFile,
		"__init__.py":                            skipFile,
		"functional.cpython-312.pyc":             skipFile,
		"Tensor.h":                               skipFile,
		"cuda_fp16.hpp":                          skipFile,
		"libdevice.10.bc":                        skipFile,
		"libcudadevrt.a":                         skipFile,
		"METADATA":                               skipFile,
		"RECORD":                                 skipFile,
		"LICENSE":                                skipFile,
		"LICENSE.txt":                            skipFile,
		"py.typed":                               skipFile,
		"model.onnx":                             skipFile,
		".hidden":                                readIfExecutable, // a leading dot is no extension
		"archive.tar.gz":                         skipFile,
		"libfoo.so.py":                           readFile, // ".so" decides first
		"kernel.cubin":                           skipFile,
		"cuobjdump":                              readIfExecutable,
		"torch-2.11.0.dist-info":                 readIfExecutable, // a directory's name: the type decides
		"nvdisasm":                               readIfExecutable,
		"x.ld":                                   readIfExecutable,
		"mod.node":                               readIfExecutable,
		"tool.exe":                               readIfExecutable,
		"jaxlib_mosaic_gpu_something.cpython.so": readFile,
	} {
		if got := candidate(name); got != want {
			t.Errorf("candidate(%q) = %d, want %d", name, got, want)
		}
	}
	if !skipDir("__pycache__") || skipDir("pycache") || skipDir("lib") {
		t.Error("skipDir: only __pycache__ is passed over")
	}
}

// TestCandidateRuleFindsTheRealEnvironment holds the rule against the 859
// ELF files of a real PyTorch 2.11 + JAX + CuPy environment: each is read
// by name, or is a program (which pip installs with its execute bit).
func TestCandidateRuleFindsTheRealEnvironment(t *testing.T) {
	recs, err := torchtree.LoadFile(torchtree.Corpus(t))
	if err != nil {
		t.Fatal(err)
	}
	byName, programs := 0, 0
	for _, r := range recs {
		if path.Base(path.Dir(r.Path)) == "__pycache__" {
			t.Errorf("%s: under __pycache__", r.Path)
		}
		switch candidate(path.Base(r.Path)) {
		case readFile:
			byName++
		case readIfExecutable:
			if !r.Executable() {
				t.Errorf("%s: named without .so, and no program (no execute bit to find it by)", r.Path)
			}
			programs++
		default:
			t.Errorf("%s: passed over by name", r.Path)
		}
	}
	if byName+programs != len(recs) || len(recs) < 800 {
		t.Errorf("%d records: %d read by name, %d programs", len(recs), byName, programs)
	}
	t.Logf("%d ELF files: %d by name, %d programs (by their execute bit)", len(recs), byName, programs)
}

// TestMayBeObject: the rule outside a walk asks for the mode only of a
// name that does not tell.
func TestMayBeObject(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      fs.FileMode
		want      bool
		modeAsked bool
	}{
		{"libtorch_cuda.so", 0o644, true, false},
		{"_C.cpython-312-x86_64-linux-gnu.so", 0o644, true, false},
		{"__init__.py", 0o755, false, false},
		{"RECORD", 0o755, false, false},
		{"torch_shm_manager", 0o755, true, true},
		{"torch_shm_manager", 0o644, false, true},
	} {
		asked := false
		got := MayBeObject(tc.name, func() fs.FileMode { asked = true; return tc.mode })
		if got != tc.want || asked != tc.modeAsked {
			t.Errorf("%s %v: %v, mode asked %v; want %v, %v", tc.name, tc.mode, got, asked, tc.want, tc.modeAsked)
		}
	}
}
