package rootfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/regfile"
)

// tree writes files (name → content; "->target" makes a link) under a new
// root directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// within runs f and fails the test when it does not return in 10 s (a
// FIFO opened for reading without a writer would block for ever).
func within(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still running after 10s")
	}
}

// TestLinksStayInside resolves links the way a chroot does: an absolute
// link and one with more ".." than the root is deep both land inside the
// root, never on this host's file of the same name.
func TestLinksStayInside(t *testing.T) {
	hostFile, err := os.ReadFile("/etc/hostname")
	if err != nil {
		hostFile = nil // the test still proves the root's file is read
	}
	root := tree(t, map[string]string{
		"etc/hostname":      "in-root\n",
		"etc/abs":           "->/etc/hostname",
		"etc/dotdot":        "->../../../../../../etc/hostname",
		"etc/sub/rel":       "->../hostname",
		"etc/nowhere":       "->/etc/passwd", // the host has one, the root has none
		"lib":               "->usr/lib",
		"usr/lib/libx.so.1": "x",
		"usr/lib/dir/link":  "->/lib/libx.so.1",
		"etc/loop1":         "->loop2",
		"etc/loop2":         "->loop1",
		"etc/dangling":      "->/absent",
	})
	r, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"/etc/abs", "/etc/dotdot", "/etc/sub/rel", "etc/abs"} {
		data, err := r.ReadFile(name, 1<<10)
		if err != nil || string(data) != "in-root\n" {
			t.Errorf("ReadFile(%s) = %q, %v; want the root's /etc/hostname", name, data, err)
		}
		if hostFile != nil && string(data) == string(hostFile) && string(hostFile) != "in-root\n" {
			t.Errorf("ReadFile(%s) read this host's /etc/hostname", name)
		}
	}
	if host, err := r.Resolve("/usr/lib/dir/link"); err != nil || host != filepath.Join(root, "usr/lib/libx.so.1") {
		t.Errorf("Resolve through an absolute link to a linked directory = %q, %v", host, err)
	}
	if _, err := r.ReadFile("/etc/nowhere", 1<<20); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), root+"/etc/nowhere") {
		t.Errorf("a link to /etc/passwd, absent in the root: %v; want not-exist naming the link", err)
	}
	if _, err := r.ReadFile("/etc/loop1", 1<<10); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a loop of links: %v; want ELOOP", err)
	}
	if !r.Exists("/etc/dangling") || r.Exists("/etc/absent") {
		t.Error("Exists: a dangling link exists, an absent name does not")
	}
	if st, err := r.Lstat("/lib"); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat(/lib) = %v, %v; want the link itself", st, err)
	}
	if st, err := r.Stat("/lib"); err != nil || !st.IsDir() {
		t.Errorf("Stat(/lib) = %v, %v; want the directory it leads to", st, err)
	}
	ents, err := r.ReadDir("/lib")
	if err != nil || len(ents) != 2 {
		t.Errorf("ReadDir(/lib) = %v, %v; want usr/lib's two entries", ents, err)
	}
}

// TestDevicesAndFIFOs refuses, without blocking, what is no regular file,
// reached directly or through a link; the one-line error names the file
// asked for and where its link led.
func TestDevicesAndFIFOs(t *testing.T) {
	root := tree(t, map[string]string{
		"etc/nv_tegra_release": "->/dev/zero",
		"etc/fifo-link":        "->../run/fifo",
		"etc/big":              "",
	})
	for _, d := range []string{"dev", "run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "run/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(root, "etc/big"), 1<<30); err != nil {
		t.Fatal(err)
	}
	r, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	check := func(guest, want string, is error) {
		t.Helper()
		var err error
		within(t, func() { _, err = r.ReadFile(guest, 1<<20) })
		if err == nil || !errors.Is(err, is) || !strings.Contains(err.Error(), root+guest) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ReadFile(%s) = %v; want one line naming %s, %q", guest, err, root+guest, want)
		}
	}
	// The root has no dev/zero: the link to /dev/zero leads nowhere.
	check("/etc/nv_tegra_release", "no such file", fs.ErrNotExist)
	check("/etc/fifo-link", "a link to /run/fifo): not a regular file (a FIFO)", regfile.ErrNotRegular)
	check("/run/fifo", "not a regular file (a FIFO)", regfile.ErrNotRegular)
	check("/etc/big", "more than the 1048576", regfile.ErrTooLarge)
	check("/etc", "not a regular file (a directory)", regfile.ErrNotRegular)

	// A real device node inside the root, where the link leads.
	if err := syscall.Mknod(filepath.Join(root, "dev/zero"), syscall.S_IFCHR|0o666, 1<<8|5); err != nil {
		t.Logf("the device case needs mknod (CAP_MKNOD), which this process lacks: %v", err)
		return
	}
	check("/etc/nv_tegra_release", "a link to /dev/zero): not a regular file (a character device)", regfile.ErrNotRegular)
}

// TestHost reads this host's files with the kernel's own resolution, and
// refuses its /dev/zero without reading it.
func TestHost(t *testing.T) {
	for _, dir := range []string{"", "/"} {
		r, err := Open(dir)
		if err != nil || !r.IsHost() || r.String() != "this host" {
			t.Fatalf("Open(%q) = %v, %v", dir, r, err)
		}
	}
	var err error
	within(t, func() { _, err = ReadFile("", "/dev/zero", 1<<20) })
	if err == nil || !strings.Contains(err.Error(), "/dev/zero: not a regular file (a character device)") {
		t.Errorf("ReadFile(/dev/zero) = %v", err)
	}
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile("/", f, 2); err != nil || string(data) != "ok" {
		t.Errorf("ReadFile(%s) = %q, %v", f, data, err)
	}
}

func TestOpenAndGuest(t *testing.T) {
	root := tree(t, map[string]string{"file": "x"})
	if _, err := Open(filepath.Join(root, "file")); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("Open(a file) = %v; want ENOTDIR", err)
	}
	if _, err := Open(filepath.Join(root, "absent")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(absent) = %v; want not-exist", err)
	}
	if _, err := ReadFile(filepath.Join(root, "absent"), "/etc/x", 10); err == nil || !strings.Contains(err.Error(), "root "+root+"/absent") {
		t.Errorf("ReadFile under an absent root = %v; want it named", err)
	}
	r, _ := Open(root)
	for host, want := range map[string]string{root: "/", root + "/usr/lib": "/usr/lib", root + "x/y": "", "/usr": ""} {
		got, ok := r.Guest(host)
		if got != want || ok != (want != "") {
			t.Errorf("Guest(%s) = %q, %v; want %q", host, got, ok, want)
		}
	}
}

// TestLocal opens what a path names in the root, like realpath -m inside
// it: resolved where it exists, and where it does not, a path that names
// nothing on this machine either, even when a dangling link in the root
// points at a file this host has.
func TestLocal(t *testing.T) {
	outside := tree(t, map[string]string{"python3.11": "host program"})
	root := tree(t, map[string]string{
		"usr/bin/python3.12":   "root program",
		"usr/bin/python3":      "->/usr/bin/python3.12",
		"opt/venv/bin/python3": "->" + outside + "/python3.11",
		"opt/venv/bin/dotdot":  "->../../../../../../../.." + outside + "/python3.11",
		"etc/loop1":            "->loop2",
		"etc/loop2":            "->loop1",
	})
	r, _ := Open(root)
	for guest, want := range map[string]string{
		"/usr/bin/python3":          root + "/usr/bin/python3.12",
		"/opt/venv/bin/python3":     root + outside + "/python3.11",
		"/opt/venv/bin/dotdot":      root + outside + "/python3.11",
		"/opt/absent/../x":          root + "/opt/absent/../x",
		"/usr/bin/python3.12/x/../": root + "/usr/bin/python3.12/x/..",
	} {
		got := r.Local(guest)
		if got != want {
			t.Errorf("Local(%s) = %q, want %q", guest, got, want)
		}
		if data, err := os.ReadFile(got); err == nil && string(data) == "host program" {
			t.Errorf("Local(%s) opens this host's file", guest)
		}
	}
	if got := r.Local("/etc/loop1"); !strings.Contains(got, "\x00") {
		t.Errorf("Local of a loop = %q, want a path no call accepts", got)
	} else if _, err := os.Stat(got); err == nil {
		t.Errorf("Local of a loop can be opened")
	}
}

// TestReason: a Root's error without its operation and path, and any
// other error whole.
func TestReason(t *testing.T) {
	r, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.ReadDir("/sys/bus/pci/devices")
	if err == nil || !strings.Contains(err.Error(), "/sys/bus/pci/devices") {
		t.Fatalf("ReadDir of an absent directory: %v", err)
	}
	if got := Reason(err); got != syscall.ENOENT.Error() {
		t.Errorf("Reason(%v) = %q", err, got)
	}
	if got := Reason(fmt.Errorf("wrapped: %w", err)); got != syscall.ENOENT.Error() {
		t.Errorf("Reason of a wrapped error = %q", got)
	}
	if got := Reason(errors.New("plain")); got != "plain" {
		t.Errorf("Reason of a plain error = %q", got)
	}
}

// TestOpenErrorNamesTheRootOnce: a root that is a file or absent is named
// once, with the problem.
func TestOpenErrorNamesTheRootOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for dir, want := range map[string]string{file: "root " + file + ": not a directory", file + "-absent": "root " + file + "-absent: no such file or directory"} {
		if _, err := Open(dir); err == nil || err.Error() != want {
			t.Errorf("Open(%s) = %v, want %q", dir, err, want)
		}
	}
}
