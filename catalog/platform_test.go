package catalog

import (
	"debug/elf"
	"os"
	"path/filepath"
	"testing"
)

func TestPlatformFor(t *testing.T) {
	for _, tc := range []struct {
		m     elf.Machine
		tegra bool
		cuda  int
		want  string // "" means an error
	}{
		{elf.EM_X86_64, false, 0, LinuxX86_64},
		{elf.EM_X86_64, false, 13, LinuxX86_64},
		{elf.EM_AARCH64, false, 0, LinuxSBSA},    // GH200, Grace
		{elf.EM_AARCH64, false, 12, LinuxSBSA},   // GH200 on CUDA 12
		{elf.EM_AARCH64, true, 12, LinuxAarch64}, // Jetson Orin, JetPack 6
		{elf.EM_AARCH64, true, 11, LinuxAarch64}, // JetPack 5
		{elf.EM_AARCH64, true, 13, LinuxSBSA},    // Jetson Thor, JetPack 7
		{elf.EM_AARCH64, true, 0, ""},            // ambiguous
		{elf.EM_PPC64, false, 12, ""},
		{elf.EM_386, false, 12, ""},
	} {
		got, err := PlatformFor(tc.m, tc.tegra, tc.cuda)
		if tc.want == "" {
			if err == nil {
				t.Errorf("PlatformFor(%v, %v, %d) = %q, want an error", tc.m, tc.tegra, tc.cuda, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("PlatformFor(%v, %v, %d) = %q, %v; want %q", tc.m, tc.tegra, tc.cuda, got, err, tc.want)
		}
	}
}

func TestHostIsTegra(t *testing.T) {
	write := func(root, rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	release := t.TempDir()
	write(release, "etc/nv_tegra_release", "# R36 (release), REVISION: 4.3\n")
	orin := t.TempDir()
	write(orin, "proc/device-tree/compatible", "nvidia,p3768-0000+p3767-0005\x00nvidia,p3767-0005\x00nvidia,tegra234\x00")
	thor := t.TempDir()
	write(thor, "sys/firmware/devicetree/base/compatible", "nvidia,p3971\x00nvidia,tegra264\x00")
	grace := t.TempDir()
	write(grace, "proc/device-tree/compatible", "arm,vexpress\x00linux,dummy-virt\x00")
	write(grace, "etc/os-release", "ID=ubuntu\n")
	near := t.TempDir()
	write(near, "proc/device-tree/compatible", "vendor,nvidia,tegra-like\x00") // not a prefix match

	for root, want := range map[string]bool{release: true, orin: true, thor: true, grace: false, near: false, t.TempDir(): false} {
		if got := HostIsTegra(root); got != want {
			t.Errorf("HostIsTegra(%s) = %v, want %v", root, got, want)
		}
	}
}

func TestCUDAMajorFromSoname(t *testing.T) {
	for s, want := range map[string]int{
		"libcudart.so.13": 13, "libcudart.so.12": 12, "libcudart.so.11.0": 11, "libcudart.so.10.2": 10,
		"libcublas.so.12": 0, "libcufft.so.11": 0, "libcudart.so": 0, "libcudart.so.x": 0,
		"libcudart.so.013": 0, "libcudart.so.0": 0, "libcudart_static.a": 0,
	} {
		got, ok := CUDAMajorFromSoname(s)
		if got != want || ok != (want != 0) {
			t.Errorf("CUDAMajorFromSoname(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
}

func TestCUDAMajorHint(t *testing.T) {
	for name, want := range map[string]int{
		"libcublas.so.13": 13, "libcublasLt.so.12": 12, "libnvrtc.so.13": 13, "libnvJitLink.so.12": 12,
		"libcudart-a7b20f20.so.11.0": 11, "libnppc.so.13": 13, "libnvjpeg.so.12.4.0": 12,
		"libcufft.so.12": 0, "libcurand.so.10": 0, "libcublas.so": 0, "libcublas.so.x": 0, "libcudnn.so.9": 0,
	} {
		got, ok := CUDAMajorHint(name)
		if got != want || ok != (want != 0) {
			t.Errorf("CUDAMajorHint(%s) = %d, %v; want %d", name, got, ok, want)
		}
	}
}
