package runtimeopen

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

func TestTableEntries(t *testing.T) {
	tab, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Entries) < 20 {
		t.Fatalf("only %d entries", len(tab.Entries))
	}
	for i, e := range tab.Entries {
		if len(e.Source) < 20 {
			t.Errorf("entry %d (%s%s): source %q says too little", i+1, e.Opener, e.OpenerPath, e.Source)
		}
		for _, o := range e.Opens {
			for _, n := range Alternatives(o) {
				if !WellFormed(n) {
					t.Errorf("entry %d: %q is not a library name", i+1, n)
				}
			}
		}
	}
	// The checks refuse what they should.
	for _, bad := range []string{
		"- {opener: libx.so.1, opens: [liby.so.1]}",
		"- {opener: libx.so.1, opens: [liby.so.1/x], source: a source long enough to count}",
		"- {opener: libx.so.1, opener_path: a/b.so, opens: [liby.so.1], source: a source long enough}",
		"- {opener: libx.so.1, opens: [libz.so.*], source: a pattern without directories}",
		"- {opener: libx, opens: [liby.so.1], source: not a library name as opener}",
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestWellFormed(t *testing.T) {
	for _, ok := range []string{"libcuda.so.1", "libnvrtc-builtins.so.13.0", "libtpu.so", "libcublas.so.*[0-9]", "libnvinfer_builder_resource.so.10.*", "libstdc++.so.6"} {
		if !WellFormed(ok) {
			t.Errorf("%s refused", ok)
		}
	}
	for _, bad := range []string{"", "libcuda", "/usr/lib/libcuda.so.1", "libcuda.so.1.x", "lib cuda.so"} {
		if WellFormed(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The table against the real layout: every required entry whose opener is a
// file of the GPU machine's torch environment names a library that is there
// too (or one of the driver).
func TestTableMatchesCorpus(t *testing.T) {
	f, err := os.Open(filepath.Join(lddtest.SharedDir(t), "corpus", "torch", "torch-2.11.0-cu130-x86_64-venv.jsonl.gz"))
	lddtest.Need(t, err == nil, "the torch corpus of ../shared is not available: %v", err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	var paths []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var rec struct {
			Path   string `json:"path"`
			Soname string `json:"soname"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		names[path.Base(rec.Path)] = true
		if rec.Soname != "" {
			names[rec.Soname] = true
		}
		paths = append(paths, rec.Path)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	present := func(n string) bool {
		if !strings.ContainsAny(n, "*[") {
			return names[n]
		}
		for k := range names {
			if ok, _ := path.Match(n, k); ok {
				return true
			}
		}
		return false
	}
	tab, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i, e := range tab.Entries {
		if e.Optional || e.Driver {
			continue
		}
		inCorpus := e.Opener != "" && names[e.Opener]
		if e.OpenerPath != "" {
			for _, p := range paths {
				if ok, _ := path.Match(e.OpenerPath, p); ok {
					inCorpus = true
				}
			}
		}
		if !inCorpus {
			continue
		}
		checked++
		for _, o := range e.Opens {
			found := false
			for _, n := range Alternatives(o) {
				found = found || present(n)
			}
			if !found {
				t.Errorf("entry %d (%s%s) opens %s, which the corpus lacks", i+1, e.Opener, e.OpenerPath, o)
			}
		}
	}
	if checked < 8 {
		t.Errorf("only %d entries have their opener in the corpus", checked)
	}
}

// An entry keyed on a wheel's unversioned name answers to Debian's
// versioned one; a versioned key answers to nothing longer, and a name
// whose version is not numeric to nothing.
func TestForSonameVersioned(t *testing.T) {
	tab, err := Parse([]byte(`
- {opener: libtorch_cpu.so, opens: [libtorch_cuda_linalg.so], source: "a wheel's unversioned soname"}
- {opener: libnvrtc.so.12, opens: [libnvrtc-builtins.so.12.4], source: "a versioned soname, as NVIDIA names it"}
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{
		"libtorch_cpu.so": 1, "libtorch_cpu.so.2.6": 1, "libtorch_cpu.so.2": 1, "libtorch_cpu.so.2.6.0": 1,
		"libtorch_cpu.so.x": 0, "libtorch_cpu.so.2.": 0, "libtorch_cpu.so2": 0,
		"libtorch_cpu.so.": 0, "libtorch_cpu.so.2..6": 0, "libtorch_cpu.so.2a": 0, "libtorch_cpu.so..2": 0,
		"libnvrtc.so.12": 1, "libnvrtc.so.12.4.127": 0, "libnvrtc.so": 0,
	} {
		if got := len(tab.ForSoname(name)); got != want {
			t.Errorf("ForSoname(%s): %d entries, want %d", name, got, want)
		}
	}
	// An entry that several of an object's names reach comes once.
	if got := len(tab.ForSoname("libtorch_cpu.so", "libtorch_cpu.so.2.6", "libtorch_cpu.so")); got != 1 {
		t.Errorf("ForSoname of three names of one library: %d entries, want 1", got)
	}
}
