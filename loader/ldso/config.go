package ldso

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// ArchConfig is what a loader of one architecture searches, beyond the
// objects' own paths: the parts of ld.so that were fixed when glibc was
// built (system directories, $LIB) or that depend on the CPU (hwcaps
// subdirectories, $PLATFORM).
type ArchConfig struct {
	Machine elf.Machine
	Class   elf.Class
	Flags   uint32 // e_flags of the objects (float ABI on ARM, RISC-V)

	// Interp is the loader's own path (PT_INTERP of a program of this arch).
	Interp string
	// SystemDirs are the default directories, in order, each ending in "/".
	SystemDirs []string
	// HWCaps are the glibc-hwcaps subdirectory names the CPU supports, best
	// first (x86-64-v4, x86-64-v3, ...).
	HWCaps []string
	// Legacy are the legacy hwcaps subdirectories tried in every search
	// directory by glibc before 2.37 (tls/haswell/x86_64/, ...), in order;
	// the directory itself ("") is tried last and is not listed.
	Legacy []string
	// Platform and Lib are the values of $PLATFORM and $LIB.
	Platform string
	Lib      string
	// GlibcVersion is the loader's glibc version when known ("2.36").
	GlibcVersion string
	// Source says where these facts came from (the loader's --help, or the
	// layout of the root).
	Source string
}

// subdirs returns the subdirectories tried inside every search directory,
// in the loader's order; the last entry is "" (the directory itself).
func (a *ArchConfig) subdirs() []string {
	out := make([]string, 0, len(a.HWCaps)+len(a.Legacy)+1)
	for _, h := range a.HWCaps {
		out = append(out, "glibc-hwcaps/"+h+"/")
	}
	out = append(out, a.Legacy...)
	return append(out, "")
}

// interpFor gives the usual PT_INTERP for an architecture.
func interpFor(m elf.Machine, c elf.Class, flags uint32) string {
	switch m {
	case elf.EM_X86_64:
		if c == elf.ELFCLASS32 {
			return "/libx32/ld-linux-x32.so.2"
		}
		return "/lib64/ld-linux-x86-64.so.2"
	case elf.EM_AARCH64:
		return "/lib/ld-linux-aarch64.so.1"
	case elf.EM_386:
		return "/lib/ld-linux.so.2"
	case elf.EM_ARM:
		if flags&0x400 != 0 {
			return "/lib/ld-linux-armhf.so.3"
		}
		return "/lib/ld-linux.so.3"
	case elf.EM_PPC64:
		return "/lib64/ld64.so.2"
	case elf.EM_S390:
		return "/lib/ld64.so.1"
	case elf.EM_RISCV:
		return "/lib/ld-linux-riscv64-lp64d.so.1"
	}
	return ""
}

// multiarchTriplet is Debian's multiarch directory name for an architecture.
func multiarchTriplet(m elf.Machine, c elf.Class, flags uint32) string {
	switch m {
	case elf.EM_X86_64:
		if c == elf.ELFCLASS32 {
			return "x86_64-linux-gnux32"
		}
		return "x86_64-linux-gnu"
	case elf.EM_AARCH64:
		return "aarch64-linux-gnu"
	case elf.EM_386:
		return "i386-linux-gnu"
	case elf.EM_ARM:
		if flags&0x400 != 0 {
			return "arm-linux-gnueabihf"
		}
		return "arm-linux-gnueabi"
	case elf.EM_PPC64:
		return "powerpc64le-linux-gnu"
	case elf.EM_S390:
		return "s390x-linux-gnu"
	case elf.EM_RISCV:
		return "riscv64-linux-gnu"
	}
	return ""
}

func platformName(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "x86_64"
	case elf.EM_AARCH64:
		return "aarch64"
	case elf.EM_386:
		return "i686"
	case elf.EM_ARM:
		return "v7l"
	case elf.EM_PPC64:
		return "power9"
	case elf.EM_S390:
		return "z13"
	case elf.EM_RISCV:
		return "riscv64"
	}
	return strings.ToLower(strings.TrimPrefix(m.String(), "EM_"))
}

// hostMachine is the ELF machine of the running program's host.
func hostMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	case "386":
		return elf.EM_386
	case "arm":
		return elf.EM_ARM
	case "ppc64le":
		return elf.EM_PPC64
	case "s390x":
		return elf.EM_S390
	case "riscv64":
		return elf.EM_RISCV
	}
	return elf.EM_NONE
}

// archFromLayout derives an ArchConfig from the files of a root: Debian's
// multiarch directories, or lib64, or lib; the glibc version from the
// version definitions of libc.so.6. It is used for foreign roots and when
// the loader cannot be asked.
func archFromLayout(fsys *rootFS, m elf.Machine, c elf.Class, flags uint32) *ArchConfig {
	a := &ArchConfig{Machine: m, Class: c, Flags: flags, Interp: interpFor(m, c, flags), Platform: platformName(m), Source: "layout of " + fsys.describe()}
	switch t := multiarchTriplet(m, c, flags); {
	case t != "" && (fsys.isDir("/lib/"+t) || fsys.isDir("/usr/lib/"+t)):
		// Debian and Ubuntu: multiarch directories first, then /lib, /usr/lib.
		a.SystemDirs = []string{"/lib/" + t + "/", "/usr/lib/" + t + "/", "/lib/", "/usr/lib/"}
	case c == elf.ELFCLASS64 && m != elf.EM_RISCV && (fsys.isDir("/lib64") || fsys.isDir("/usr/lib64")):
		// Fedora, RHEL, SUSE, Arch: 64-bit libraries in lib64.
		a.SystemDirs = []string{"/lib64/", "/usr/lib64/"}
	default:
		a.SystemDirs = []string{"/lib/", "/usr/lib/"}
	}
	a.Lib = strings.Trim(a.SystemDirs[0], "/")
	a.GlibcVersion = glibcVersion(fsys, a)
	// The CPU is this host's when the objects are of its kind; otherwise
	// unknown, and only what every CPU of the kind has is assumed.
	var cpu *cpuInfo
	if m == hostMachine() {
		cpu = readCPU()
	}
	x86 := m == elf.EM_X86_64 && c == elf.ELFCLASS64
	if x86 {
		a.Platform = x86Platform(a.GlibcVersion, cpu)
	}
	if x86 && (a.GlibcVersion == "" || !dotted.Less(a.GlibcVersion, "2.33")) {
		// glibc-hwcaps subdirectories exist since 2.33.
		a.HWCaps = x86HWCaps(cpu.flagSet())
	}
	if a.GlibcVersion != "" && dotted.Less(a.GlibcVersion, "2.37") {
		// Before 2.37 the loader also tries the legacy hwcaps subdirectories:
		// "tls", the platform, then the CPU's important hwcaps.
		comps := []string{"tls"}
		switch {
		case x86:
			// "x86_64" is no legacy platform name (_dl_x86_platforms has
			// i586, i686, haswell and xeon_phi), only a hwcap.
			if a.Platform == "haswell" || a.Platform == "xeon_phi" {
				comps = append(comps, a.Platform)
			}
			if cpu.intel() && has(cpu.flagSet(), "avx512cd", "avx512bw", "avx512dq", "avx512vl") && !cpu.flagSet()["avx512er"] {
				comps = append(comps, "avx512_1")
			}
			comps = append(comps, "x86_64")
		case m == elf.EM_AARCH64:
			comps = append(comps, a.Platform)
			if cpu == nil || cpu.flags["atomics"] {
				comps = append(comps, "atomics")
			}
		default:
			comps = append(comps, a.Platform)
		}
		a.Legacy = legacyCombinations(comps)
	}
	return a
}

// has reports whether every feature is in the CPU's flags.
func has(cpu map[string]bool, features ...string) bool {
	for _, f := range features {
		if !cpu[f] {
			return false
		}
	}
	return true
}

// legacyCombinations lists the subdirectories glibc 2.36 and earlier build
// from the legacy hwcaps names: every non-empty subset, largest mask first,
// each in component order ("tls/haswell/x86_64/", ..., "x86_64/").
func legacyCombinations(comps []string) []string {
	n := len(comps)
	if n == 0 || n > 10 {
		return nil
	}
	var out []string
	for mask := (1 << n) - 1; mask > 0; mask-- {
		var parts []string
		for i, c := range comps {
			if mask&(1<<(n-1-i)) != 0 {
				parts = append(parts, c)
			}
		}
		out = append(out, strings.Join(parts, "/")+"/")
	}
	return out
}

// glibcVersion reads the highest GLIBC_2.N version that libc.so.6 defines.
func glibcVersion(fsys *rootFS, a *ArchConfig) string {
	for _, dir := range a.SystemDirs {
		host, ok := fsys.resolve(dir + "libc.so.6")
		if !ok {
			continue
		}
		info, err := elfscan.ReadInfo(host)
		if err != nil || info.Machine != a.Machine || info.Class != a.Class {
			continue
		}
		best := ""
		for _, d := range info.VersionDefs {
			if v, ok := strings.CutPrefix(d.Name, "GLIBC_"); ok && dotted.Numeric(v) {
				if best == "" || dotted.Less(best, v) {
					best = v
				}
			}
		}
		if best != "" {
			return best
		}
	}
	return ""
}

// cpuInfo is what the loader's choices depend on of this machine's CPU.
type cpuInfo struct {
	vendor string          // vendor_id (x86: GenuineIntel, AuthenticAMD, ...)
	flags  map[string]bool // "flags" on x86, "Features" on arm64
}

func (c *cpuInfo) flagSet() map[string]bool {
	if c == nil {
		return nil
	}
	return c.flags
}

// intel reports whether glibc classes the CPU as arch_kind_intel.
func (c *cpuInfo) intel() bool { return c != nil && c.vendor == "GenuineIntel" }

// readCPU reads this CPU's vendor and feature flags from /proc/cpuinfo; nil
// when unreadable.
func readCPU() *cpuInfo {
	data, err := regfile.Read("/proc/cpuinfo", 16<<20)
	if err != nil {
		return nil
	}
	cpu := &cpuInfo{flags: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "vendor_id":
			if cpu.vendor == "" {
				cpu.vendor = strings.TrimSpace(v)
			}
		case "flags", "Features":
			for _, f := range strings.Fields(v) {
				cpu.flags[f] = true
			}
			return cpu
		}
	}
	return cpu
}

// x86Platform is the value of $PLATFORM (GLRO(dl_platform)) of an x86-64
// loader of a glibc version ("" when unknown: a recent one) on a CPU (nil
// when unknown). The kernel passes "x86_64" as AT_PLATFORM; from glibc 2.26
// on, init_cpu_features (sysdeps/x86/cpu-features.c, the same logic through
// 2.42) replaces it on CPUs it classes as Intel: "xeon_phi" when AVX512CD,
// AVX512ER and AVX512PF are usable, else "haswell" when AVX2, FMA, BMI1,
// BMI2, LZCNT, MOVBE and POPCNT are. glibc 2.26 itself first cleared the
// value, so that on other CPUs $PLATFORM had none (fixed in 2.27, BZ #22299):
// path entries using it are then dropped. The loader stopped printing the
// value in `ld.so --help` in 2.37; `ld.so --list-diagnostics` prints it as
// dl_platform from 2.33 on, which is what probeLoader reads on the host.
func x86Platform(glibc string, cpu *cpuInfo) string {
	if glibc != "" && dotted.Less(glibc, "2.26") {
		return "x86_64"
	}
	platform := ""
	if cpu.intel() {
		f := cpu.flags
		switch {
		case has(f, "avx512cd", "avx512er", "avx512pf"):
			platform = "xeon_phi"
		// /proc/cpuinfo calls LZCNT "abm".
		case has(f, "avx2", "fma", "bmi1", "bmi2", "abm", "movbe", "popcnt"):
			platform = "haswell"
		}
	}
	if platform == "" && glibc != "2.26" {
		platform = "x86_64"
	}
	return platform
}

// x86HWCaps decides the x86-64 ISA levels (glibc-hwcaps subdirectories,
// best first) when the loader itself cannot be asked.
func x86HWCaps(cpu map[string]bool) []string {
	v2 := has(cpu, "cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3")
	v3 := v2 && has(cpu, "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave")
	v4 := v3 && has(cpu, "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
	var out []string
	if v4 {
		out = append(out, "x86-64-v4")
	}
	if v3 {
		out = append(out, "x86-64-v3")
	}
	if v2 {
		out = append(out, "x86-64-v2")
	}
	return out
}

// probeLoader asks a runnable loader for its own configuration: since glibc
// 2.33, `ld.so --help` prints its system directories, the glibc-hwcaps
// subdirectories it supports and the legacy hwcaps subdirectories it
// searches. This is exact for the host and costs about a millisecond.
func probeLoader(ctx context.Context, interp string, base *ArchConfig) (*ArchConfig, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The two questions are asked at once: each is a process start, and
	// the first closure of a scan waits for both.
	var diag []byte
	var diagErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		cmd := exec.CommandContext(ctx, interp, "--list-diagnostics")
		cmd.Env = []string{"LC_ALL=C"}
		diag, diagErr = cmd.Output()
	}()
	cmd := exec.CommandContext(ctx, interp, "--help")
	cmd.Env = []string{"LC_ALL=C"}
	out, err := cmd.Output()
	<-done
	if err != nil {
		return nil, fmt.Errorf("run %s --help: %w", interp, err)
	}
	a := *base
	if err := parseLoaderHelp(string(out), &a); err != nil {
		return nil, fmt.Errorf("%s --help: %w", interp, err)
	}
	a.Interp = interp
	a.Source = interp + " --help"
	// From glibc 2.33 on the loader prints its $PLATFORM among its
	// diagnostics; 2.37 and later print it nowhere else.
	if diagErr == nil {
		if p, ok := diagnosticsPlatform(string(diag)); ok {
			a.Platform = p
			a.Source += ", " + interp + " --list-diagnostics"
		}
	}
	return &a, nil
}

// diagnosticsPlatform finds dl_platform="..." in `ld.so --list-diagnostics`
// output; ok is false when it is absent. A loader without a platform prints
// dl_platform=0x0, and then $PLATFORM has no value ("").
func diagnosticsPlatform(out string) (string, bool) {
	for _, line := range strings.Split(out, "\n") {
		v, ok := strings.CutPrefix(line, "dl_platform=")
		if !ok {
			continue
		}
		if q, err := strconv.Unquote(v); err == nil {
			return q, true
		}
		return "", true
	}
	return "", false
}

// parseLoaderHelp reads the sections of `ld.so --help` into a.
func parseLoaderHelp(out string, a *ArchConfig) error {
	var dirs, hwcaps []string
	var legacy []string
	legacyPlatform := ""
	section := ""
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "Shared library search path"):
			section = "dirs"
			continue
		case strings.HasPrefix(t, "Subdirectories of glibc-hwcaps"):
			section = "hwcaps"
			continue
		case strings.HasPrefix(t, "No subdirectories of glibc-hwcaps"):
			section = ""
			continue
		case strings.HasPrefix(t, "Legacy HWCAP subdirectories"):
			section = "legacy"
			continue
		case t == "":
			if section != "" && section != "dirs" {
				section = ""
			}
			continue
		case !strings.HasPrefix(line, "  "):
			section = ""
			continue
		}
		switch section {
		case "dirs":
			if d, ok := strings.CutSuffix(t, " (system search path)"); ok {
				dirs = append(dirs, strings.TrimSuffix(d, "/")+"/")
			}
		case "hwcaps":
			name, rest, _ := strings.Cut(t, " ")
			if strings.Contains(rest, "searched") && !strings.Contains(rest, "not searched") {
				hwcaps = append(hwcaps, name)
			}
		case "legacy":
			name, rest, _ := strings.Cut(t, " ")
			if !strings.Contains(rest, "searched") || strings.Contains(rest, "not searched") {
				continue
			}
			if strings.Contains(rest, "AT_PLATFORM") {
				legacyPlatform = name
				continue
			}
			legacy = append(legacy, name)
		}
	}
	if len(dirs) == 0 {
		return fmt.Errorf("no system search path in the output")
	}
	a.SystemDirs = dirs
	a.Lib = strings.Trim(dirs[0], "/")
	a.HWCaps = hwcaps
	a.Legacy = nil
	if legacyPlatform != "" || len(legacy) > 0 {
		// Search order puts "tls" first, then the platform, then the rest.
		var comps []string
		rest := legacy
		if len(rest) > 0 && rest[0] == "tls" {
			comps = append(comps, "tls")
			rest = rest[1:]
		}
		if legacyPlatform != "" {
			a.Platform = legacyPlatform
			// "x86_64" is printed both as AT_PLATFORM and as a hwcap; it
			// names one subdirectory.
			if !slices.Contains(rest, legacyPlatform) {
				comps = append(comps, legacyPlatform)
			}
		}
		comps = append(comps, rest...)
		a.Legacy = legacyCombinations(comps)
	}
	return nil
}
