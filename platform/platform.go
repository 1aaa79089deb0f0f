// Package platform names the Linux platforms NVIDIA publishes archives for, and tells what kind of host a system is, with the evidence, and which platform it needs.
package platform

import (
	"debug/elf"
	"fmt"
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

// HostPlatform is the platform of this host's archives for a CUDA major
// (0: unknown), as Detect names the host.
func HostPlatform(cudaMajor int) (string, error) {
	if HostMachine() == elf.EM_NONE {
		return "", fmt.Errorf("NVIDIA publishes no Linux archives for %s hosts; give --platform", runtime.GOARCH)
	}
	return Detect(Probe{}).Platform(cudaMajor)
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

// MachineName is an ELF machine as `uname -m`, wheel platform tags and
// qemu-user's emulators name it (x86_64, aarch64).
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
	case elf.EM_RISCV:
		return "riscv64"
	case elf.EM_S390:
		return "s390x"
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
