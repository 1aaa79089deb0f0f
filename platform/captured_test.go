package platform

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// capturedH100 is the evidence e2e/gpu/platform-evidence.sh captures on the
// GPU host (x86_64, H100), committed as it came: root/ (what cudadeps
// reads), SOURCES, nvidia-smi-q.txt (nvidia-smi's summary) and doctor.json
// (`cudadeps doctor --json` there).
const capturedH100 = "x86_64-h100"

// TestCapturedHost names the captured GPU host from its files and checks
// the result against the independent reports taken on it: nvidia-smi's
// driver version, the NVIDIA PCI functions, and what doctor said there.
// Until the capture is committed the test skips, saying so; under
// CUDADEPS_REQUIRE_ORACLES=1 it fails instead.
func TestCapturedHost(t *testing.T) {
	dir := filepath.Join(hostsDir, capturedH100)
	if _, err := os.Stat(dir); err != nil {
		msg := "the GPU host's evidence is not captured yet (" + dir + "): run `bash e2e/gpu/platform-evidence.sh CUDADEPS` there and commit $OUT/platform-evidence/" + capturedH100 + " as " + dir
		lddtest.Need(t, false, "%s", msg)
	}
	checkSources(t, dir)
	h := detectIn(t, filepath.Join(dir, "root"), elf.EM_NONE)
	if h.Kind != KindX86_64 || h.Machine != "x86_64" {
		t.Fatalf("captured host: %s (%s)\n%s", h.Kind, h.Machine, evidenceText(h))
	}
	if p, err := h.Platform(13); p != LinuxX86_64 || err != nil {
		t.Errorf("Platform(13) = %q, %v", p, err)
	}
	smi := nvidiaSMIDriver(t, filepath.Join(dir, "nvidia-smi-q.txt"))
	if h.Driver == "" || h.Driver != smi {
		t.Errorf("driver from %s: %q; nvidia-smi says %q", DriverFile, h.Driver, smi)
	}
	pci, _ := filepath.Glob(filepath.Join(dir, "root/sys/bus/pci/devices/*/vendor"))
	if len(pci) == 0 {
		t.Errorf("no NVIDIA PCI function captured")
	}
	for _, v := range pci {
		if data, err := os.ReadFile(v); err != nil || strings.TrimSpace(string(data)) != "0x10de" {
			t.Errorf("%s: %q, %v; want NVIDIA's 0x10de", v, data, err)
		}
	}
	var doc struct {
		Host    struct{ Kind, Platform string } `json:"host"`
		Summary struct{ Driver string }         `json:"summary"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "doctor.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("doctor.json: %v", err)
	}
	if doc.Host.Kind != string(KindX86_64) || doc.Host.Platform != LinuxX86_64 || doc.Summary.Driver != smi {
		t.Errorf("doctor on the GPU host said host %+v, driver %q; nvidia-smi says driver %q", doc.Host, doc.Summary.Driver, smi)
	}
}

// nvidiaSMIDriver reads "Driver Version : 580.95.05" from nvidia-smi -q.
func nvidiaSMIDriver(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "Driver Version" {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s names no driver version", file)
	return ""
}
