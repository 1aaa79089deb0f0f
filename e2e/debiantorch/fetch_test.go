package debiantorch_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/debredist"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
)

// debianMirror writes a Debian archive of one suite into dir: each
// package's .deb (its contents are its name and version) under pool/, the
// Packages.xz index of each component and the Release dated date. It
// returns the pin-list line of each package, by name.
func debianMirror(t *testing.T, dir, date string, pkgs map[string][3]string) map[string]string {
	t.Helper()
	index := map[string]*bytes.Buffer{}
	lines := map[string]string{}
	for name, p := range pkgs {
		comp, version, arch := p[0], p[1], p[2]
		pool := fmt.Sprintf("pool/%s/%c/%s/%s_%s_%s.deb", comp, name[0], name, name, version, arch)
		data := []byte(name + " " + version)
		sum := sha256.Sum256(data)
		write(t, filepath.Join(dir, pool), data)
		if index[comp] == nil {
			index[comp] = &bytes.Buffer{}
		}
		fmt.Fprintf(index[comp], "Package: %s\nVersion: %s\nArchitecture: %s\nFilename: %s\nSize: %d\nSHA256: %s\n\n", name, version, arch, pool, len(data), hex.EncodeToString(sum[:]))
		lines[name] = fmt.Sprintf("%s %s %s %s %d %s", name, version, arch, hex.EncodeToString(sum[:]), len(data), pool)
	}
	var comps []string
	for comp, b := range index {
		comps = append(comps, comp)
		xz := exec.Command("xz", "-c")
		xz.Stdin = b
		out, err := xz.Output()
		if err != nil {
			t.Fatalf("xz: %v", err)
		}
		write(t, filepath.Join(dir, "dists/trixie", comp, "binary-arm64/Packages.xz"), out)
	}
	write(t, filepath.Join(dir, "dists/trixie/Release"), []byte(fmt.Sprintf(
		"Origin: Debian\nLabel: Debian\nSuite: stable\nVersion: 13.8\nCodename: trixie\nDate: %s\nArchitectures: all amd64 arm64\nComponents: %s\n",
		date, strings.Join(comps, " "))))
	return lines
}

func write(t *testing.T, f string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fetchDebs runs e2e/foreign/fetch-debs.sh with args and env added.
func fetchDebs(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join("..", "foreign", "fetch-debs.sh")}, args...)...)
	cmd.Env = append(append(os.Environ(), "MIRROR=", "RETRY_SECONDS=0"), env...)
	out, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("fetch-debs.sh: %v\n%s", err, out)
	}
	return code, string(out)
}

// TestFetchDebsCurrent: e2e/foreign/fetch-debs.sh --current, against
// Debian-layout mirrors on 127.0.0.1, takes each pinned package at the
// version the suite's index lists now (libfoo1 was replaced), checked
// against the index's sha256, from the mirror apt's sources name (passing
// over one whose Release is older than the pin list's), and writes the
// list it fetched beside the packages, where debredist.Fetched finds it. A
// package whose file does not match the index, or that the suite no longer
// has, fails it, naming the package.
func TestFetchDebsCurrent(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "python3", "xz", "sha256sum"} {
		_, err := exec.LookPath(tool)
		lddtest.Need(t, err == nil, "%s is not installed", tool)
	}
	root := t.TempDir()
	pkgs := map[string][3]string{
		"libfoo1":     {"main", "1.0-2", "arm64"},
		"libbar-data": {"main", "2.0-1", "all"},
		"libcudafoo":  {"non-free", "12.4-1", "arm64"},
	}
	now := debianMirror(t, filepath.Join(root, "good"), "Sat, 28 Nov 2026 10:00:00 UTC", pkgs)
	old := debianMirror(t, filepath.Join(root, "stale"), "Sat, 14 Nov 2026 10:00:00 UTC",
		map[string][3]string{"libfoo1": {"main", "1.0-1", "arm64"}, "libbar-data": pkgs["libbar-data"], "libcudafoo": pkgs["libcudafoo"]})
	m := mirrortest.ServeDir(t, root)
	url := strings.TrimSuffix(m.URL, "/")
	pins := filepath.Join(t.TempDir(), "pins-trixie-arm64.txt")
	write(t, pins, []byte("# trixie arm64: 3 packages, 0 bytes, from http://deb.debian.org/debian\n"+
		"# resolved 20261121T120000Z (snapshot.debian.org timestamp)\n"+
		"# Debian 13.8 (trixie), Release of Sat, 21 Nov 2026 09:15:44 UTC\n"+
		old["libbar-data"]+"\n"+old["libcudafoo"]+"\n"+old["libfoo1"]+"\n"))
	apt := t.TempDir()
	write(t, filepath.Join(apt, "sources.list"), []byte("deb [arch=arm64] "+url+"/stale trixie main non-free\n"))
	write(t, filepath.Join(apt, "sources.list.d", "debian.sources"), []byte("Types: deb-src\nURIs: "+url+"/src\n\n"+
		"Types: deb\nURIs: "+url+"/good\nSuites: trixie\nComponents: main non-free\n"))
	debs := t.TempDir()
	code, out := fetchDebs(t, []string{"APT_ETC=" + apt}, "--current", pins, debs)
	if code != 0 || !strings.Contains(out, "mirror: "+url+"/good (apt's sources)") ||
		!strings.Contains(out, "re-resolved: libfoo1 1.0-2, pinned 1.0-1") || strings.Count(out, "re-resolved") != 1 ||
		!strings.Contains(out, "fetched 3 (") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for p, n := range m.Requests() {
		if strings.HasPrefix(p, "/stale/pool/") || strings.HasPrefix(p, "/src/") {
			t.Errorf("%d requests for %s", n, p)
		}
	}
	for _, line := range now {
		if list := string(mustRead(t, filepath.Join(debs, "pins-trixie-arm64.txt"))); !strings.Contains(list, "\n"+line+"\n") {
			t.Errorf("the list fetched lacks %q:\n%s", line, list)
		}
	}
	t.Setenv("CUDADEPS_TEST_DEBS", debs)
	got, files := debredist.Fetched(t, "CUDADEPS_TEST_DEBS", pins)
	if got.Version("libfoo1") != "1.0-2" || got.Version("libcudafoo") != "12.4-1" || len(files) != 3 ||
		filepath.Base(files["libfoo1"]) != "libfoo1_1.0-2_arm64.deb" {
		t.Errorf("fetched %+v, files %v", got.List, files)
	}
	// Again: every file is kept.
	if code, out := fetchDebs(t, []string{"APT_ETC=" + apt}, "--current", pins, debs); code != 0 || !strings.Contains(out, "fetched 0 (0 bytes)") || !strings.Contains(out, "kept 3") {
		t.Errorf("a second run: exit %d\n%s", code, out)
	}
	// A dry run downloads no package.
	dry := t.TempDir()
	if code, out := fetchDebs(t, []string{"MIRROR=" + url + "/good"}, "--current", "--dry-run", pins, dry); code != 0 ||
		!strings.Contains(out, "would fetch 3 (") {
		t.Errorf("--dry-run: exit %d\n%s", code, out)
	}
	if left, _ := os.ReadDir(dry); len(left) != 0 {
		t.Errorf("--dry-run left %v", left)
	}

	// The mirror's file is not what its index says.
	write(t, filepath.Join(root, "good", "pool/non-free/l/libcudafoo/libcudafoo_12.4-1_arm64.deb"), []byte("truncated"))
	if code, out := fetchDebs(t, []string{"MIRROR=" + url + "/good"}, "--current", pins, t.TempDir()); code != 1 ||
		!strings.Contains(out, "libcudafoo 12.4-1 (arm64): no copy with sha256") || strings.Count(out, "try ") != 3 {
		t.Errorf("a file that does not match the index: exit %d\n%s", code, out)
	}
	// The suite no longer has a pinned package.
	write(t, pins, append(mustRead(t, pins), "libgone1 1.0-1 arm64 0000000000000000000000000000000000000000000000000000000000000000 1 pool/main/l/libgone/libgone1_1.0-1_arm64.deb\n"...))
	if code, out := fetchDebs(t, []string{"MIRROR=" + url + "/good"}, "--current", pins, t.TempDir()); code != 1 ||
		!strings.Contains(out, "seed libgone1 is not in trixie/arm64") || !strings.Contains(out, "could not resolve") {
		t.Errorf("a package the suite no longer has: exit %d\n%s", code, out)
	}
}

func mustRead(t *testing.T, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
