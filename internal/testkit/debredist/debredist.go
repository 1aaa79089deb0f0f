// Package debredist builds, from pinned Debian packages, what the arm64 end-to-end tests resolve: a system tree as dpkg installs the packages, and NVIDIA-layout redistributable archives with NVIDIA-format manifests repacked from Debian's CUDA packages.
package debredist

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/workers"
)

// Pin is one line of a pin list (e2e/foreign/pin.py's output): a .deb and
// its sha256, size and pool path.
type Pin struct {
	Package, Version, Arch, SHA256, Pool string
	Size                                 int64
}

// Pins is a pin list.
type Pins struct {
	Arch string // the architecture its first line names
	List []Pin
}

// ReadPins reads a pin list.
func ReadPins(file string) (*Pins, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := &Pins{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			// "# trixie arm64: 61 packages, ..."
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" {
				p.Arch = strings.TrimSuffix(f[2], ":")
			}
		}
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 6 {
			return nil, fmt.Errorf("%s:%d: want PACKAGE VERSION ARCH SHA256 SIZE POOL, got %q", file, n, line)
		}
		size, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: size %q: %w", file, n, f[4], err)
		}
		p.List = append(p.List, Pin{Package: f[0], Version: f[1], Arch: f[2], SHA256: f[3], Size: size, Pool: f[5]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if p.Arch == "" {
		return nil, fmt.Errorf("%s: no architecture on its first line", file)
	}
	return p, nil
}

// FilePins is the pin list of .deb files named as Debian names them
// (PACKAGE_VERSION_ARCH.deb, an epoch's colon written %3a), of one
// architecture (and "all"), with the file of each package. The files'
// contents are the caller's to have checked (lddtest.VerifiedDebs).
func FilePins(arch string, files []string) (*Pins, map[string]string, error) {
	p := &Pins{Arch: arch}
	debs := map[string]string{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".deb")
		parts := strings.Split(name, "_")
		if len(parts) != 3 || !strings.HasSuffix(f, ".deb") {
			return nil, nil, fmt.Errorf("%s: not named PACKAGE_VERSION_ARCH.deb", f)
		}
		if parts[2] != arch && parts[2] != "all" {
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			return nil, nil, err
		}
		p.List = append(p.List, Pin{Package: parts[0], Version: strings.ReplaceAll(parts[1], "%3a", ":"), Arch: parts[2], Size: st.Size(), Pool: filepath.Base(f)})
		debs[parts[0]] = f
	}
	return p, debs, nil
}

// Version is the pinned version of a package, "" when not pinned.
func (p *Pins) Version(pkg string) string {
	for _, x := range p.List {
		if x.Package == pkg {
			return x.Version
		}
	}
	return ""
}

// Fetched is what e2e/foreign/fetch-debs.sh fetched for the pin list
// committed into the folder the environment variable env names: the list
// it fetched (with --current, the list it wrote there under committed's
// name, the same packages at the versions Debian lists now; else committed
// itself) and each package's .deb, checked by Debs. The packages are the
// data an oracle test runs on: without them the test skips, or fails
// under CUDADEPS_REQUIRE_ORACLES=1.
func Fetched(t testing.TB, env, committed string) (*Pins, map[string]string) {
	t.Helper()
	pinned, err := ReadPins(committed)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv(env)
	lddtest.Need(t, dir != "", "%s is not set: e2e/foreign/fetch-debs.sh --current PINS DIR fetches the packages of PINS (%s, beside the test) into DIR", env, committed)
	pins := pinned
	if f := filepath.Join(dir, filepath.Base(committed)); fileExists(f) {
		if pins, err = ReadPins(f); err != nil {
			t.Fatal(err)
		}
		if err := samePackages(pinned, pins); err != nil {
			t.Fatalf("%s is not %s re-resolved: %v", f, committed, err)
		}
		for _, p := range pins.List {
			if v := pinned.Version(p.Package); v != p.Version {
				t.Logf("%s %s, pinned %s (re-resolved by fetch-debs.sh --current)", p.Package, p.Version, v)
			}
		}
	}
	return pins, Debs(t, dir, pins)
}

func fileExists(f string) bool {
	_, err := os.Stat(f)
	return err == nil
}

// samePackages checks that b lists the packages of a, for the same
// architecture.
func samePackages(a, b *Pins) error {
	names := func(p *Pins) []string {
		var out []string
		for _, x := range p.List {
			out = append(out, x.Package)
		}
		slices.Sort(out)
		return out
	}
	if a.Arch != b.Arch {
		return fmt.Errorf("architecture %s, want %s", b.Arch, a.Arch)
	}
	if na, nb := names(a), names(b); !slices.Equal(na, nb) {
		return fmt.Errorf("%d packages, want %d: %v", len(nb), len(na), nb)
	}
	return nil
}

// Debs finds the pinned packages in dir (where e2e/foreign/fetch-debs.sh
// put them) and checks each against its size and sha256: a test is never
// judged against other bytes than the pinned ones. It returns the .deb of
// each package. Missing files skip the test, or fail it under
// CUDADEPS_REQUIRE_ORACLES=1, saying which; one that differs fails it.
func Debs(t testing.TB, dir string, pins *Pins) map[string]string {
	t.Helper()
	out := map[string]string{}
	var missing []string
	for _, p := range pins.List {
		if p.Arch != pins.Arch && p.Arch != "all" {
			continue
		}
		f := filepath.Join(dir, path.Base(p.Pool))
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, path.Base(p.Pool))
			continue
		}
		out[p.Package] = f
	}
	lddtest.Need(t, len(missing) == 0, "%d pinned packages are not in %s (%s…): fetch them with e2e/foreign/fetch-debs.sh", len(missing), dir, strings.Join(missing[:min(len(missing), 3)], ", "))
	check := func(p Pin) error {
		f := out[p.Package]
		h := sha256.New()
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		defer fh.Close()
		n, err := io.Copy(h, fh)
		if err != nil {
			return err
		}
		if sum := hex.EncodeToString(h.Sum(nil)); n != p.Size || sum != p.SHA256 {
			return fmt.Errorf("%s: %d bytes, sha256 %s; the pin list says %d bytes, %s", f, n, sum, p.Size, p.SHA256)
		}
		return nil
	}
	var pending []Pin
	for _, p := range pins.List {
		if _, ok := out[p.Package]; ok {
			pending = append(pending, p)
		}
	}
	for _, err := range parallel(pending, check) {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// parallel runs do for each item, two at a time (the machines the tests
// run on have two cores), and returns the errors in the items' order.
func parallel[T any](items []T, do func(T) error) []error {
	errs := make([]error, len(items))
	workers.Each(len(items), 2, func(i int) { errs[i] = do(items[i]) })
	return errs
}

// unpack extracts a .deb's files into root as dpkg installs them: through
// the links a merged-/usr root has for /lib, /bin and /sbin.
func unpack(deb, root string) error {
	dpkg := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	tar := exec.Command("tar", "-x", "--keep-directory-symlink", "-C", root)
	pipe, err := dpkg.StdoutPipe()
	if err != nil {
		return err
	}
	tar.Stdin = pipe
	var dpkgErr, tarErr strings.Builder
	dpkg.Stderr, tar.Stderr = &dpkgErr, &tarErr
	if err := dpkg.Start(); err != nil {
		return fmt.Errorf("dpkg-deb %s: %w", deb, err)
	}
	if err := tar.Run(); err != nil {
		_ = dpkg.Wait()
		return fmt.Errorf("unpack %s: %v: %s", deb, err, tarErr.String())
	}
	if err := dpkg.Wait(); err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %v: %s", deb, err, dpkgErr.String())
	}
	return nil
}

// needTools skips (or fails) a test without dpkg-deb and tar.
func needTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"dpkg-deb", "tar"} {
		_, err := exec.LookPath(tool)
		lddtest.Need(t, err == nil, "%s is not installed", tool)
	}
}
