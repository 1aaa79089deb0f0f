package debredist

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// triplets names the multiarch directory of a Debian architecture.
var triplets = map[string]string{"arm64": "aarch64-linux-gnu", "amd64": "x86_64-linux-gnu"}

// driverLibs are the NVIDIA driver's libraries that Debian's
// nvidia-alternative links into the library directory through
// /etc/alternatives (its postinst's add_multiarch_slave lines).
var driverLibs = []string{"libcuda.so.1", "libnvidia-ptxjitcompiler.so.1"}

// BuildTree unpacks debs into a new merged-/usr tree at root (lib, lib64,
// bin and sbin links into usr, as trixie's base-files makes them), makes
// the links the packages' maintainer scripts would make (the BLAS and
// LAPACK alternatives, the NVIDIA driver's libraries), writes
// /etc/ld.so.conf and builds the tree's ld.so.cache with the tree's own
// ldconfig (libc-bin must be among debs) under qemu. arch is the packages'
// Debian architecture.
func BuildTree(t testing.TB, root, arch string, debs []string) *lddtest.Sysroot {
	t.Helper()
	needTools(t)
	qemu, ok := lddtest.Qemu()
	lddtest.Need(t, ok, "qemu-aarch64-static is not installed (Debian package qemu-user-static)")
	triplet, ok := triplets[arch]
	if !ok {
		t.Fatalf("no multiarch triplet known for %s", arch)
	}
	// The directories base-files makes, which the tree's packages may not.
	for _, d := range []string{"usr/lib", "usr/lib64", "usr/bin", "usr/sbin", "etc/ld.so.conf.d", "etc/alternatives", "opt", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"lib", "lib64", "bin", "sbin"} {
		if err := os.Symlink("usr/"+l, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range parallel(debs, func(deb string) error { return unpack(deb, root) }) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{"lib", "lib64", "bin", "sbin"} {
		if st, err := os.Lstat(filepath.Join(root, l)); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("a package replaced the /%s link of the merged-/usr tree", l)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "ld.so.conf"), []byte("include /etc/ld.so.conf.d/*.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	alternatives(t, root, triplet)
	sr := &lddtest.Sysroot{Root: root, Tools: root, Qemu: qemu}
	sr.RebuildCache(t)
	return sr
}

// alternatives makes the links of update-alternatives as Debian's
// maintainer scripts do: libblas.so.3 → /etc/alternatives/libblas.so.3-TRIPLET
// → /usr/lib/TRIPLET/blas/libblas.so.3 (and LAPACK's), and each driver
// library → /etc/alternatives/nvidia--NAME-TRIPLET →
// /usr/lib/TRIPLET/nvidia/current/NAME. Absolute links, resolved inside the
// tree by its loader.
func alternatives(t testing.TB, root, triplet string) {
	t.Helper()
	lib := filepath.Join(root, "usr", "lib", triplet)
	link := func(name, alt, target string) {
		if _, err := os.Lstat(filepath.Join(lib, name)); err == nil {
			return
		}
		if err := os.Symlink(target, filepath.Join(root, "etc", "alternatives", alt)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc/alternatives/"+alt, filepath.Join(lib, name)); err != nil {
			t.Fatal(err)
		}
	}
	var found []string
	for _, pat := range []string{"*/libblas.so.3", "*/liblapack.so.3"} {
		m, _ := filepath.Glob(filepath.Join(lib, pat))
		found = append(found, m...)
	}
	sort.Strings(found) // blas/ before openblas-pthread/: the first provider wins
	for _, f := range found {
		if strings.Contains(f, "/nvidia/") {
			continue
		}
		name := filepath.Base(f)
		link(name, name+"-"+triplet, "/usr/lib/"+triplet+"/"+strings.TrimPrefix(f, lib+"/"))
	}
	for _, name := range driverLibs {
		if _, err := os.Stat(filepath.Join(lib, "nvidia", "current", name)); err == nil {
			link(name, "nvidia--"+name+"-"+triplet, "/usr/lib/"+triplet+"/nvidia/current/"+name)
		}
	}
}
