package catalog

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/distinfo"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

var update = flag.Bool("update", false, "rewrite the generated files of the tests run: wheelrecords.json from the shared corpus (TestWheelRecords...), compiled.go from catalog.yaml (TestCompiledCatalog)")

const distinfoCorpus = "torch-2.11.0-cu130-x86_64-distinfo.tgz"

// corpusWheelRecords reads the wheel records of NVIDIA's distributions
// (those the distribution table knows, and the toolkit's metadata
// distribution) from the real dist-info folders of the shared corpus.
func corpusWheelRecords(t *testing.T) []*WheelRecord {
	t.Helper()
	dists, err := EmbeddedDistributions()
	if err != nil {
		t.Fatal(err)
	}
	folders := map[string]map[string][]byte{}
	for _, f := range distinfo.Read(t, filepath.Join(sharedDir(t, "corpus/torch"), distinfoCorpus)) {
		folders[f.Dir] = f.Files
	}
	var out []*WheelRecord
	for dir, files := range folders {
		name, _, _ := strings.Cut(strings.TrimSuffix(dir, ".dist-info"), "-")
		if _, ok := dists.Lookup(name); !ok && pymeta.NormalizeName(name) != dists.ToolkitName {
			continue
		}
		r, err := wheelRecordFromDistInfo(files, "RECORD, METADATA and WHEEL of the installed "+dir+" (the PyTorch 2.11 cu130 environment, x86_64)")
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		out = append(out, r)
	}
	if len(out) < 15 {
		t.Fatalf("only %d NVIDIA distributions in the corpus", len(out))
	}
	return out
}

// The embedded table is exactly what the real dist-info folders say: it is
// generated, never edited by hand (go test ./catalog -run WheelRecords -update).
func TestWheelRecordsAreTheCorpus(t *testing.T) {
	want, err := marshalWheelRecords(corpusWheelRecords(t))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(repoRoot(t), "catalog", "wheelrecords.json")
	if *update {
		if err := os.WriteFile(file, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(want, embeddedWheelRecords) {
		t.Fatalf("catalog/wheelrecords.json differs from the corpus; regenerate it with go test ./catalog -run WheelRecords -update")
	}
}

func TestWheelRecordsLookups(t *testing.T) {
	tab, err := EmbeddedWheelRecords()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := tab.Exact("nvidia_cudnn_cu13", "9.19.0.56")
	if !ok {
		t.Fatal("nvidia-cudnn-cu13 9.19.0.56 is not in the table")
	}
	var libs []string
	for _, f := range SharedLibraries(r.Files) {
		libs = append(libs, f.Path)
	}
	if len(libs) != 8 || !strings.HasPrefix(libs[0], "nvidia/cudnn/lib/libcudnn") {
		t.Errorf("cuDNN's libraries: %v", libs)
	}
	m, err := r.Metadata()
	if err != nil || len(m.RequiresDist) != 1 || m.RequiresDist[0].Name != "nvidia-cublas" {
		t.Errorf("cuDNN's Requires-Dist: %+v, %v", m, err)
	}
	// A neighbouring release of the same major lends its layout; another
	// major does not.
	for _, c := range []struct {
		version, want string
		ok            bool
	}{
		{"9.19.0.56", "9.19.0.56", true},
		{"9.27.0.42", "9.19.0.56", true},
		{"9.12.0.46", "9.19.0.56", true},
		{"8.9.7.29", "", false},
	} {
		got, ok := tab.Nearest("nvidia-cudnn-cu13", c.version)
		if ok != c.ok || ok && got.Version != c.want {
			t.Errorf("Nearest(cudnn %s) = %v, %v; want %s, %v", c.version, got, ok, c.want, c.ok)
		}
	}
	tk, ok := tab.Exact("cuda-toolkit", "13.0.2")
	if !ok || len(tk.Files) != 0 || len(tk.ProvidesExtra) < 10 {
		t.Fatalf("cuda-toolkit 13.0.2: %+v", tk)
	}
}

func TestWheelRecordsRefuseBadTables(t *testing.T) {
	for name, doc := range map[string]string{
		"escaping path": `{"format":1,"wheels":[{"name":"nvidia-x","version":"1","tags":[],"files":[{"path":"../x.so","size":1}],"source":"s"}]}`,
		"absolute path": `{"format":1,"wheels":[{"name":"nvidia-x","version":"1","tags":[],"files":[{"path":"/x.so","size":1}],"source":"s"}]}`,
		"bad name":      `{"format":1,"wheels":[{"name":"Nvidia_X","version":"1","tags":[],"files":[],"source":"s"}]}`,
		"no source":     `{"format":1,"wheels":[{"name":"nvidia-x","version":"1","tags":[],"files":[]}]}`,
		"bad sha":       `{"format":1,"wheels":[{"name":"nvidia-x","version":"1","tags":[],"files":[{"path":"a.so","size":1,"sha256":"zz"}],"source":"s"}]}`,
		"bad require":   `{"format":1,"wheels":[{"name":"nvidia-x","version":"1","tags":[],"requires_dist":["==="],"files":[],"source":"s"}]}`,
		"unknown field": `{"format":1,"wheels":[],"extra":1}`,
		"format":        `{"format":2,"wheels":[]}`,
	} {
		if _, err := parseWheelRecords([]byte(doc), "t.json"); err == nil || !strings.HasPrefix(err.Error(), "t.json: ") {
			t.Errorf("%s: error %v, want one naming t.json", name, err)
		}
	}
}
