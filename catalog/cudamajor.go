package catalog

import (
	"regexp"
	"strconv"
	"strings"
)

// CUDAMajorFromSoname reads the CUDA major from a CUDA runtime soname:
// libcudart.so.13 → 13, libcudart.so.11.0 → 11. Other sonames give false:
// their numbers are library versions, not CUDA's (libcufft.so.11 is CUDA 12).
func CUDAMajorFromSoname(soname string) (int, bool) {
	rest, ok := strings.CutPrefix(soname, "libcudart.so.")
	if !ok {
		return 0, false
	}
	major, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(major)
	if err != nil || n <= 0 || strconv.Itoa(n) != major {
		return 0, false
	}
	return n, true
}

// cudaFamilyRE matches the NVIDIA libraries whose soname major is the CUDA
// major they belong to, also as auditwheel renames them
// (libcudart-a7b20f20.so.11.0). libcufft, libcusparse, libcurand and others
// are versioned on their own and say nothing about CUDA.
var cudaFamilyRE = regexp.MustCompile(`^lib(cudart|cublas|cublasLt|nvrtc|nvJitLink|nvjpeg|nppc)(?:-[0-9a-f]{8})?\.so\.([0-9]+)(?:\.|$)`)

// CUDAMajorHint reads a CUDA major from the soname of a library whose
// major follows CUDA's (libcudart, libcublas, libcublasLt, libnvrtc,
// libnvJitLink, libnvjpeg, libnppc): libcublas.so.13 → 13. Use it when no
// libcudart says it directly.
func CUDAMajorHint(soname string) (int, bool) {
	m := cudaFamilyRE.FindStringSubmatch(soname)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[2])
	if err != nil || n < 7 || n > 99 {
		return 0, false
	}
	return n, true
}
