package doctor

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
)

func failingReport(t *testing.T) *Report {
	h := newGPUHost(t)
	h.env["CUDA_VISIBLE_DEVICES"] = ""
	h.remove("/dev/nvidia-uvm")
	h.elf("/opt/hook.so", hookLib("cuInit"))
	h.env["LD_PRELOAD"] = "/opt/hook.so"
	return h.report()
}

func TestWriteText(t *testing.T) {
	r := failingReport(t)
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	i := 0
	for _, c := range r.Checks {
		f := strings.Fields(lines[i])
		if len(f) < 3 || f[1] != c.ID || f[0] != statusWord(c.Status) || !strings.HasSuffix(lines[i], c.Evidence) {
			t.Fatalf("line %d %q for %+v", i, lines[i], c)
		}
		i++
		if c.Status != OK {
			if !strings.HasSuffix(lines[i], "→ "+c.Advice) || strings.TrimSpace(lines[i])[:len("→")] != "→" {
				t.Fatalf("advice line %q for %+v", lines[i], c)
			}
			i++
		}
		if c.ID != CheckHost {
			continue
		}
		// The host's evidence, one indented line each, in order.
		for _, e := range r.Host.Evidence {
			f := strings.Fields(lines[i])
			if lines[i][0] != ' ' || len(f) < 2 || f[0] != e.Source || !strings.HasSuffix(lines[i], "  "+e.Says) {
				t.Fatalf("evidence line %q for %+v", lines[i], e)
			}
			i++
		}
	}
	if lines[i] != "" || lines[i+1] != "2 failures, 1 warning, 7 ok" || len(lines) != i+2 {
		t.Errorf("closing lines %q", lines[i:])
	}
	if r.Summary.Fail != 2 || r.Summary.Warn != 1 || r.Summary.Status != Fail {
		t.Errorf("summary %+v", r.Summary)
	}
}

// TestReportJSON checks the names the report's fields have in JSON.
func TestReportJSON(t *testing.T) {
	r := failingReport(t)
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if keys := sortedKeys(doc); !slices.Equal(keys, []string{"checks", "host", "summary"}) {
		t.Errorf("top-level keys %v", keys)
	}
	var host map[string]any
	if err := json.Unmarshal(doc["host"], &host); err != nil {
		t.Fatal(err)
	}
	// The test's host is a root whose only evidence is an x86_64 driver.
	if host["kind"] != "x86_64" || host["machine"] != "x86_64" || host["platform"] != "linux-x86_64" || len(host["evidence"].([]any)) != len(r.Host.Evidence) {
		t.Errorf("host %v", host)
	}
	if e := host["evidence"].([]any)[2].(map[string]any); e["source"] != "/proc/driver/nvidia/version" || e["found"] != true || !strings.Contains(e["says"].(string), "580.95.05") {
		t.Errorf("host evidence %v", e)
	}
	var checks []map[string]any
	if err := json.Unmarshal(doc["checks"], &checks); err != nil {
		t.Fatal(err)
	}
	if len(checks) != len(r.Checks) {
		t.Fatalf("%d checks", len(checks))
	}
	for i, c := range checks {
		if keys := sortedKeys(c); !slices.Equal(keys, []string{"advice", "evidence", "id", "status"}) {
			t.Errorf("check keys %v", keys)
		}
		if c["id"] != r.Checks[i].ID || c["status"] != string(r.Checks[i].Status) {
			t.Errorf("check %d: %v", i, c)
		}
	}
	var s map[string]any
	if err := json.Unmarshal(doc["summary"], &s); err != nil {
		t.Fatal(err)
	}
	if s["status"] != "fail" || s["fail"] != 2.0 || s["warn"] != 1.0 || s["ok"] != 7.0 || s["driver"] != "580.95.05" || s["driver_cuda"] != "13.0" {
		t.Errorf("summary %v", s)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return k
}
