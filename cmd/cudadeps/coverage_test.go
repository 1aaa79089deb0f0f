package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fb "github.com/cudadeps/cudadeps/internal/testkit/fatbintest"
)

// coverageTree is a package of three libraries built like the GPU proof's
// nvcc fixtures: sm_80 only, sm_80 with PTX, sm_90.
func coverageTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, c := range map[string]fb.Container{
		"libsm80.so":    fb.SASS(80),
		"libsm80ptx.so": {Entries: []fb.Entry{{Kind: fb.ELF, Arch: 80}, {Kind: fb.PTX, Arch: 80, LZ: true, UncompressedSize: 2048}}},
		"libsm90.so":    fb.SASS(90),
	} {
		if err := fb.Library(filepath.Join(dir, name), name, c); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type coverageJSON struct {
	Coverage struct {
		Device struct {
			CC     *string `json:"cc"`
			Source string  `json:"source"`
			Name   string  `json:"name"`
		} `json:"device"`
		Objects []struct {
			Path    string `json:"path"`
			Verdict string `json:"verdict"`
			Reason  string `json:"reason"`
			SASS    []struct {
				Arch string `json:"arch"`
			} `json:"sass"`
		} `json:"objects"`
		Summary struct {
			Native, JIT, None int
		} `json:"summary"`
	} `json:"coverage"`
}

func verdicts(t *testing.T, out string) (map[string]string, coverageJSON) {
	t.Helper()
	var doc coverageJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]string{}
	for _, o := range doc.Coverage.Objects {
		got[filepath.Base(o.Path)] = o.Verdict
	}
	return got, doc
}

func TestScanCoverageSM(t *testing.T) {
	dir := coverageTree(t)
	code, out, stderr := doctorCLI("scan", dir, "--sm", "90", "--json", "--ld-library-path", "")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	got, doc := verdicts(t, out)
	for lib, want := range map[string]string{"libsm80.so": "none", "libsm80ptx.so": "jit", "libsm90.so": "native"} {
		if got[lib] != want {
			t.Errorf("%s: %q, want %q (%v)", lib, got[lib], want, got)
		}
	}
	if d := doc.Coverage.Device; d.CC == nil || *d.CC != "9.0" || d.Source != "--sm" || !strings.Contains(d.Name, "H100") {
		t.Errorf("device %+v", d)
	}
	// The same as text, and for a device by name.
	code, out, _ = doctorCLI("scan", dir, "--sm", "thor", "--ld-library-path", "")
	if code != exitOK || !strings.Contains(out, "GPU code coverage: compute capability 11.0 (Jetson Thor") ||
		!strings.Contains(out, "NOTHING RUNS  "+filepath.Join(dir, "libsm90.so")) || !strings.Contains(out, "PTX JIT  "+filepath.Join(dir, "libsm80ptx.so")) ||
		!strings.Contains(out, "0 native, 1 PTX JIT (2.0 KiB of PTX compiled at first use), 0 built at run time, 2 with nothing that runs") {
		t.Errorf("exit %d\n%s", code, out)
	}
	// Without --sm or --coverage nothing is read.
	if _, out, _ := doctorCLI("scan", dir, "--json", "--ld-library-path", ""); strings.Contains(out, `"coverage"`) {
		t.Errorf("coverage unasked:\n%s", out)
	}
	if code, _, stderr := doctorCLI("scan", dir, "--sm", "hopperish"); code != exitUsage || !strings.Contains(stderr, "--sm:") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestScanCoverageRoot: under --root, the device is the root's (its PCI
// IDs), never this machine's NVML.
func TestScanCoverageRoot(t *testing.T) {
	quietEnv(t)
	root := gpuRoot(t, true)
	addr := "0000:17:00.0"
	for attr, v := range map[string]string{"vendor": "0x10de", "device": "0x2330", "class": "0x030200"} {
		p := filepath.Join(root, "sys/devices/pci0000:00", addr, attr)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "sys/bus/pci/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../devices/pci0000:00/"+addr, filepath.Join(root, "sys/bus/pci/devices", addr)); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(root, "opt/app")
	if err := os.Rename(coverageTree(t), app); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := doctorCLI("scan", app, "--root", root, "--coverage", "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	got, doc := verdicts(t, out)
	if d := doc.Coverage.Device; d.CC == nil || *d.CC != "9.0" || d.Source != "pci" || got["libsm90.so"] != "native" || got["libsm80.so"] != "none" {
		t.Errorf("%+v %v", d, got)
	}
	// doctor judges the same target, and finds the PTX JIT compiler.
	code, out, _ = doctorCLI("doctor", "--root", root, app, "--json")
	var rep struct {
		Checks []struct{ ID, Status, Evidence string } `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	found := false
	for _, c := range rep.Checks {
		if c.ID == "coverage" {
			found = true
			if c.Status != "fail" || !strings.Contains(c.Evidence, "libsm80.so (nothing runs on 9.0: carries sm_80)") ||
				!strings.Contains(c.Evidence, "libcuda.so.1 finds /usr/lib64/libnvidia-ptxjitcompiler.so.1") || !strings.Contains(c.Evidence, "(pci)") {
				t.Errorf("%+v", c)
			}
		}
	}
	if !found || code != exitError {
		t.Errorf("exit %d, coverage check found %v\n%s", code, found, out)
	}
}

// TestResolveCoverage: resolve judges what finally loads; a bad --sm is
// refused before anything is planned.
func TestResolveCoverage(t *testing.T) {
	dir := coverageTree(t)
	prefix := filepath.Join(t.TempDir(), "prefix")
	code, out, stderr := doctorCLI("resolve", dir, "--dry-run", "--json", "--sm", "9.0", "--prefix", prefix, "--ld-library-path", "", "--quiet")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	got, _ := verdicts(t, out)
	if got["libsm80.so"] != "none" || got["libsm80ptx.so"] != "jit" || got["libsm90.so"] != "native" {
		t.Errorf("%v\n%s", got, out)
	}
	code, out, _ = doctorCLI("resolve", dir, "--dry-run", "--sm", "orin", "--prefix", prefix, "--ld-library-path", "", "--quiet")
	if code != exitOK || !strings.Contains(out, "GPU code coverage: compute capability 8.7 (Jetson AGX Orin") || !strings.Contains(out, "NOTHING RUNS  "+filepath.Join(dir, "libsm90.so")) {
		t.Errorf("exit %d\n%s", code, out)
	}
	if code, _, stderr := doctorCLI("resolve", dir, "--dry-run", "--sm", "sm_90a", "--prefix", prefix); code != exitUsage || !strings.Contains(stderr, "--sm:") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}
