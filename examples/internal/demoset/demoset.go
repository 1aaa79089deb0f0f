// Package demoset defines what the demonstration is made of, for one machine: a package shaped like a CUDA 13 PyTorch build whose library needs libraries nothing installed provides, and the index wheels and NVIDIA-layout archives that provide them.
package demoset

import (
	"debug/elf"
	"fmt"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/redistwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/wheelwrite"
)

// The pins the demo package declares, as a CUDA 13 PyTorch build declares
// its NVIDIA wheels (these two are the real pins of torch 2.11 cu130).
const (
	CublasPin  = "13.1.0.3"
	RuntimePin = "13.0.96"
	// CudssVersion is the generated cuDSS release the mirror serves; the
	// package does not declare cuDSS, as PyTorch's aarch64 wheels do not.
	CudssVersion = "0.9.9.9"
)

// Set is the demonstration for one machine.
type Set struct {
	Machine  elf.Machine
	Platform string // NVIDIA's: linux-x86_64 or linux-sbsa
	arch     string // the wheel tags': x86_64 or aarch64
}

// For returns the set for machine: EM_X86_64 or EM_AARCH64.
func For(machine elf.Machine) (Set, error) {
	switch machine {
	case elf.EM_X86_64:
		return Set{Machine: machine, Platform: "linux-x86_64", arch: "x86_64"}, nil
	case elf.EM_AARCH64:
		return Set{Machine: machine, Platform: "linux-sbsa", arch: "aarch64"}, nil
	}
	return Set{}, fmt.Errorf("no demonstration for %s: x86_64 and aarch64 only", machine)
}

// Package is the demo package's wheel: demo/lib/libdemo_cuda.so needs
// libcudart.so.13, libcublas.so.13 and libcudss.so.0, and searches
// nvidia/cu13/lib and nvidia/cudss/lib (RPATH, as torch's libraries do,
// whether or not a wheel installed them); demo/__init__.py loads
// it, so that `import demo` fails as a broken CUDA wheel fails.
func (s Set) Package() (wheelwrite.Wheel, error) {
	lib, err := elfwrite.Build(elfwrite.Spec{Machine: s.Machine, Soname: "libdemo_cuda.so",
		Needed: []string{"libcudart.so.13", "libcublas.so.13", "libcudss.so.0", "libc.so.6"},
		RPath:  elfwrite.Str("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../../nvidia/cudss/lib:$ORIGIN")})
	if err != nil {
		return wheelwrite.Wheel{}, err
	}
	return wheelwrite.Wheel{Project: "demo", Version: "0.1", Tags: "py3-none-linux_" + s.arch,
		Metadata: "Requires-Dist: nvidia-cuda-runtime==" + RuntimePin + "\nRequires-Dist: nvidia-cublas==" + CublasPin + "\n",
		Files: map[string][]byte{
			"demo/__init__.py":         []byte("import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libdemo_cuda.so'))\n"),
			"demo/lib/libdemo_cuda.so": lib,
		}}, nil
}

// Runtime is the nvidia-cuda-runtime wheel at the pin: installed beside
// the package from the start.
func (s Set) Runtime() (wheelwrite.Wheel, error) {
	return s.toolkitWheel("nvidia-cuda-runtime", RuntimePin, "libcudart.so.13")
}

// Cublas is the nvidia-cublas wheel at the pin, which the index serves.
func (s Set) Cublas() (wheelwrite.Wheel, error) {
	return s.toolkitWheel("nvidia-cublas", CublasPin, "libcublas.so.13")
}

// toolkitWheel is a CUDA 13 toolkit wheel: one library in nvidia/cu13/lib.
func (s Set) toolkitWheel(project, version, soname string) (wheelwrite.Wheel, error) {
	lib, err := elfwrite.Build(elfwrite.Spec{Machine: s.Machine, Soname: soname, Needed: []string{"libc.so.6"}})
	if err != nil {
		return wheelwrite.Wheel{}, err
	}
	return wheelwrite.Wheel{Project: project, Version: version, Tags: "py3-none-manylinux_2_17_" + s.arch,
		Files: map[string][]byte{"nvidia/cu13/lib/" + soname: lib}}, nil
}

// Archives are what the mirror serves, in NVIDIA's layout: cuDSS for CUDA 13.
func (s Set) Archives() []redistwrite.Archive {
	return []redistwrite.Archive{{Component: "libcudss", Product: "cudss", Version: CudssVersion, Platform: s.Platform, Variant: "cuda13", Machine: s.Machine,
		Libs:  map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}},
		Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}}}
}
