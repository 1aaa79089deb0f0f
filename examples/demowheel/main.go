// Command demowheel writes examples/demo-0.1-py3-none-linux_x86_64.whl: the
// demonstration's package (see examples/internal/demoset) for x86_64, a
// tiny wheel shaped like a CUDA 13 PyTorch build whose library needs
// libcudart, cuBLAS (both pinned) and cuDSS (undeclared). pip installs it,
// after which `import demo` fails as a broken CUDA wheel fails, and
// cudadeps can plan what it lacks:
//
//	go run ./cmd/cudadeps resolve examples/demo-0.1-py3-none-linux_x86_64.whl --dry-run
//	python3 -m pip install --no-deps examples/demo-0.1-py3-none-linux_x86_64.whl
//	go run ./cmd/cudadeps resolve demo --dry-run
//
// Regenerate with: go run ./examples/demowheel
package main

import (
	"debug/elf"
	"fmt"
	"log"
	"os"

	"github.com/cudadeps/cudadeps/examples/internal/demoset"
)

// Wheel is where the wheel is written, relative to the repository root.
const Wheel = "examples/demo-0.1-py3-none-linux_x86_64.whl"

// Build returns the bytes of the wheel; the same every time.
func Build() ([]byte, error) {
	set, err := demoset.For(elf.EM_X86_64)
	if err != nil {
		return nil, err
	}
	w, err := set.Package()
	if err != nil {
		return nil, err
	}
	return w.Build()
}

func main() {
	data, err := Build()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(Wheel, data, 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", Wheel)
}
