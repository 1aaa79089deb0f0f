// Package lddtest runs the oracles tests are judged by — the real dynamic loader (the host's ld.so, or the arm64 ld.so of a sysroot under qemu-aarch64-static), whose output it parses, and pip in a new venv — and skips, or under CUDADEPS_REQUIRE_ORACLES=1 fails, a test whose oracle is missing.
package lddtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Line is one object line of `ld.so --list` output.
type Line struct {
	Name     string // the name the object was requested by
	Path     string // where it was found; empty when not found
	NotFound bool
}

func (l Line) String() string {
	switch {
	case l.NotFound:
		return l.Name + " => not found"
	case l.Name == l.Path:
		return l.Path
	}
	return l.Name + " => " + l.Path
}

// VersionError is one "version `X' not found" diagnostic.
type VersionError struct {
	Provider, Version, RequiredBy string
	Weak                          bool
}

// Output is the parsed trace of one object.
type Output struct {
	Lines         []Line
	VersionErrors []VersionError
	// Fatal is set when the loader stopped with an error.
	Fatal string
	// Warnings are diagnostics the loader survives (a preload it ignores).
	Warnings []string
	Static   bool
	Raw      string
}

// HostLoader returns the host's x86_64 loader, if present.
func HostLoader() (string, bool) {
	for _, p := range []string{"/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"} {
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// Qemu returns the path of qemu-aarch64-static, if installed.
func Qemu() (string, bool) {
	p, err := exec.LookPath("qemu-aarch64-static")
	return p, err == nil
}

// List runs the host's loader on file in trace mode, as ldd does
// (LD_TRACE_LOADED_OBJECTS=1; `ld.so --list` would stop at the first
// missing library instead of listing it), with exactly the environment given.
func List(ctx context.Context, ldso, file string, env []string) (*Output, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ldso, file)
	cmd.Env = append([]string{"LD_TRACE_LOADED_OBJECTS=1"}, env...)
	return run(cmd, "")
}

// ListQemu runs the arm64 loader of root under qemu-aarch64-static in trace
// mode on file. Paths inside root are printed as the guest sees them.
func ListQemu(ctx context.Context, qemu, root, file string, env []string) (*Output, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	args := []string{"-E", "LD_TRACE_LOADED_OBJECTS=1"}
	for _, e := range env {
		args = append(args, "-E", e)
	}
	interp := filepath.Join(root, "lib/ld-linux-aarch64.so.1")
	args = append(args, "-L", root, interp, file)
	cmd := exec.CommandContext(ctx, qemu, args...)
	cmd.Env = []string{}
	out, err := run(cmd, interp)
	return out, err
}

var (
	reArrow   = regexp.MustCompile(`^\t(.+?) => (.+?)(?: \(0x[0-9a-f]+\))?$`)
	rePlain   = regexp.MustCompile(`^\t(.+?) \(0x[0-9a-f]+\)$`)
	reVersion = regexp.MustCompile("^(?:.*?: )?(\\S+): (weak )?version [`'](.+?)' not found \\(required by (.+)\\)$")
)

func run(cmd *exec.Cmd, interp string) (*Output, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := &Output{Raw: stdout.String() + stderr.String()}
	sc := bufio.NewScanner(bytes.NewReader(stdout.Bytes()))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "statically linked":
			out.Static = true
		case strings.HasPrefix(line, "\tlinux-vdso.so") || strings.HasPrefix(line, "\tlinux-gate.so"):
		case reArrow.MatchString(line):
			m := reArrow.FindStringSubmatch(line)
			if m[2] == "not found" {
				out.Lines = append(out.Lines, Line{Name: m[1], NotFound: true})
			} else {
				out.Lines = append(out.Lines, Line{Name: m[1], Path: m[2]})
			}
		case rePlain.MatchString(line):
			m := rePlain.FindStringSubmatch(line)
			p := m[1]
			if interp != "" && p == interp {
				// qemu prints the loader under the path it was started as.
				p = "/lib/ld-linux-aarch64.so.1"
			}
			out.Lines = append(out.Lines, Line{Name: p, Path: p})
		}
	}
	sc = bufio.NewScanner(bytes.NewReader(stderr.Bytes()))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := reVersion.FindStringSubmatch(line); m != nil {
			out.VersionErrors = append(out.VersionErrors, VersionError{Provider: m[1], Weak: m[2] != "", Version: m[3], RequiredBy: m[4]})
			continue
		}
		if strings.Contains(line, "cannot be preloaded") {
			out.Warnings = append(out.Warnings, line)
			continue
		}
		if strings.Contains(line, "error while loading shared libraries") || strings.Contains(line, "cannot open") || strings.Contains(line, "not a dynamic executable") {
			out.Fatal = line
		}
	}
	if err != nil && out.Fatal == "" && len(out.Lines) == 0 && !out.Static {
		return out, fmt.Errorf("%s: %v: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(out.Raw))
	}
	return out, nil
}

// SortedVersionErrors returns the errors in a canonical order.
func (o *Output) SortedVersionErrors() []VersionError {
	v := append([]VersionError(nil), o.VersionErrors...)
	sort.Slice(v, func(i, j int) bool {
		a, b := v[i], v[j]
		if a.RequiredBy != b.RequiredBy {
			return a.RequiredBy < b.RequiredBy
		}
		if a.Provider != b.Provider {
			return a.Provider < b.Provider
		}
		return a.Version < b.Version
	})
	return v
}

// SharedDir finds the shared data folder that sits beside the repository
// (REPO/../shared), skipping or failing the test when it is absent.
func SharedDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("CUDADEPS_SHARED"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			shared := filepath.Join(dir, "..", "shared")
			if st, err := os.Stat(filepath.Join(shared, "corpus")); err == nil && st.IsDir() {
				return shared
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	Need(t, false, "the shared data folder (../shared beside the repository) is absent")
	return ""
}

// DpkgExtract unpacks a .deb into dir with dpkg-deb.
func DpkgExtract(t testing.TB, deb, dir string) {
	t.Helper()
	_, err := exec.LookPath("dpkg-deb")
	Need(t, err == nil, "dpkg-deb is not installed")
	if out, err := exec.Command("dpkg-deb", "-x", deb, dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x %s: %v: %s", deb, err, out)
	}
}

// Sysroot is an unpacked arm64 system tree and the tools to maintain it.
type Sysroot struct {
	Root  string // the tree
	Tools string // the unpacked libc-bin (sbin/ldconfig)
	Qemu  string
}

// ArmSysroot unpacks the arm64 Debian packages of the shared corpus into a
// sysroot (glibc, libstdc++, libgcc, BLAS/LAPACK, CUDA 11.8 libraries) and
// builds its ld.so.cache with the arm64 ldconfig under qemu. extraConf lines
// are added to etc/ld.so.conf.d/extra.conf before the cache is built.
func ArmSysroot(t testing.TB, extraConf ...string) *Sysroot {
	t.Helper()
	qemu, ok := Qemu()
	Need(t, ok, "qemu-aarch64-static is not installed (Debian package qemu-user-static)")
	debs := VerifiedDebs(t, filepath.Join(SharedDir(t), "corpus", "debian"), "arm64")
	base := t.TempDir()
	root := filepath.Join(base, "root")
	tools := filepath.Join(base, "libc-bin")
	for _, deb := range debs {
		if strings.Contains(filepath.Base(deb), "libc-bin_") {
			DpkgExtract(t, deb, tools)
			continue
		}
		DpkgExtract(t, deb, root)
	}
	conf := "include /etc/ld.so.conf.d/*.conf\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "ld.so.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(extraConf) > 0 {
		if err := os.WriteFile(filepath.Join(root, "etc", "ld.so.conf.d", "extra.conf"), []byte(strings.Join(extraConf, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &Sysroot{Root: root, Tools: tools, Qemu: qemu}
	s.RebuildCache(t)
	return s
}

// RebuildCache runs the arm64 ldconfig of the unpacked libc-bin on the root.
func (s *Sysroot) RebuildCache(t testing.TB) {
	t.Helper()
	ldconfig := filepath.Join(s.Tools, "sbin", "ldconfig")
	if _, err := os.Stat(ldconfig); err != nil {
		ldconfig = filepath.Join(s.Tools, "usr", "sbin", "ldconfig") // merged /usr
	}
	if out, err := exec.Command(s.Qemu, ldconfig, "-r", s.Root).CombinedOutput(); err != nil {
		t.Fatalf("ldconfig -r %s: %v: %s", s.Root, err, out)
	}
}

// InstallLdconfig puts the sysroot's ldconfig where libc-bin installs it
// (/sbin/ldconfig, through the /sbin link in a merged-/usr tree): a tree
// whose own ldconfig activation can run.
func (s *Sysroot) InstallLdconfig(t testing.TB) {
	t.Helper()
	src := filepath.Join(s.Tools, "sbin", "ldconfig")
	if _, err := os.Stat(src); err != nil {
		src = filepath.Join(s.Tools, "usr", "sbin", "ldconfig")
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(s.Root, "sbin", "ldconfig")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// List runs the sysroot's loader in trace mode on file. As root, qemu runs
// inside the tree with chroot(2), so that the kernel resolves every path
// there (absolute symlinks included); otherwise qemu's -L prefix stands in
// for it, which resolves links that point outside the tree on the host.
func (s *Sysroot) List(ctx context.Context, file string, env []string) (*Output, error) {
	if os.Geteuid() != 0 {
		return ListQemu(ctx, s.Qemu, s.Root, file, env)
	}
	const inside = "/.qemu-aarch64-static"
	if _, err := os.Stat(s.Root + inside); err != nil {
		data, err := os.ReadFile(s.Qemu)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(s.Root+inside, data, 0o755); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	args := []string{"-E", "LD_TRACE_LOADED_OBJECTS=1"}
	for _, e := range env {
		args = append(args, "-E", e)
	}
	args = append(args, "/lib/ld-linux-aarch64.so.1", file)
	cmd := exec.CommandContext(ctx, inside, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: s.Root}
	// The working directory carries over when it lies in the tree, as
	// with qemu -L (an empty search path entry means it).
	cmd.Dir = "/"
	if wd, err := os.Getwd(); err == nil && strings.HasPrefix(wd, s.Root+"/") {
		cmd.Dir = strings.TrimPrefix(wd, s.Root)
	}
	cmd.Env = []string{}
	return run(cmd, "")
}

// Chroot is a system tree whose own x86-64 loader is run inside it with
// chroot(2) (the tests run as root), so that it reads the tree's
// ld.so.cache, ld.so.preload and default directories.
type Chroot struct {
	Root   string
	Interp string // the loader's path inside the tree
}

// List runs the tree's loader in trace mode on file (a path inside the
// tree) with exactly the environment given.
func (c *Chroot) List(ctx context.Context, file string, env []string) (*Output, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The child chroots itself before it runs the loader: a chroot
	// command of the host would be traced by LD_TRACE_LOADED_OBJECTS.
	cmd := exec.CommandContext(ctx, c.Interp, file)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: c.Root}
	cmd.Dir = "/"
	cmd.Env = append([]string{"LD_TRACE_LOADED_OBJECTS=1"}, env...)
	return run(cmd, "")
}

// needChroot skips (or fails) a test that cannot chroot.
func needChroot(t testing.TB) {
	t.Helper()
	Need(t, os.Geteuid() == 0, "chroot needs root")
}

// HostChroot copies this host's x86-64 loader and C library into a fresh
// tree (lib/x86_64-linux-gnu, with lib64/ld-linux-x86-64.so.2) with an
// ld.so.cache written by the host's ldconfig: a tree whose loader is the
// host's, whose /etc is the test's own.
func HostChroot(t testing.TB) *Chroot {
	t.Helper()
	needChroot(t)
	ldso, ok := HostLoader()
	Need(t, ok, "no x86_64 ld.so on this host")
	root := t.TempDir()
	lib := filepath.Join(root, "lib", "x86_64-linux-gnu")
	for _, d := range []string{lib, filepath.Join(root, "lib64"), filepath.Join(root, "etc")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2"} {
		src := filepath.Join("/lib/x86_64-linux-gnu", name)
		if name == "ld-linux-x86-64.so.2" {
			src = ldso
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lib, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", filepath.Join(root, "lib64", "ld-linux-x86-64.so.2")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "ld.so.conf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ldconfig, err := exec.LookPath("ldconfig")
	Need(t, err == nil, "no ldconfig on this host")
	if out, err := exec.Command(ldconfig, "-r", root).CombinedOutput(); err != nil {
		t.Fatalf("ldconfig -r %s: %v: %s", root, err, out)
	}
	return &Chroot{Root: root, Interp: "/lib64/ld-linux-x86-64.so.2"}
}

// TrixieDebs returns the Debian trixie (glibc 2.41) packages of one
// architecture kept in the shared corpus (corpus/debian/trixie), each
// checked against its SHA256SUMS.tsv.
func TrixieDebs(t testing.TB, arch string) []string {
	t.Helper()
	return VerifiedDebs(t, filepath.Join(SharedDir(t), "corpus", "debian", "trixie"), arch)
}

// VerifiedDebs returns the packages of one architecture that dir's
// SHA256SUMS.tsv lists ("ARCH/FILE.deb<TAB>SIZE<TAB>SHA256" lines), after
// checking the size and sha256 of each: a test is never judged against
// packages other than the pinned ones. A missing folder or list is a
// missing oracle; a file that does not match fails the test.
func VerifiedDebs(t testing.TB, dir, arch string) []string {
	t.Helper()
	list, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS.tsv"))
	Need(t, err == nil, "the packages of %s: %v", dir, err)
	var debs []string
	for _, line := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || !strings.HasPrefix(f[0], arch+"/") {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(f[0]))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%s is listed in %s/SHA256SUMS.tsv: %v", f[0], dir, err)
		}
		sum := sha256.Sum256(data)
		if strconv.Itoa(len(data)) != f[1] || hex.EncodeToString(sum[:]) != f[2] {
			t.Fatalf("%s: %d bytes, sha256 %x; SHA256SUMS.tsv pins %s bytes, %s", p, len(data), sum, f[1], f[2])
		}
		debs = append(debs, p)
	}
	Need(t, len(debs) > 0, "no %s packages listed in %s/SHA256SUMS.tsv", arch, dir)
	return debs
}

// mergedUsr unpacks debs into root as a merged-/usr system (lib, lib64,
// bin and sbin are links into usr, as trixie's base-files makes them) and
// returns where the libc-bin package went.
func mergedUsr(t testing.TB, root string, debs []string) (tools string) {
	t.Helper()
	tools = filepath.Join(filepath.Dir(root), "libc-bin")
	for _, d := range []string{"usr/lib", "usr/lib64", "usr/bin", "usr/sbin", "etc/ld.so.conf.d"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"lib", "lib64", "bin", "sbin"} {
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, deb := range debs {
		if strings.Contains(filepath.Base(deb), "libc-bin_") {
			DpkgExtract(t, deb, tools)
			continue
		}
		DpkgExtract(t, deb, root)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "ld.so.conf"), []byte("include /etc/ld.so.conf.d/*.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return tools
}

// TrixieChroot builds an x86-64 Debian trixie tree (glibc 2.41) with its
// own ld.so.cache, run with chroot.
func TrixieChroot(t testing.TB) *Chroot {
	t.Helper()
	needChroot(t)
	debs := TrixieDebs(t, "amd64")
	root := filepath.Join(t.TempDir(), "root")
	tools := mergedUsr(t, root, debs)
	if out, err := exec.Command(filepath.Join(tools, "usr", "sbin", "ldconfig"), "-r", root).CombinedOutput(); err != nil {
		t.Fatalf("ldconfig -r %s: %v: %s", root, err, out)
	}
	return &Chroot{Root: root, Interp: "/lib64/ld-linux-x86-64.so.2"}
}

// TrixieArmSysroot builds an arm64 Debian trixie tree (glibc 2.41) with its
// own ld.so.cache, run under qemu.
func TrixieArmSysroot(t testing.TB) *Sysroot {
	t.Helper()
	qemu, ok := Qemu()
	Need(t, ok, "qemu-aarch64-static is not installed (Debian package qemu-user-static)")
	debs := TrixieDebs(t, "arm64")
	root := filepath.Join(t.TempDir(), "root")
	s := &Sysroot{Root: root, Tools: mergedUsr(t, root, debs), Qemu: qemu}
	s.RebuildCache(t)
	return s
}
