// Command demowheel writes examples/demo-0.1-py3-none-linux_x86_64.whl: a
// tiny wheel shaped like a CUDA 13 PyTorch build whose library needs cuDSS
// and cuBLAS, which no wheel in it provides. It lets `cudadeps resolve`
// show its plan on any machine:
//
//	go run ./cmd/cudadeps resolve examples/demo-0.1-py3-none-linux_x86_64.whl --dry-run
//
// Regenerate with: go run ./examples/demowheel
package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	"github.com/cudadeps/cudadeps/internal/elfwrite"
)

// Wheel is where the wheel is written, relative to the repository root.
const Wheel = "examples/demo-0.1-py3-none-linux_x86_64.whl"

// Build returns the bytes of the wheel; the same every time.
func Build() ([]byte, error) {
	objs := map[string]elfwrite.Spec{
		"demo/lib/libdemo_cuda.so": {Soname: "libdemo_cuda.so", Needed: []string{"libcudart.so.13", "libcublas.so.13", "libcudss.so.0", "libc.so.6"},
			RPath: elfwrite.Str("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../../nvidia/cudss/lib:$ORIGIN")},
		"nvidia/cu13/lib/libcudart.so.13": {Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}},
	}
	files := map[string][]byte{
		"demo/__init__.py":            []byte("import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libdemo_cuda.so'))\n"),
		"demo-0.1.dist-info/METADATA": []byte("Metadata-Version: 2.1\nName: demo\nVersion: 0.1\n"),
		"demo-0.1.dist-info/WHEEL":    []byte("Wheel-Version: 1.0\nGenerator: cudadeps demowheel\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"),
	}
	for p, spec := range objs {
		b, err := elfwrite.Build(spec)
		if err != nil {
			return nil, err
		}
		files[p] = b
	}
	var names []string
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range names {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: p, Method: zip.Deflate, Modified: when})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(files[p]); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
