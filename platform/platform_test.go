package platform

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

func TestCheck(t *testing.T) {
	for _, p := range All() {
		if err := Check(p); err != nil {
			t.Errorf("Check(%q) = %v", p, err)
		}
	}
	err := Check("bogus")
	if err == nil || !strings.Contains(err.Error(), LinuxSBSA) {
		t.Errorf("Check(bogus) = %v, want the list of platforms", err)
	}
}

// TestMachineName: the names uname -m and wheel platform tags use.
func TestMachineName(t *testing.T) {
	for m, want := range map[elf.Machine]string{elf.EM_X86_64: "x86_64", elf.EM_AARCH64: "aarch64", elf.EM_PPC64: "ppc64le", elf.EM_386: "i686", elf.EM_RISCV: "riscv64", elf.EM_S390: "s390x", elf.EM_SPARCV9: "sparcv9"} {
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

// TestHostileRoot: evidence files that are links out of the root (absolute
// or by "..") resolve inside it, and a FIFO or device is refused, each named
// in the evidence, in bounded time.
func TestHostileRoot(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, "nv_tegra_release", "# R36 (release), REVISION: 4.3\n")
	for _, link := range []string{"/dev/zero", "../../../../../../../dev/zero", filepath.Join(outside, "nv_tegra_release"), "../../../../../../.." + outside + "/nv_tegra_release"} {
		root := t.TempDir()
		write(t, root, "proc/cpuinfo", "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n")
		if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(link, filepath.Join(root, "etc", "nv_tegra_release")); err != nil {
			t.Fatal(err)
		}
		h := bounded(t, root)
		if h.IsJetson() || h.L4T != "" {
			t.Errorf("link %s: read a file outside the root: %s, L4T %q", link, h.Kind, h.L4T)
		}
	}
	root := t.TempDir()
	write(t, root, "dev/null", "")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "etc", "nv_tegra_release"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "proc", "device-tree"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(root, "proc", "device-tree", "compatible")); err != nil {
		t.Fatal(err)
	}
	h := bounded(t, root)
	want := map[string]string{
		TegraReleaseFile: root + "/etc/nv_tegra_release: not a regular file (a FIFO)",
		firmwareCompat:   "",
		CompatibleFile:   "absent",
	}
	if err := syscall.Mknod(filepath.Join(root, "dev", "zero"), syscall.S_IFCHR|0o644, 1<<8|5); err == nil {
		h = bounded(t, root)
		want[CompatibleFile] = root + "/proc/device-tree/compatible (a link to /dev/zero): not a regular file (a character device)"
	} else {
		t.Logf("the device case needs CAP_MKNOD: %v", err)
	}
	for _, e := range h.Evidence {
		if w, ok := want[e.Source]; ok && w != "" && (!strings.Contains(e.Says, w) || e.Found || strings.Contains(e.Says, "\n")) {
			t.Errorf("%s: %q, want one line with %q", e.Source, e.Says, w)
		}
	}
	// A FIFO where the release file should be still says "not a Jetson".
	if h.IsJetson() {
		t.Errorf("a FIFO and a device as evidence: %s", h.Kind)
	}
}

// bounded detects the host under root, failing after 10 s.
func bounded(t *testing.T, root string) *Host {
	t.Helper()
	done := make(chan *Host, 1)
	go func() { done <- detectIn(t, root, elf.EM_NONE) }()
	select {
	case h := <-done:
		return h
	case <-time.After(10 * time.Second):
		t.Fatalf("detection under %s still running after 10s", root)
	}
	return nil
}
