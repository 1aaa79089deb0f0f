package platform

import (
	"debug/elf"
	"fmt"
	"path"
	"slices"
	"strings"
)

// decide names the kind from the facts, Tegra evidence first: a Jetson is
// told by its L4T release and device tree, whatever its CPU says.
func (h *Host) decide(f *facts) {
	h.L4T, h.L4TMajor = f.l4t, f.l4tMajor
	if f.machine != elf.EM_NONE {
		h.Machine = MachineName(f.machine)
	}
	switch {
	case f.tegraFile || f.soc != "":
		h.Kind = jetsonKind(f.soc, f.l4tMajor)
	case f.machine == elf.EM_X86_64:
		h.Kind = KindX86_64
	case f.machine == elf.EM_AARCH64:
		h.Kind = armKind(f, h.Driver != "")
	default:
		h.Kind = KindUnknown
	}
	h.Name = kindName(h.Kind, f.soc)
}

// jetsonKind names a Jetson by its SoC; without a device tree (a
// container that hides it), by the L4T major, which one JetPack generation
// ships for one SoC family: R36 (JetPack 6) runs only on Orin, R38
// (JetPack 7) on Thor; R35 (JetPack 5) runs on Xavier and Orin both.
func jetsonKind(soc string, l4tMajor int) Kind {
	switch soc {
	case "tegra194":
		return KindJetsonXavier
	case "tegra234":
		return KindJetsonOrin
	case "tegra264":
		return KindJetsonThor
	}
	switch {
	case soc == "" && l4tMajor == 36:
		return KindJetsonOrin
	case soc == "" && l4tMajor >= 38:
		return KindJetsonThor
	}
	return KindJetson
}

// armKind tells the aarch64 servers apart: DGX Spark by its DMI product
// name, any GB10 by its two Arm core types, Grace by its Neoverse V2 cores
// with an NVIDIA GPU driver or a product name that says so (Neoverse V2
// alone is also AWS Graviton4 or Google Axion).
func armKind(f *facts, nvidiaDriver bool) Kind {
	product := strings.ToLower(strings.ReplaceAll(f.product, "_", " "))
	switch {
	case strings.Contains(product, "dgx spark") || strings.Contains(product, "gb10"):
		return KindDGXSpark
	case slices.Contains(f.cpuParts, partCortexX925) && slices.Contains(f.cpuParts, partCortexA725):
		return KindDGXSpark
	case strings.Contains(product, "grace") || strings.Contains(product, "gh200") || strings.Contains(product, "gb200"):
		return KindGrace
	case slices.Contains(f.cpuParts, partNeoverseV2) && nvidiaDriver:
		return KindGrace
	}
	return KindArmServer
}

func kindName(k Kind, soc string) string {
	socName := ""
	if soc != "" {
		socName = " (" + strings.Replace(soc, "tegra", "Tegra", 1) + ")"
	}
	switch k {
	case KindJetsonXavier:
		return "Jetson Xavier" + socName
	case KindJetsonOrin:
		return "Jetson Orin" + socName
	case KindJetsonThor:
		return "Jetson Thor" + socName
	case KindJetson:
		return "Jetson" + socName
	case KindDGXSpark:
		return "GB10 (DGX Spark)"
	case KindGrace:
		return "Grace (GH200/GB200)"
	case KindArmServer:
		return "aarch64 server (SBSA)"
	case KindX86_64:
		return "x86_64"
	}
	return "unknown host"
}

// IsJetson reports a Jetson of any generation.
func (h *Host) IsJetson() bool {
	switch h.Kind {
	case KindJetsonXavier, KindJetsonOrin, KindJetsonThor, KindJetson:
		return true
	}
	return false
}

// Platform names the platform whose archives run on the host for a CUDA
// major (0: unknown): x86_64 → linux-x86_64; a Jetson up to CUDA 12 →
// linux-aarch64 (NVIDIA's L4T builds), from CUDA 13 on, and Jetson Thor,
// → linux-sbsa; every other aarch64 host → linux-sbsa. A Jetson whose CUDA
// major nothing tells (no libcudart, no L4T release) is an error.
func (h *Host) Platform(cudaMajor int) (string, error) {
	switch h.Machine {
	case "x86_64":
		return LinuxX86_64, nil
	case "aarch64":
	case "":
		return "", fmt.Errorf("nothing tells the machine of %s: no object was read and no file of it names one; give --platform", h.Name)
	default:
		return "", fmt.Errorf("NVIDIA publishes no Linux archives for %s machines (only x86_64 and aarch64)", h.Machine)
	}
	if !h.IsJetson() || h.Kind == KindJetsonThor || cudaMajor >= 13 {
		return LinuxSBSA, nil
	}
	if cudaMajor == 0 {
		switch {
		case h.L4TMajor >= 38:
			return LinuxSBSA, nil
		case h.L4TMajor > 0:
			return LinuxAarch64, nil // JetPack up to 6 ships CUDA 12 or older
		}
		return "", fmt.Errorf("on a %s the platform depends on the CUDA major: %s up to CUDA 12, %s from CUDA 13 on; give the CUDA major (--cuda N) or the platform (--platform)", h.Name, LinuxAarch64, LinuxSBSA)
	}
	return LinuxAarch64, nil
}

// L4TCUDA12 reports a Jetson whose CUDA is NVIDIA's L4T build (CUDA 12 or
// older, linux-aarch64) for a CUDA major (0: unknown).
func (h *Host) L4TCUDA12(cudaMajor int) bool {
	p, err := h.Platform(cudaMajor)
	return err == nil && p == LinuxAarch64
}

// Refuse says why an archive of platform p does not run on the host for a
// CUDA major, or "" when it may: the two aarch64 platforms are different
// builds (linux-aarch64 are L4T libraries that need the Tegra driver;
// linux-sbsa are Arm server builds), and a host of one refuses the other.
// A host whose kind or platform is unknown refuses nothing.
func (h *Host) Refuse(p string, cudaMajor int) string {
	want, err := h.Platform(cudaMajor)
	if err != nil || p == want || Machine(p) != Machine(want) {
		return ""
	}
	switch p {
	case LinuxSBSA:
		return fmt.Sprintf("a %s build, for Arm servers (SBSA); this host is a %s%s, whose CUDA %s libraries are NVIDIA's %s (L4T) builds", LinuxSBSA, h.Name, h.l4tText(), cudaText(cudaMajor), LinuxAarch64)
	case LinuxAarch64:
		return fmt.Sprintf("a %s build, for Jetson's L4T CUDA 12 (it needs the Tegra driver); this host is a %s%s, which takes %s builds", LinuxAarch64, h.Name, h.l4tText(), LinuxSBSA)
	}
	return ""
}

func (h *Host) l4tText() string {
	if h.L4T == "" {
		return ""
	}
	return " with L4T " + h.L4T
}

func cudaText(major int) string {
	if major == 0 {
		return "12"
	}
	return fmt.Sprint(major)
}

// ArchivePlatform is the platform an NVIDIA archive's file name or URL
// names ("…/linux-sbsa/libcudss-linux-sbsa-0.8.0.10_cuda12-archive.tar.xz"),
// or "" when it names none.
func ArchivePlatform(nameOrURL string) string {
	base := path.Base(nameOrURL)
	for _, p := range All() {
		if strings.Contains(base, "-"+p+"-") || strings.Contains(nameOrURL, "/"+p+"/") {
			return p
		}
	}
	return ""
}

// JetPackCUDADirs are the directories where JetPack installs its CUDA
// libraries on a Jetson (none on other hosts): JetPack's CUDA is the one
// built for its L4T and is preferred over any download.
func (h *Host) JetPackCUDADirs() []string {
	if !h.IsJetson() {
		return nil
	}
	target := "aarch64-linux"
	if h.Kind == KindJetsonThor || h.L4TMajor >= 38 {
		target = "sbsa-linux" // JetPack 7's CUDA 13 is the SBSA toolkit
	}
	return []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/" + target + "/lib"}
}

// JetPack names the JetPack that a Jetson's L4T release belongs to.
func (h *Host) JetPack() string {
	switch {
	case h.L4TMajor == 35:
		return "JetPack 5"
	case h.L4TMajor == 36:
		return "JetPack 6"
	case h.L4TMajor >= 38:
		return "JetPack 7"
	}
	return "JetPack"
}

// Brief is the kind and the evidence that decided it, in one line:
// "Jetson Orin (Tegra234): /etc/nv_tegra_release R36.4.3, nvidia,tegra234".
func (h *Host) Brief() string {
	var facts []string
	for _, e := range h.Evidence {
		if !e.Found {
			continue
		}
		says := e.Says
		switch e.Source {
		case TegraReleaseFile:
			if h.L4T != "" {
				says = "L4T " + h.L4T
			}
		case CompatibleFile, firmwareCompat:
			says = says[strings.LastIndex(says, " ")+1:] // the SoC
		}
		facts = append(facts, e.Source+" "+says)
	}
	if len(facts) > 3 {
		facts = facts[:3]
	}
	if len(facts) == 0 {
		return h.Name
	}
	return h.Name + ": " + strings.Join(facts, "; ")
}
