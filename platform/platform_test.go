package platform

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, root, p, data string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestIsTegraAndRelease(t *testing.T) {
	plain := t.TempDir()
	if IsTegra(plain) || TegraRelease(plain) != "" {
		t.Fatalf("an empty root is not a Jetson")
	}

	byFile := t.TempDir()
	write(t, byFile, "etc/nv_tegra_release", "# R36 (release), REVISION: 4.3, GCID: 1\n")
	if !IsTegra(byFile) {
		t.Errorf("nv_tegra_release: want Tegra")
	}
	if got := TegraRelease(byFile); !strings.HasPrefix(got, "R36 (release)") {
		t.Errorf("TegraRelease = %q", got)
	}

	empty := t.TempDir()
	write(t, empty, "etc/nv_tegra_release", "\n")
	if got := TegraRelease(empty); got != "L4T" {
		t.Errorf("an empty release file: TegraRelease = %q, want L4T", got)
	}

	byTree := t.TempDir()
	write(t, byTree, "proc/device-tree/compatible", "nvidia,p3737-0000\x00nvidia,tegra234\x00")
	if !IsTegra(byTree) {
		t.Errorf("device tree compatible with nvidia,tegra234: want Tegra")
	}
	other := t.TempDir()
	write(t, other, "proc/device-tree/compatible", "raspberrypi,5-model-b\x00brcm,bcm2712\x00")
	if IsTegra(other) {
		t.Errorf("a Raspberry Pi device tree is not a Jetson")
	}
	thor := t.TempDir()
	write(t, thor, "sys/firmware/devicetree/base/compatible", "nvidia,p3971\x00nvidia,tegra264\x00")
	if !IsTegra(thor) {
		t.Errorf("the firmware device tree of a Jetson Thor: want Tegra")
	}
	near := t.TempDir()
	write(t, near, "proc/device-tree/compatible", "vendor,nvidia,tegra-like\x00")
	if IsTegra(near) {
		t.Errorf("a compatible string with nvidia,tegra inside, not as its prefix, is not a Jetson")
	}
}

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		m     elf.Machine
		tegra bool
		cuda  int
		want  string
	}{
		{elf.EM_X86_64, false, 0, LinuxX86_64},
		{elf.EM_X86_64, false, 13, LinuxX86_64},
		{elf.EM_AARCH64, false, 0, LinuxSBSA},    // GH200, Grace
		{elf.EM_AARCH64, false, 12, LinuxSBSA},   // GH200 on CUDA 12
		{elf.EM_AARCH64, true, 12, LinuxAarch64}, // Jetson Orin, JetPack 6
		{elf.EM_AARCH64, true, 11, LinuxAarch64}, // JetPack 5
		{elf.EM_AARCH64, true, 13, LinuxSBSA},    // Jetson Thor, JetPack 7
	} {
		got, err := For(tc.m, tc.tegra, tc.cuda)
		if err != nil || got != tc.want {
			t.Errorf("For(%v, tegra=%v, %d) = %q, %v; want %q", tc.m, tc.tegra, tc.cuda, got, err, tc.want)
		}
	}
	if _, err := For(elf.EM_AARCH64, true, 0); err == nil || !strings.Contains(err.Error(), "--cuda") {
		t.Errorf("a Jetson without a CUDA major: err = %v, want advice naming --cuda", err)
	}
	for _, m := range []elf.Machine{elf.EM_PPC64, elf.EM_386} {
		if _, err := For(m, false, 12); err == nil {
			t.Errorf("%v: want an error", m)
		}
	}
}

func TestCheckAndUnder(t *testing.T) {
	for _, p := range All() {
		if err := Check(p); err != nil {
			t.Errorf("Check(%q) = %v", p, err)
		}
	}
	err := Check("bogus")
	if err == nil || !strings.Contains(err.Error(), LinuxSBSA) {
		t.Errorf("Check(bogus) = %v, want the list of platforms", err)
	}
	if got := Under("", "/etc/ld.so.cache"); got != "/etc/ld.so.cache" {
		t.Errorf("Under host = %q", got)
	}
	if got := Under("/srv/arm64", "/etc/ld.so.cache"); got != "/srv/arm64/etc/ld.so.cache" {
		t.Errorf("Under root = %q", got)
	}
}

// TestMachineName: the names uname -m and wheel platform tags use.
func TestMachineName(t *testing.T) {
	for m, want := range map[elf.Machine]string{elf.EM_X86_64: "x86_64", elf.EM_AARCH64: "aarch64", elf.EM_PPC64: "ppc64le", elf.EM_386: "i686", elf.EM_RISCV: "riscv"} {
		if got := MachineName(m); got != want {
			t.Errorf("MachineName(%v) = %q, want %q", m, got, want)
		}
	}
}

func TestMachine(t *testing.T) {
	for p, want := range map[string]elf.Machine{LinuxX86_64: elf.EM_X86_64, LinuxSBSA: elf.EM_AARCH64, LinuxAarch64: elf.EM_AARCH64, "windows-x86_64": elf.EM_NONE} {
		if got := Machine(p); got != want {
			t.Errorf("Machine(%q) = %v, want %v", p, got, want)
		}
	}
}
