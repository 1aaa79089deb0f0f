package platform

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"io/fs"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/internal/rootfs"
)

// Kind names a kind of host as NVIDIA's archives and wheels tell hosts
// apart: which Arm platform its CUDA libraries are built for, and whether
// JetPack provides CUDA.
type Kind string

// The host kinds.
const (
	KindX86_64       Kind = "x86_64"        // any x86_64 host
	KindJetsonXavier Kind = "jetson-xavier" // Tegra194: JetPack 5 (L4T R35), CUDA 11.4 (12 by upgrade), linux-aarch64
	KindJetsonOrin   Kind = "jetson-orin"   // Tegra234: JetPack 6 (L4T R36), CUDA 12 in /usr/local/cuda, linux-aarch64
	KindJetsonThor   Kind = "jetson-thor"   // Tegra264: JetPack 7 (L4T R38), CUDA 13, linux-sbsa
	KindJetson       Kind = "jetson"        // a Tegra whose SoC nothing names
	KindDGXSpark     Kind = "gb10"          // DGX Spark and other GB10 systems: linux-sbsa
	KindGrace        Kind = "grace"         // GH200, GB200 (Grace: Neoverse V2): linux-sbsa
	KindArmServer    Kind = "arm64-server"  // another aarch64 host: linux-sbsa
	KindUnknown      Kind = "unknown"       // nothing tells the machine
)

// Evidence is one fact detection read, in the order a user can check it.
type Evidence struct {
	// Source is where it was read: a file of the root
	// ("/etc/nv_tegra_release") or "ELF machine".
	Source string `json:"source"`
	// Says is what it says, briefly ("R36 (release), REVISION: 4.3",
	// "nvidia,tegra234"); for a file that is absent or refused, why.
	Says string `json:"says"`
	// Found is false when the source had nothing to say (absent, refused).
	Found bool `json:"found"`
}

// Host is what kind of host the system under a root is, with the evidence.
type Host struct {
	Kind Kind `json:"kind"`
	// Name is the kind as people say it ("Jetson Orin (Tegra234)").
	Name string `json:"name"`
	// Machine is the ELF machine its libraries are built for, as wheel
	// tags name it ("aarch64"); "" when unknown.
	Machine string `json:"machine,omitempty"`
	// L4T is a Jetson's Linux for Tegra release ("R36.4.3"); L4TMajor its
	// major (36), 0 when unknown.
	L4T      string `json:"l4t,omitempty"`
	L4TMajor int    `json:"-"`
	// Driver is the NVIDIA kernel module's version ("580.95.05"), when it
	// is loaded; DriverOpen is set for the open kernel module.
	Driver     string     `json:"driver,omitempty"`
	DriverOpen bool       `json:"driver_open,omitempty"`
	Evidence   []Evidence `json:"evidence"`
}

// Probe says where Detect looks.
type Probe struct {
	// Root is the system's "/" (nil: this host).
	Root *rootfs.Root
	// Machine is the ELF machine of the target examined, when one was read;
	// it is the machine whose archives are chosen.
	Machine elf.Machine
}

// The files detection reads, in the order a user can check them.
const (
	TegraReleaseFile = "/etc/nv_tegra_release"
	CompatibleFile   = "/proc/device-tree/compatible"
	firmwareCompat   = "/sys/firmware/devicetree/base/compatible" // what /proc/device-tree links to
	DriverFile       = "/proc/driver/nvidia/version"
	ProductNameFile  = "/sys/class/dmi/id/product_name"
	CPUInfoFile      = "/proc/cpuinfo"
)

// Bounds on what is read: each file is small on every real host (cpuinfo
// of a 288-core node is under 1 MiB).
const (
	smallFile   = 64 << 10
	cpuInfoSize = 8 << 20
)

// facts is what the evidence says, before the kind is decided.
type facts struct {
	l4t        string // "R36.4.3"
	l4tMajor   int
	tegraFile  bool     // nv_tegra_release exists
	soc        string   // "tegra234"
	board      string   // the first compatible string
	driverArch string   // "aarch64", "x86_64" from the driver's version line
	product    string   // DMI product name
	cpuParts   []string // Arm's MIDR part numbers ("0xd4f")
	armCPU     bool     // cpuinfo has Arm's fields, whoever made the core
	cpuVendor  string   // x86 vendor_id
	machine    elf.Machine
}

// Detect reads the evidence of the system under p.Root and names its kind.
// Nothing it reads can block or run on: every file goes through rootfs.
func Detect(p Probe) *Host {
	root := p.Root
	if root == nil {
		root, _ = rootfs.Open("")
	}
	h := &Host{Evidence: []Evidence{}}
	var f facts
	f.readTegraRelease(root, h)
	f.readCompatible(root, h)
	f.readDriver(root, h)
	f.readProduct(root, h)
	f.readCPUInfo(root, h)
	f.machine = p.Machine
	switch {
	case p.Machine != elf.EM_NONE:
		h.add(Evidence{Source: "ELF machine", Says: MachineName(p.Machine) + " (the target's objects)", Found: true})
	case root.IsHost():
		f.machine = HostMachine()
		h.add(Evidence{Source: "ELF machine", Says: runtime.GOARCH + " (this host)", Found: f.machine != elf.EM_NONE})
	default:
		f.machine = f.guessMachine()
	}
	h.decide(&f)
	return h
}

func (h *Host) add(e Evidence) { h.Evidence = append(h.Evidence, e) }

// read reads one evidence file; absent is no evidence, anything else that
// stops the read (a FIFO, a device, a loop of links) is named.
func read(root *rootfs.Root, h *Host, file string, limit int64) []byte {
	data, err := root.ReadFile(file, limit)
	switch {
	case err == nil:
		return data
	case errors.Is(err, fs.ErrNotExist):
		h.add(Evidence{Source: file, Says: "absent"})
	default:
		h.add(Evidence{Source: file, Says: "unreadable: " + err.Error()})
	}
	return nil
}

var l4tRE = regexp.MustCompile(`R(\d+)\s*\([^)]*\),\s*REVISION:\s*([0-9.]+)`)

func (f *facts) readTegraRelease(root *rootfs.Root, h *Host) {
	data := read(root, h, TegraReleaseFile, smallFile)
	if data == nil {
		return
	}
	f.tegraFile = true
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSpace(strings.TrimPrefix(line, "#"))
	if m := l4tRE.FindStringSubmatch(line); m != nil {
		f.l4tMajor, _ = strconv.Atoi(m[1])
		f.l4t = "R" + m[1] + "." + m[2]
	}
	if line == "" {
		line = "present, with no release line"
	}
	if i := strings.Index(line, ", GCID"); i > 0 {
		line = line[:i] // the build id and date say nothing more here
	}
	h.add(Evidence{Source: TegraReleaseFile, Says: line, Found: true})
}

var socRE = regexp.MustCompile(`^nvidia,(tegra\d+)$`)

func (f *facts) readCompatible(root *rootfs.Root, h *Host) {
	file := CompatibleFile
	data, err := root.ReadFile(file, smallFile)
	if errors.Is(err, fs.ErrNotExist) {
		// /proc/device-tree is a link to the firmware's tree, which a
		// container may show without /proc's link.
		file = firmwareCompat
		data, err = root.ReadFile(file, smallFile)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		h.add(Evidence{Source: CompatibleFile, Says: "absent (no device tree: not an embedded board, or a container hides it)"})
		return
	case err != nil:
		h.add(Evidence{Source: file, Says: "unreadable: " + err.Error()})
		return
	}
	// The property is a list of NUL-terminated strings, the board first
	// and the SoC last.
	var list []string
	for _, s := range bytes.Split(bytes.TrimRight(data, "\x00"), []byte{0}) {
		if len(s) > 0 {
			list = append(list, string(s))
		}
	}
	for _, s := range list {
		if m := socRE.FindStringSubmatch(s); m != nil {
			f.soc = m[1]
		}
	}
	if len(list) > 0 {
		f.board = list[0]
	}
	h.add(Evidence{Source: file, Says: strings.Join(list, " "), Found: len(list) > 0})
}

// The module names its version after "Kernel Module" and its machine
// before or after it: "NVIDIA UNIX x86_64 Kernel Module  575.57.08",
// "NVIDIA UNIX Open Kernel Module for aarch64  580.95.05".
var (
	driverRE     = regexp.MustCompile(`Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)*)`)
	driverArchRE = regexp.MustCompile(`\b(x86_64|aarch64)\b`)
)

func (f *facts) readDriver(root *rootfs.Root, h *Host) {
	data := read(root, h, DriverFile, smallFile)
	if data == nil {
		return
	}
	line, _, _ := strings.Cut(string(data), "\n")
	line = strings.TrimSpace(strings.TrimPrefix(line, "NVRM version:"))
	if m := driverRE.FindStringSubmatch(line); m != nil {
		h.Driver = m[1]
		h.DriverOpen = strings.Contains(line, "Open Kernel Module")
	}
	if m := driverArchRE.FindStringSubmatch(line); m != nil {
		f.driverArch = m[1]
	}
	if i := strings.Index(line, "  Release Build"); i > 0 {
		line = line[:i]
	}
	h.add(Evidence{Source: DriverFile, Says: strings.Join(strings.Fields(line), " "), Found: true})
}

func (f *facts) readProduct(root *rootfs.Root, h *Host) {
	data := read(root, h, ProductNameFile, smallFile)
	if data == nil {
		return
	}
	f.product = strings.TrimSpace(string(data))
	h.add(Evidence{Source: ProductNameFile, Says: f.product, Found: f.product != ""})
}

// The Arm CPU parts that name a host (MIDR part numbers, as in the
// kernel's arch/arm64/include/asm/cputype.h), implementer 0x41 (Arm).
const (
	partNeoverseV2 = "0xd4f" // Grace
	partCortexX925 = "0xd85" // GB10's performance cores
	partCortexA725 = "0xd87" // GB10's efficiency cores
)

func (f *facts) readCPUInfo(root *rootfs.Root, h *Host) {
	data := read(root, h, CPUInfoFile, cpuInfoSize)
	if data == nil {
		return
	}
	var model string
	armImpl := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "CPU implementer":
			armImpl = armImpl || v == "0x41"
			f.armCPU = true
		case "CPU part":
			if !slices.Contains(f.cpuParts, v) {
				f.cpuParts = append(f.cpuParts, v)
			}
		case "vendor_id":
			f.cpuVendor = v
		case "model name":
			model = v
		}
	}
	var says string
	switch {
	case len(f.cpuParts) > 0:
		says = "CPU part " + strings.Join(f.cpuParts, ", ")
		if armImpl {
			says += cpuPartNames(f.cpuParts)
		} else {
			says += " (not Arm's cores)"
			f.cpuParts = nil
		}
	case model != "":
		says = model
	default:
		says = "no CPU model line"
	}
	h.add(Evidence{Source: CPUInfoFile, Says: says, Found: f.armCPU || model != ""})
}

func cpuPartNames(parts []string) string {
	names := map[string]string{partNeoverseV2: "Neoverse V2", partCortexX925: "Cortex-X925", partCortexA725: "Cortex-A725"}
	var out []string
	for _, p := range parts {
		if n, ok := names[p]; ok {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + strings.Join(out, ", ") + ")"
}

// guessMachine names the machine of a root from its files, when no
// object of it was read.
func (f *facts) guessMachine() elf.Machine {
	switch {
	case f.tegraFile || f.soc != "" || f.armCPU || f.driverArch == "aarch64":
		return elf.EM_AARCH64
	case f.cpuVendor != "" || f.driverArch == "x86_64":
		return elf.EM_X86_64
	}
	return elf.EM_NONE
}
