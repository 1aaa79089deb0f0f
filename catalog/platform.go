package catalog

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// PlatformFor names the NVIDIA platform whose archives run on an ELF
// machine: x86_64 → linux-x86_64; aarch64 → linux-sbsa, except a Jetson
// (Tegra) on CUDA 12 or older → linux-aarch64. From CUDA 13 on, Jetson Thor
// uses linux-sbsa too. A Tegra host with an unknown CUDA major (0) is
// ambiguous and gives an error.
func PlatformFor(machine elf.Machine, tegra bool, cudaMajor int) (string, error) {
	switch machine {
	case elf.EM_X86_64:
		return LinuxX86_64, nil
	case elf.EM_AARCH64:
		if !tegra || cudaMajor >= 13 {
			return LinuxSBSA, nil
		}
		if cudaMajor == 0 {
			return "", fmt.Errorf("on a Jetson (Tegra) the platform depends on the CUDA major: %s up to CUDA 12, %s from CUDA 13 on; give the CUDA major (--cuda N) or the platform (--platform)", LinuxAarch64, LinuxSBSA)
		}
		return LinuxAarch64, nil
	}
	return "", fmt.Errorf("NVIDIA publishes no Linux archives for %s machines (only x86_64 and aarch64)", machine)
}

// HostIsTegra reports whether the system under root ("" for this host) is a
// Jetson: it has /etc/nv_tegra_release, or its device tree is compatible
// with "nvidia,tegra…".
func HostIsTegra(root string) bool {
	if root == "" {
		root = "/"
	}
	if _, err := os.Stat(filepath.Join(root, "etc", "nv_tegra_release")); err == nil {
		return true
	}
	for _, p := range []string{"proc/device-tree/compatible", "sys/firmware/devicetree/base/compatible"} {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			continue
		}
		// The property is a list of NUL-terminated strings.
		for _, s := range bytes.Split(data, []byte{0}) {
			if bytes.HasPrefix(s, []byte("nvidia,tegra")) {
				return true
			}
		}
	}
	return false
}

// HostPlatform is PlatformFor this machine's architecture and Tegra-ness.
func HostPlatform(cudaMajor int) (string, error) {
	var m elf.Machine
	switch runtime.GOARCH {
	case "amd64":
		m = elf.EM_X86_64
	case "arm64":
		m = elf.EM_AARCH64
	default:
		return "", fmt.Errorf("NVIDIA publishes no Linux archives for %s hosts; give --platform", runtime.GOARCH)
	}
	return PlatformFor(m, HostIsTegra(""), cudaMajor)
}

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
