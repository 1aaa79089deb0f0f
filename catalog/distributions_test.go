package catalog

import (
	"bufio"
	"encoding/csv"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/internal/testkit/distinfo"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// untarDistInfo unpacks the corpus's dist-info directories into a
// temporary directory.
func untarDistInfo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	distinfo.Unpack(t, filepath.Join(sharedDir(t, "corpus/torch"), "torch-2.11.0-cu130-x86_64-distinfo.tgz"), dir)
	return dir
}

type installedDist struct {
	name, version string
	sos           []string // RECORD paths of shared objects
	requires      []string // Requires-Dist lines
}

func readDistInfo(t *testing.T, dir string) installedDist {
	t.Helper()
	var d installedDist
	meta, err := os.Open(filepath.Join(dir, "METADATA"))
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	sc := bufio.NewScanner(meta)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break // the body follows the headers
		}
		if v, ok := strings.CutPrefix(line, "Name: "); ok {
			d.name = pymeta.NormalizeName(v)
		} else if v, ok := strings.CutPrefix(line, "Version: "); ok {
			d.version = v
		} else if v, ok := strings.CutPrefix(line, "Requires-Dist: "); ok {
			d.requires = append(d.requires, v)
		}
	}
	rec, err := os.Open(filepath.Join(dir, "RECORD"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	rows, err := csv.NewReader(rec).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if strings.HasSuffix(row[0], ".so") || strings.Contains(row[0], ".so.") {
			d.sos = append(d.sos, row[0])
		}
	}
	return d
}

// The table agrees with the real RECORD and METADATA of every NVIDIA
// distribution installed in the PyTorch 2.11 cu130 environment: each
// library lies in the table's directory and is a soname of the table's
// components, and the wheel's version maps to a version the manifests use.
func TestDistributionsAgreeWithRealRecords(t *testing.T) {
	root := untarDistInfo(t)
	tab, err := EmbeddedDistributions()
	if err != nil {
		t.Fatal(err)
	}
	c := loadDefault(t, LoadOptions{})
	dirs, _ := filepath.Glob(filepath.Join(root, "*.dist-info"))
	checked, matchedRelease := 0, 0
	var toolkit installedDist
	for _, dir := range dirs {
		inst := readDistInfo(t, dir)
		if inst.name == "cuda-toolkit" {
			toolkit = inst
		}
		if !strings.HasPrefix(inst.name, "nvidia-") && !strings.HasPrefix(inst.name, "nvpl-") {
			continue
		}
		d, ok := tab.Lookup(inst.name)
		if len(inst.sos) == 0 {
			if ok {
				t.Errorf("%s installs no library but is in the table", inst.name)
			}
			continue // nvidia-ml-py: Python bindings only
		}
		if !ok {
			t.Errorf("%s %s (libraries %v) is not in the table", inst.name, inst.version, inst.sos)
			continue
		}
		checked++
		var known []string
		for _, name := range d.Components {
			comp, ok := c.Component(name)
			if !ok {
				t.Fatalf("%s: component %s is not in the catalog", d.Name, name)
			}
			known = append(known, comp.Sonames...)
		}
		for _, so := range inst.sos {
			if dir := path.Dir(so); dir != d.LibDir {
				t.Errorf("%s: RECORD puts %s in %s, the table says %s", d.Name, path.Base(so), dir, d.LibDir)
			}
			if !slices.Contains(known, path.Base(so)) {
				t.Errorf("%s: %s is no soname of %v", d.Name, path.Base(so), d.Components)
			}
		}
		// The wheel's version in the manifests' format: as many fields as
		// the component's releases (exact), or fewer, leading (prefix).
		for _, name := range d.Components {
			comp, _ := c.Component(name)
			for _, r := range comp.Releases {
				if d.MatchesVersion(inst.version, r.Version) {
					matchedRelease++
				}
			}
			if len(comp.Releases) == 0 {
				continue // NCCL and NVSHMEM: no manifest
			}
			wf, cf := strings.Count(inst.version, "."), strings.Count(comp.Releases[0].Version, ".")
			if (d.VersionRule == VersionExact && wf != cf) || (d.VersionRule == VersionPrefix && wf >= cf) {
				t.Errorf("%s %s vs %s %s: the %s rule does not fit", d.Name, inst.version, name, comp.Releases[0].Version, d.VersionRule)
			}
		}
		for _, name := range d.Components {
			if !slices.Contains(tab.ForComponent(name, d.CUDA), d.Name) {
				t.Errorf("ForComponent(%s, %d) lacks %s", name, d.CUDA, d.Name)
			}
		}
	}
	if checked < 14 {
		t.Fatalf("only %d NVIDIA distributions with libraries in the corpus", checked)
	}
	// cuBLAS 13.1.0.3 (CUDA 13.0.2) and cuSPARSELt 0.8.0 are in the catalog.
	if matchedRelease < 2 {
		t.Errorf("only %d installed wheels map to a catalog release", matchedRelease)
	}

	// cuda-toolkit's extras pin the wheels the table names, at versions
	// of the CUDA release that bears cuda-toolkit's own version.
	if toolkit.name != tab.ToolkitName {
		t.Fatalf("no %s in the corpus", tab.ToolkitName)
	}
	pin := regexp.MustCompile(`^([A-Za-z0-9._-]+)==([0-9.]+?)(\.\*)?\s*;.*extra == '([a-z0-9_-]+)'`)
	seen := map[string]bool{}
	for _, req := range toolkit.requires {
		m := pin.FindStringSubmatch(req)
		if m == nil || m[4] == "all" {
			continue
		}
		want, ok := tab.ToolkitExtras[m[4]]
		if !ok {
			continue // headers, compilers and tools: no library to place
		}
		seen[m[4]] = true
		if pymeta.NormalizeName(m[1]) != want {
			t.Errorf("cuda-toolkit[%s] pins %s, the table says %s", m[4], m[1], want)
			continue
		}
		d, _ := tab.Lookup(want)
		comp, _ := c.Component(d.Components[0])
		i := slices.IndexFunc(comp.Releases, func(r *Release) bool { return d.MatchesVersion(m[2], r.Version) })
		if i < 0 {
			t.Errorf("cuda-toolkit %s pins %s %s: no %s release has that version", toolkit.version, want, m[2], comp.Name)
		} else if label := comp.Releases[i].Label; dotted.Compare(label, toolkit.version) < 0 {
			t.Errorf("%s %s comes from CUDA %s, older than cuda-toolkit %s", comp.Name, m[2], label, toolkit.version)
		}
	}
	for extra := range tab.ToolkitExtras {
		if !seen[extra] {
			t.Errorf("cuda-toolkit has no extra %s", extra)
		}
	}
}

func TestDistributionLookupAndVersions(t *testing.T) {
	tab, err := EmbeddedDistributions()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := tab.Lookup("NVIDIA_cudnn.CU13")
	if !ok || d.Name != "nvidia-cudnn-cu13" {
		t.Fatalf("PEP 503 spelling not found: %+v", d)
	}
	lt, _ := tab.Lookup("nvidia-cusparselt-cu13")
	for _, tc := range []struct {
		d              *Distribution
		wheel, version string
		want           bool
	}{
		{d, "9.19.0.56", "9.19.0.56", true},
		{d, "9.19.0.56", "9.19.0.5", false},
		{lt, "0.8.0", "0.8.0.4", true},
		{lt, "0.8.0", "0.8.01.4", false},
		{lt, "0.8", "0.8.0.4", true},
	} {
		if got := tc.d.MatchesVersion(tc.wheel, tc.version); got != tc.want {
			t.Errorf("%s %s ~ %s: %v", tc.d.Name, tc.wheel, tc.version, got)
		}
	}
	if _, err := parseDistributions([]byte("format: 1\ndistributions:\n  Nvidia_X:\n    components: [x]\n    lib_dir: a/lib\n    version: exact\n    source: s\n"), "d.yaml"); err == nil {
		t.Error("an unnormalized name was accepted")
	}
	if _, err := parseDistributions([]byte("format: 1\ndistributions:\n  nvidia-x:\n    components: [x]\n    lib_dir: ../lib\n    version: exact\n    source: s\n"), "d.yaml"); err == nil {
		t.Error("a lib_dir outside site-packages was accepted")
	}
}
