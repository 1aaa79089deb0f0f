package platform

import (
	"bufio"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/rootfs"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// hostsDir holds one directory per real host: root/ (the files detection
// reads, as the host shows them) and SOURCES (where each file's content
// comes from).
const hostsDir = "testdata/hosts"

func detectIn(t *testing.T, dir string, m elf.Machine) *Host {
	t.Helper()
	r, err := rootfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return Detect(Probe{Root: r, Machine: m})
}

// TestHostKinds names each host of testdata/hosts from its evidence files,
// chooses its platform, and checks that every evidence file says where it
// comes from.
func TestHostKinds(t *testing.T) {
	for _, tc := range []struct {
		host     string
		kind     Kind
		l4t      string
		platform string // for a CUDA major unknown (0) and no target
		cuda12   string // for a package that needs CUDA 12
		evidence []string
	}{
		{"jetson-orin-nano", KindJetsonOrin, "R36.4.7", LinuxAarch64, LinuxAarch64, []string{"R36 (release), REVISION: 4.7", "nvidia,tegra234", "for aarch64 540.4.0"}},
		{"jetson-agx-orin-container", KindJetsonOrin, "R36.3.0", LinuxAarch64, LinuxAarch64, []string{"R36 (release), REVISION: 3.0", "absent (no device tree"}},
		{"jetson-xavier-nx", KindJetsonXavier, "R35.4.1", LinuxAarch64, LinuxAarch64, []string{"nvidia,tegra194"}},
		{"jetson-agx-thor", KindJetsonThor, "R38.2.2", LinuxSBSA, LinuxSBSA, []string{"nvidia,tegra264"}},
		{"dgx-spark", KindDGXSpark, "", LinuxSBSA, LinuxSBSA, []string{"NVIDIA_DGX_Spark", "Cortex-X925, Cortex-A725"}},
		{"gb10-oem", KindDGXSpark, "", LinuxSBSA, LinuxSBSA, []string{"CPU part 0xd85, 0xd87"}},
		{"gh200", KindGrace, "", LinuxSBSA, LinuxSBSA, []string{"Neoverse V2", "580.95.05"}},
	} {
		t.Run(tc.host, func(t *testing.T) {
			dir := filepath.Join(hostsDir, tc.host)
			checkSources(t, dir)
			h := detectIn(t, filepath.Join(dir, "root"), elf.EM_NONE)
			if h.Kind != tc.kind || h.L4T != tc.l4t || h.Machine != "aarch64" {
				t.Fatalf("Detect = %s (%s), L4T %q, machine %q; want %s, L4T %q, aarch64\n%v", h.Kind, h.Name, h.L4T, h.Machine, tc.kind, tc.l4t, h.Evidence)
			}
			for cuda, want := range map[int]string{0: tc.platform, 12: tc.cuda12, 13: LinuxSBSA} {
				if got, err := h.Platform(cuda); got != want || err != nil {
					t.Errorf("Platform(%d) = %q, %v; want %q", cuda, got, err, want)
				}
			}
			all := evidenceText(h)
			for _, w := range tc.evidence {
				if !strings.Contains(all, w) {
					t.Errorf("evidence lacks %q:\n%s", w, all)
				}
			}
			if withTarget := detectIn(t, filepath.Join(dir, "root"), elf.EM_AARCH64); withTarget.Kind != tc.kind {
				t.Errorf("with an aarch64 target: %s", withTarget.Kind)
			}
		})
	}
}

func evidenceText(h *Host) string {
	var b strings.Builder
	for _, e := range h.Evidence {
		b.WriteString(e.Source + ": " + e.Says + "\n")
	}
	return b.String()
}

// checkSources fails unless SOURCES names every file of root/ with where
// its content comes from.
func checkSources(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "SOURCES"))
	if err != nil {
		t.Fatalf("every evidence directory needs a SOURCES file: %v", err)
	}
	said := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if name, why, ok := strings.Cut(sc.Text(), ": "); ok && len(why) > 20 {
			said[name] = true
		}
	}
	root := filepath.Join(dir, "root")
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if !said[rel] {
			t.Errorf("%s: no SOURCES line says where %s comes from", dir, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHostEvidenceOrder lists the evidence in the order a user checks it:
// the L4T release, the device tree, the driver, DMI, the CPU, the machine.
func TestHostEvidenceOrder(t *testing.T) {
	h := detectIn(t, filepath.Join(hostsDir, "jetson-orin-nano", "root"), elf.EM_AARCH64)
	var got []string
	for _, e := range h.Evidence {
		got = append(got, e.Source)
	}
	want := []string{TegraReleaseFile, CompatibleFile, DriverFile, ProductNameFile, CPUInfoFile, "ELF machine"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("evidence order %v, want %v", got, want)
	}
	if b := h.Brief(); !strings.HasPrefix(b, "Jetson Orin (Tegra234): /etc/nv_tegra_release L4T R36.4.7; ") || !strings.Contains(b, "nvidia,tegra234") {
		t.Errorf("Brief = %q", b)
	}
}

// TestArmServersApart: Neoverse V2 alone is Graviton4 or Axion as much as
// Grace; only an NVIDIA driver or a product name makes it Grace.
func TestArmServersApart(t *testing.T) {
	grace, err := os.ReadFile(filepath.Join(hostsDir, "gh200", "root", "proc", "cpuinfo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		files map[string]string
		want  Kind
	}{
		{map[string]string{"proc/cpuinfo": string(grace)}, KindArmServer},
		{map[string]string{"proc/cpuinfo": string(grace), "sys/class/dmi/id/product_name": "GH200 Grace Hopper Superchip\n"}, KindGrace},
		{map[string]string{"proc/cpuinfo": "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"}, KindArmServer}, // Neoverse N1
		{map[string]string{"proc/cpuinfo": "processor\t: 0\nCPU implementer\t: 0x51\nCPU part\t: 0xd4f\n"}, KindArmServer}, // not Arm's part
	} {
		root := t.TempDir()
		for name, data := range tc.files {
			write(t, root, name, data)
		}
		if h := detectIn(t, root, elf.EM_NONE); h.Kind != tc.want {
			t.Errorf("%v: %s, want %s\n%s", tc.files, h.Kind, tc.want, evidenceText(h))
		}
	}
}

// TestThisHost detects this machine from a copy of its own /proc/cpuinfo
// (real evidence) and from itself.
func TestThisHost(t *testing.T) {
	if HostMachine() == elf.EM_NONE {
		// Not an oracle: no platform of NVIDIA's to detect on this machine.
		t.Skipf("NVIDIA publishes nothing for %s hosts", MachineName(HostMachine()))
	}
	h := Detect(Probe{})
	if h.Machine != MachineName(HostMachine()) || h.Kind == KindUnknown {
		t.Fatalf("this host: %s, machine %q\n%s", h.Kind, h.Machine, evidenceText(h))
	}
	cpu, err := os.ReadFile("/proc/cpuinfo")
	lddtest.Need(t, err == nil, "no /proc/cpuinfo: %v", err)
	root := t.TempDir()
	write(t, root, "proc/cpuinfo", string(cpu))
	if got := detectIn(t, root, elf.EM_NONE); got.Machine != h.Machine {
		t.Errorf("from this host's cpuinfo alone: machine %q, want %q\n%s", got.Machine, h.Machine, evidenceText(got))
	}
}

// TestUnknown: a root with no evidence and no target names no machine and
// chooses no platform; a Jetson with no release file and no CUDA major is
// ambiguous.
func TestUnknown(t *testing.T) {
	h := detectIn(t, t.TempDir(), elf.EM_NONE)
	if h.Kind != KindUnknown {
		t.Fatalf("empty root: %s", h.Kind)
	}
	if _, err := h.Platform(12); err == nil || !strings.Contains(err.Error(), "--platform") {
		t.Errorf("empty root: Platform = %v, want advice naming --platform", err)
	}
	root := t.TempDir()
	write(t, root, "proc/device-tree/compatible", "nvidia,p3737-0000+p3701-0000\x00nvidia,p3701-0000\x00nvidia,tegra234\x00")
	h = detectIn(t, root, elf.EM_NONE)
	if h.Kind != KindJetsonOrin {
		t.Fatalf("tegra234 device tree: %s", h.Kind)
	}
	if _, err := h.Platform(0); err == nil || !strings.Contains(err.Error(), "--cuda") {
		t.Errorf("a Jetson without L4T release or CUDA major: %v, want advice naming --cuda", err)
	}
	if p, _ := h.Platform(12); p != LinuxAarch64 {
		t.Errorf("tegra234 with CUDA 12: %s", p)
	}
	if h := detectIn(t, root, elf.EM_X86_64); h.Kind != KindJetsonOrin || h.Machine != "x86_64" {
		t.Errorf("an x86_64 target under a Jetson root: kind %s, machine %s", h.Kind, h.Machine)
	} else if p, _ := h.Platform(12); p != LinuxX86_64 {
		t.Errorf("an x86_64 target's archives: %s", p)
	}
}

// TestRefuse: each aarch64 platform refuses the other's archives, with a
// reason that names both; x86_64 and hosts of unknown kind refuse none.
func TestRefuse(t *testing.T) {
	orin := detectIn(t, filepath.Join(hostsDir, "jetson-orin-nano", "root"), elf.EM_NONE)
	spark := detectIn(t, filepath.Join(hostsDir, "dgx-spark", "root"), elf.EM_NONE)
	thor := detectIn(t, filepath.Join(hostsDir, "jetson-agx-thor", "root"), elf.EM_NONE)
	for _, tc := range []struct {
		h    *Host
		p    string
		cuda int
		want string
	}{
		{orin, LinuxSBSA, 12, "a linux-sbsa build, for Arm servers (SBSA); this host is a Jetson Orin (Tegra234) with L4T R36.4.7"},
		{orin, LinuxAarch64, 12, ""},
		{orin, LinuxSBSA, 13, ""}, // CUDA 13 on Orin is the SBSA toolkit
		{spark, LinuxAarch64, 12, "a linux-aarch64 build, for Jetson's L4T CUDA 12"},
		{spark, LinuxSBSA, 12, ""},
		{thor, LinuxAarch64, 0, "this host is a Jetson Thor (Tegra264) with L4T R38.2.2, which takes linux-sbsa"},
		{spark, LinuxX86_64, 12, ""}, // another machine: refused elsewhere, by ELF machine
	} {
		if got := tc.h.Refuse(tc.p, tc.cuda); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") || strings.Contains(got, "\n") {
			t.Errorf("%s refuses %s (CUDA %d): %q, want %q", tc.h.Name, tc.p, tc.cuda, got, tc.want)
		}
	}
	for name, want := range map[string]string{
		"https://developer.download.nvidia.com/compute/cudss/redist/libcudss/linux-sbsa/libcudss-linux-sbsa-0.8.0.10_cuda12-archive.tar.xz": LinuxSBSA,
		"libcusparse_lt-linux-aarch64-0.8.1.1_cuda12-archive.tar.xz":                                                                        LinuxAarch64,
		"http://127.0.0.1:8080/x/linux-x86_64/foo.tar.xz":                                                                                   LinuxX86_64,
		"nvidia_cublas_cu12-12.6.4.1-py3-none-manylinux_2_27_aarch64.whl":                                                                   "",
	} {
		if got := ArchivePlatform(name); got != want {
			t.Errorf("ArchivePlatform(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestJetPackCUDADirs(t *testing.T) {
	orin := detectIn(t, filepath.Join(hostsDir, "jetson-orin-nano", "root"), elf.EM_NONE)
	thor := detectIn(t, filepath.Join(hostsDir, "jetson-agx-thor", "root"), elf.EM_NONE)
	spark := detectIn(t, filepath.Join(hostsDir, "dgx-spark", "root"), elf.EM_NONE)
	if got := strings.Join(orin.JetPackCUDADirs(), " "); got != "/usr/local/cuda/lib64 /usr/local/cuda/targets/aarch64-linux/lib" {
		t.Errorf("Orin: %s", got)
	}
	if got := strings.Join(thor.JetPackCUDADirs(), " "); got != "/usr/local/cuda/lib64 /usr/local/cuda/targets/sbsa-linux/lib" {
		t.Errorf("Thor: %s", got)
	}
	if spark.JetPackCUDADirs() != nil || orin.JetPack() != "JetPack 6" || thor.JetPack() != "JetPack 7" {
		t.Errorf("JetPack facts: %v %s %s", spark.JetPackCUDADirs(), orin.JetPack(), thor.JetPack())
	}
}
