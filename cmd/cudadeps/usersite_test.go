package main

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/indextest"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/torchenv"
	"github.com/cudadeps/cudadeps/loader/scan"
)

// asUser is another user than root, whose processes the tests start.
type asUser struct {
	uid, gid uint32
	home     string // a directory it owns
	python   string // an interpreter it may run
}

// otherUser is nobody (or uid 65534), with a home directory of its own, and
// an interpreter outside root's home that it can run. Changing user needs
// root: without it the test is skipped (failed under
// CUDADEPS_REQUIRE_ORACLES=1, since CI runs as root).
func otherUser(t *testing.T) *asUser {
	t.Helper()
	lddtest.Need(t, os.Geteuid() == 0, "running cudadeps as another user needs root (euid %d)", os.Geteuid())
	u := &asUser{uid: 65534, gid: 65534}
	if nb, err := user.Lookup("nobody"); err == nil {
		uid, _ := strconv.Atoi(nb.Uid)
		gid, _ := strconv.Atoi(nb.Gid)
		u.uid, u.gid = uint32(uid), uint32(gid)
	}
	u.home = filepath.Join(sharedTemp(t), "home")
	if err := os.Mkdir(u.home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(u.home, int(u.uid), int(u.gid)); err != nil {
		t.Fatal(err)
	}
	candidates := []string{"/usr/bin/python3", "/usr/local/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		candidates = append(candidates, p)
	}
	for _, p := range candidates {
		if _, err := u.run(t, nil, p, "-c", "import venv"); err == nil {
			u.python = p
			break
		}
	}
	lddtest.Need(t, u.python != "", "no Python interpreter with venv that uid %d may run (tried %v)", u.uid, candidates)
	return u
}

// sharedTemp is a new directory that every user may read and enter
// (t.TempDir's are root's alone).
func sharedTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cudadeps-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// run runs a program as the user, with HOME its home and a plain PATH,
// plus env.
func (u *asUser) run(t *testing.T, env []string, name string, args ...string) (cliResult, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append([]string{"HOME=" + u.home, "PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}, env...)
	cmd.Dir = u.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := cliResult{stdout: out.String(), stderr: errb.String()}
	if cmd.ProcessState != nil {
		res.code = cmd.ProcessState.ExitCode()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return res, err
}

// rootOwnedTorch is a virtual environment made by root, owned by root and
// writable by no one else, holding the real torch 2.11.0+cu130
// environment's metadata with skeleton libraries, every nvidia-*
// distribution uninstalled as pip does; its wheels are served on a
// 127.0.0.1 index. systemSite makes it see the system's site-packages, as
// `python -m venv --system-site-packages` does, which leaves the user's
// site directory enabled.
func rootOwnedTorch(t *testing.T, u *asUser, systemSite bool) (python, site string, ix *indextest.Index, driver string) {
	t.Helper()
	base := sharedTemp(t)
	venv := filepath.Join(base, "venv")
	args := []string{"-m", "venv", "--without-pip", venv}
	if systemSite {
		args = append(args, "--system-site-packages")
	}
	if out, err := exec.Command(u.python, args...).CombinedOutput(); err != nil {
		lddtest.Need(t, false, "%s -m venv: %v: %s", u.python, err, out)
	}
	python = filepath.Join(venv, "bin", "python3")
	out, err := exec.Command(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").Output()
	if err != nil {
		t.Fatal(err)
	}
	site = strings.TrimSpace(string(out))
	torchenv.Build(t, torchenv.Options{Site: site, ELF: true, Consistent: true})
	var names []string
	for _, n := range torchenv.NVIDIA() {
		if n != "nvidia-ml-py" {
			names = append(names, n)
		}
	}
	var wheels []indextest.Wheel
	for _, p := range torchenv.Pack(t, site, names...) {
		wheels = append(wheels, p.Wheel())
	}
	torchenv.Uninstall(t, site, torchenv.NVIDIA()...)
	ix = indextest.Serve(t, wheels...)
	ix.CoreMetadata = true
	if st, err := os.Stat(site); err != nil || st.Mode().Perm()&0o022 != 0 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("the fixture's site-packages is not root's alone: %v %v", st.Mode(), err)
	}
	driver = filepath.Join(base, "driver")
	if err := elfwrite.Write(filepath.Join(driver, "libcuda.so.1"), elfwrite.Spec{Soname: "libcuda.so.1", Machine: elf.EM_X86_64, Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	return python, site, ix, driver
}

// torchLoads is what torch's own import does with its libraries, in the
// real interpreter and the real loader: ctypes loads torch/lib/
// libtorch_global_deps.so; when that fails for a library of NVIDIA's, it
// loads each such library by path from the first sys.path entry whose
// nvidia/*/lib has it, then libtorch_global_deps.so again; then it loads
// torch._C's file. The skeleton's extension module defines no PyInit, so
// `import torch` itself cannot run; these dlopen calls are the part of it
// that the loader judges. It prints "ok" when everything loads, else the
// loader's error.
const torchLoads = `
import ctypes, glob, os, sys
site = sys.argv[1]
lib = os.path.join(site, "torch", "lib", "libtorch_global_deps.so")
try:
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
except OSError as e:
    print("by path:", e)
    for pattern in ["libcublasLt.so.*[0-9]", "libcublas.so.*[0-9]", "libcudnn.so.*[0-9]", "libnvrtc.so.*[0-9]",
                    "libnvrtc-builtins.so.*[0-9]", "libcudart.so.*[0-9]", "libcupti.so.*[0-9]", "libcufft.so.*[0-9]",
                    "libcurand.so.*[0-9]", "libnvJitLink.so.*[0-9]", "libcusparse.so.*[0-9]", "libcusparseLt.so.*[0-9]",
                    "libcusolver.so.*[0-9]", "libnccl.so.*[0-9]", "libnvshmem_host.so.*[0-9]", "libcufile.so.*[0-9]"]:
        for entry in sys.path:
            found = sorted(glob.glob(os.path.join(entry, "nvidia", "*", "lib", pattern)))
            if found:
                print("loaded", found[0])
                ctypes.CDLL(found[0])
                break
        else:
            print("not found on sys.path:", pattern)
            sys.exit(1)
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(os.path.join(site, "torch", "_C.cpython-312-x86_64-linux-gnu.so"))
ctypes.CDLL(os.path.join(site, "torch", "lib", "libtorch_cuda_linalg.so"))
print("ok")
`

// A run as a non-root user against a root-owned site-packages whose
// interpreter enables the user's site directory ends in that directory:
// resolve restores every declared distribution there, at its RECORD paths
// with a .dist-info, and exits 0; the site-packages stays untouched. The
// model finds what was restored (scan loads torch's libraries through its
// fallback from the user site, every root ok), and so does the real
// loader, driven by the real interpreter as that user (torchLoads).
func TestResolveAsUserIntoUserSite(t *testing.T) {
	u := otherUser(t)
	python, site, ix, driver := rootOwnedTorch(t, u, true)
	env := []string{"LD_LIBRARY_PATH=" + driver}
	res, err := u.run(t, env, python, "-c", "import site, sys; print(site.ENABLE_USER_SITE); print(site.getusersitepackages())")
	if err != nil {
		t.Fatal(err, res.stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 2 || lines[0] != "True" || !strings.HasPrefix(lines[1], u.home+"/") {
		t.Fatalf("the venv does not enable the user site in %s: %q", u.home, res.stdout)
	}
	userSite := lines[1]
	before := snapshotNames(t, site)
	if res, _ := u.run(t, env, python, "-c", torchLoads, site); strings.Contains(res.stdout, "ok") {
		t.Fatalf("the fixture is wrong: torch's libraries load before the resolve:\n%s", res.stdout)
	}
	bin := binary(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	res, _ = u.run(t, env, bin, "resolve", "torch", "--python", python, "--source", "pypi", "--index-url", ix.URL, "--yes", "--no-verify")
	if res.code != 0 {
		t.Fatalf("resolve as uid %d: exit %d\n%s\n%s", u.uid, res.code, res.stdout, res.stderr)
	}
	if after := snapshotNames(t, site); !slices.Equal(before, after) {
		t.Errorf("the root-owned site-packages changed")
	}
	for _, rel := range []string{"nvidia/cu13/lib/libcudart.so.13", "nvidia/cu13/lib/libcublasLt.so.13", "nvidia/cudnn/lib/libcudnn.so.9",
		"nvidia/nccl/lib/libnccl.so.2", "nvidia/nvshmem/lib/libnvshmem_host.so.3", "nvidia/cusparselt/lib/libcusparseLt.so.0"} {
		if _, err := os.Stat(filepath.Join(userSite, rel)); err != nil {
			t.Errorf("not restored in the user site: %v", err)
		}
	}
	infos, _ := filepath.Glob(filepath.Join(userSite, "nvidia_*.dist-info"))
	if len(infos) != 15 {
		t.Errorf("%d .dist-info folders in the user site, want the 15 distributions: %v", len(infos), infos)
	}
	for _, info := range infos {
		if data, err := os.ReadFile(filepath.Join(info, "INSTALLER")); err != nil || strings.TrimSpace(string(data)) != "cudadeps" {
			t.Errorf("%s: INSTALLER %q %v", info, data, err)
		}
	}
	// The model: every object of torch loads, torch's own libraries
	// through its fallback from the user site.
	// Programs torch starts as processes of their own (torch/bin) get no
	// fallback: they are left out (docs/python-imports.md).
	res, _ = u.run(t, env, bin, "scan", filepath.Join(site, "torch"), "--python", python, "--json")
	var rep scan.Report
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("scan --json: exit %d: %v\n%s\n%s", res.code, err, res.stdout, res.stderr)
	}
	fromUser := false
	for _, r := range rep.Roots {
		if !r.OK && !strings.HasPrefix(r.Path, filepath.Join(site, "torch/bin")+"/") {
			t.Errorf("%s does not load in the model: %+v", r.Path, r.Missing)
		}
		if r.Import != nil {
			fromUser = fromUser || slices.ContainsFunc(r.Import.After, func(f string) bool { return strings.HasPrefix(f, userSite+"/") })
		}
	}
	if !fromUser {
		t.Error("the model loads nothing from the user site")
	}
	// The real loader, in the real interpreter as that user.
	if res, err := u.run(t, env, python, "-c", torchLoads, site); err != nil || !strings.HasSuffix(strings.TrimSpace(res.stdout), "ok") || !strings.Contains(res.stdout, userSite) {
		t.Errorf("torch's loads as uid %d after the resolve: %v\n%s\n%s", u.uid, err, res.stdout, res.stderr)
	}
	if res, _ := u.run(t, env, bin, "undo", "torch"); res.code != 0 {
		t.Fatalf("undo: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(userSite, "nvidia*")); len(left) > 0 {
		t.Errorf("undo left in the user site: %v", left)
	}
}

// Without a user site (a plain virtual environment), a non-root user's
// run against the root-owned site-packages writes the activation script,
// and after `. env.sh` the real loader finds every library torch needs.
func TestResolveAsUserWithoutUserSite(t *testing.T) {
	u := otherUser(t)
	python, site, ix, driver := rootOwnedTorch(t, u, false)
	env := []string{"LD_LIBRARY_PATH=" + driver}
	res, err := u.run(t, env, python, "-c", "import site; print(site.ENABLE_USER_SITE)")
	if err != nil || strings.TrimSpace(res.stdout) != "False" {
		t.Fatalf("a plain venv enables the user site: %q %v", res.stdout, err)
	}
	bin := binary(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(u.home, "prefix")
	res, _ = u.run(t, env, bin, "resolve", "torch", "--python", python, "--source", "pypi", "--index-url", ix.URL, "--yes", "--no-verify", "--prefix", prefix)
	if res.code != 0 {
		t.Fatalf("resolve as uid %d: exit %d\n%s\n%s", u.uid, res.code, res.stdout, res.stderr)
	}
	// A second run has nothing to do and downloads nothing: the copies in
	// the store are the distributions' own.
	n := ix.Downloads()
	again, _ := u.run(t, env, bin, "resolve", "torch", "--python", python, "--source", "pypi", "--index-url", ix.URL, "--yes", "--no-verify", "--prefix", prefix)
	if again.code != 0 || ix.Downloads() != n || !strings.Contains(again.stdout, "supplied") {
		t.Errorf("second resolve: exit %d, %d downloads\n%s\n%s", again.code, ix.Downloads()-n, again.stdout, again.stderr)
	}
	script := filepath.Join(prefix, "env.sh")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("no activation script: %v\n%s", err, res.stdout)
	}
	res, err = u.run(t, env, "/bin/sh", "-c", `. "$1" && printf %s "$LD_LIBRARY_PATH"`, "sh", script)
	if err != nil {
		t.Fatal(err, res.stderr)
	}
	ld, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so")
	for _, lib := range []string{"torch/lib/libtorch_cuda.so", "torch/_C.cpython-312-x86_64-linux-gnu.so", "torch/lib/libtorch_cuda_linalg.so"} {
		out, err := lddtest.List(context.Background(), ld, filepath.Join(site, lib), []string{"LD_LIBRARY_PATH=" + res.stdout})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range out.Lines {
			if l.NotFound {
				t.Errorf("%s after . env.sh: ld.so does not find %s", lib, l.Name)
			}
		}
	}
	if res, err := u.run(t, nil, "/bin/sh", "-c", `. "$1" && exec "$2" -c "$3" "$4"`, "sh", script, python, torchLoads, site); err != nil || !strings.HasSuffix(strings.TrimSpace(res.stdout), "ok") {
		t.Errorf("torch's loads after . env.sh: %v\n%s\n%s", err, res.stdout, res.stderr)
	}
	// undo takes the supplies back: the activation script serves nothing.
	if res, _ := u.run(t, env, bin, "undo", "torch", "--prefix", prefix); res.code != 0 {
		t.Fatalf("undo: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if res, _ := u.run(t, env, "/bin/sh", "-c", `. "$1" 2>/dev/null; printf %s "$LD_LIBRARY_PATH"`, "sh", script); strings.Contains(res.stdout, prefix) {
		t.Errorf("after undo, env.sh still serves %s", res.stdout)
	}
}

// snapshotNames lists the paths under dir.
func snapshotNames(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			out = append(out, p)
		}
		return nil
	})
	return out
}
