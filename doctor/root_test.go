package doctor

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reportWithin runs doctor over the fake host, failing after 20 s: a root
// that can make a reader block or read without end must not.
func (h *fakeHost) reportWithin() *Report {
	h.t.Helper()
	done := make(chan *Report, 1)
	go func() { done <- h.report() }()
	select {
	case r := <-done:
		return r
	case <-time.After(20 * time.Second):
		h.t.Fatal("doctor --root still running after 20s")
	}
	return nil
}

// evidence is what the host's evidence says of one file.
func evidence(r *Report, source string) string {
	for _, e := range r.Host.Evidence {
		if e.Source == source {
			return e.Says
		}
	}
	return ""
}

// TestRootLinksStayInside: the files of a --root system that are links out
// of it, by an absolute target or by more ".." than the root is deep, are
// resolved inside the root as a chroot would, never on this host.
func TestRootLinksStayInside(t *testing.T) {
	outside := t.TempDir()
	for name, body := range map[string]string{
		"nv_tegra_release": "# R36 (release), REVISION: 4.3, GCID: 1\n",
		"version":          "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  999.1.1  Release Build\n",
		"group":            "video:x:44:\n",
	} {
		if err := os.WriteFile(outside+"/"+name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, prefix := range []string{"", "../../../../../../../.."} {
		h := newBareHost(t)
		h.link("/etc/nv_tegra_release", prefix+outside+"/nv_tegra_release")
		h.link("/proc/driver/nvidia/version", prefix+outside+"/version")
		h.link("/etc/group", prefix+outside+"/group")
		// A device node that is a link to this host's: not this host's.
		h.link("/dev/nvidiactl", prefix+"/dev/null")
		r := h.reportWithin()
		if r.Host.IsJetson() || r.Summary.Driver != "" {
			t.Errorf("links %q: read files outside the root: %s, driver %q", prefix, r.Host.Kind, r.Summary.Driver)
		}
		if says := evidence(r, "/etc/nv_tegra_release"); says != "absent" {
			t.Errorf("links %q: nv_tegra_release says %q, want absent (its target is not in the root)", prefix, says)
		}
		expect(t, r, CheckDriver, Fail, []string{"no /proc/driver/nvidia/version"})
	}
}

// TestRootDevicesAndFIFOs: the root, whose etc/nv_tegra_release
// is a link to /dev/zero, and evidence files that are FIFOs or devices:
// bounded, each refused in one line naming the file.
func TestRootDevicesAndFIFOs(t *testing.T) {
	h := newBareHost(t)
	h.link("/etc/nv_tegra_release", "/dev/zero")
	h.dir("/proc/driver/nvidia")
	if err := syscall.Mkfifo(h.path("/proc/driver/nvidia/version"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.dir("/proc/1")
	if err := syscall.Mkfifo(h.path("/proc/1/cgroup"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.link("/etc/group", "../proc/1/cgroup")
	r := h.reportWithin()
	if says := evidence(r, "/proc/driver/nvidia/version"); !strings.Contains(says, h.root+"/proc/driver/nvidia/version: not a regular file (a FIFO)") || strings.Contains(says, "\n") {
		t.Errorf("a FIFO as the driver's version file: %q", says)
	}
	expect(t, r, CheckDriver, Fail, []string{"cannot read /proc/driver/nvidia/version", "not a regular file (a FIFO)"})
	h.dir("/dev")
	if err := syscall.Mknod(h.path("/dev/zero"), syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
		t.Logf("the device case needs CAP_MKNOD: %v", err)
		return
	}
	r = h.reportWithin()
	want := h.root + "/etc/nv_tegra_release (a link to /dev/zero): not a regular file (a character device)"
	if says := evidence(r, "/etc/nv_tegra_release"); !strings.Contains(says, want) {
		t.Errorf("nv_tegra_release → the root's /dev/zero: %q, want %q", says, want)
	}
	if r.Host.IsJetson() {
		t.Errorf("a device as nv_tegra_release made a %s", r.Host.Kind)
	}
}
