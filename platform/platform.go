// Package platform names the Linux platforms NVIDIA publishes archives for and tells which one a machine needs.
package platform

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// The platforms NVIDIA publishes Linux archives for, in display order.
const (
	LinuxX86_64  = "linux-x86_64"
	LinuxSBSA    = "linux-sbsa"
	LinuxAarch64 = "linux-aarch64" // Jetson (Tegra), up to CUDA 12
)

// All lists the platforms, in display order.
func All() []string { return []string{LinuxX86_64, LinuxSBSA, LinuxAarch64} }

// Valid reports whether p names a platform.
func Valid(p string) bool { return slices.Contains(All(), p) }

// Check returns nil for a platform name and otherwise an error that lists
// the names.
func Check(p string) error {
	if Valid(p) {
		return nil
	}
	return fmt.Errorf("%q is not a platform: want one of %s", p, strings.Join(All(), ", "))
}

// Rank orders platforms for display; unknown names sort last.
func Rank(p string) int {
	if i := slices.Index(All(), p); i >= 0 {
		return i
	}
	return len(All())
}

// For names the platform whose archives run on an ELF machine: x86_64 →
// linux-x86_64; aarch64 → linux-sbsa, except a Jetson (Tegra) on CUDA 12 or
// older → linux-aarch64. From CUDA 13 on, Jetson Thor uses linux-sbsa too.
// A Tegra host with an unknown CUDA major (0) is ambiguous: an error.
func For(machine elf.Machine, tegra bool, cudaMajor int) (string, error) {
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

// Host is For this machine's architecture and Tegra-ness.
func Host(cudaMajor int) (string, error) {
	m := HostMachine()
	if m == elf.EM_NONE {
		return "", fmt.Errorf("NVIDIA publishes no Linux archives for %s hosts; give --platform", runtime.GOARCH)
	}
	return For(m, IsTegra(""), cudaMajor)
}

// HostMachine is this machine's ELF machine among those NVIDIA publishes
// for, or EM_NONE.
func HostMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}

// TegraReleaseFile is where a Jetson names its L4T release.
const TegraReleaseFile = "/etc/nv_tegra_release"

// IsTegra reports whether the system under root ("" for this host) is a
// Jetson: it has /etc/nv_tegra_release, or its device tree is compatible
// with "nvidia,tegra…".
func IsTegra(root string) bool {
	if _, err := os.Stat(Under(root, TegraReleaseFile)); err == nil {
		return true
	}
	for _, p := range []string{"/proc/device-tree/compatible", "/sys/firmware/devicetree/base/compatible"} {
		data, err := os.ReadFile(Under(root, p))
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

// TegraRelease reads the L4T release line of a Jetson under root ("" for
// this host), e.g. "R36 (release), REVISION: 4.3"; "L4T" when the file is
// there but says nothing, "" when it is not a Jetson that has the file.
func TegraRelease(root string) string {
	rel, err := os.ReadFile(Under(root, TegraReleaseFile))
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(rel), "\n")
	if s := strings.TrimSpace(strings.TrimPrefix(line, "#")); s != "" {
		return s
	}
	return "L4T"
}

// Under maps an absolute path of the system under root to this machine's
// file system: the path itself when root is "" (this host), else the path
// inside root.
func Under(root, p string) string {
	if root == "" || root == "/" {
		return p
	}
	return filepath.Join(root, p)
}

// MachineName is an ELF machine as `uname -m` and wheel platform tags name
// it (x86_64, aarch64).
func MachineName(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "x86_64"
	case elf.EM_AARCH64:
		return "aarch64"
	case elf.EM_PPC64:
		return "ppc64le"
	case elf.EM_386:
		return "i686"
	}
	return strings.ToLower(strings.TrimPrefix(m.String(), "EM_"))
}

// Machine is the ELF machine of a platform's archives, or EM_NONE for a
// name that is no platform.
func Machine(p string) elf.Machine {
	switch p {
	case LinuxX86_64:
		return elf.EM_X86_64
	case LinuxSBSA, LinuxAarch64:
		return elf.EM_AARCH64
	}
	return elf.EM_NONE
}
