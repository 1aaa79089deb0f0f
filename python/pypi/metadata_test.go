package pypi

import (
	"context"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/indextest"
)

// The metadata of a distribution that is not installed comes from the
// index: the PEP 658 file when offered (JSON and HTML pages), else the
// small wheel itself; a file whose hash is not the index's is refused.
func TestMetadataFromIndex(t *testing.T) {
	toolkit := indextest.Wheel{Project: "cuda-toolkit", Version: "13.0.2", Tags: "py3-none-any",
		Metadata: "Provides-Extra: cublas\nRequires-Dist: nvidia-cublas==13.1.0.3.*; extra == 'cublas'\n"}
	for _, c := range []struct {
		name       string
		html, core bool
	}{{"json with core metadata", false, true}, {"html with core metadata", true, true}, {"json, wheel only", false, false}, {"html, wheel only", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			ix := indextest.Serve(t, toolkit)
			ix.HTML, ix.CoreMetadata = c.html, c.core
			cl, err := NewClient(Options{Indexes: []string{ix.URL}})
			if err != nil {
				t.Fatal(err)
			}
			files, err := cl.Files(context.Background(), "cuda-toolkit")
			if err != nil || len(files) != 1 {
				t.Fatalf("files: %v %v", files, err)
			}
			if got := files[0].CoreMetadata != ""; got != c.core {
				t.Fatalf("core metadata offered: %v, want %v (%q)", got, c.core, files[0].CoreMetadata)
			}
			m, err := cl.Metadata(context.Background(), files[0])
			if err != nil {
				t.Fatal(err)
			}
			if m.Name != "cuda-toolkit" || len(m.RequiresDist) != 1 || m.RequiresDist[0].Name != "nvidia-cublas" {
				t.Errorf("metadata: %+v", m)
			}
			if c.core {
				f := files[0]
				f.CoreMetadata = "sha256=" + strings.Repeat("0", 64)
				if _, err := cl.Metadata(context.Background(), f); err == nil || !strings.Contains(err.Error(), "sha256") {
					t.Errorf("a metadata file with another hash: %v", err)
				}
			}
		})
	}
}

func TestMetadataOfALargeWheelIsNotDownloaded(t *testing.T) {
	ix := indextest.Serve(t, indextest.Wheel{Project: "nvidia-cublas", Version: "13.1.0.3", Tags: "py3-none-manylinux_2_27_x86_64",
		Files: map[string][]byte{"nvidia/cu13/lib/libcublas.so.13": make([]byte, 1<<20)}})
	cl, err := NewClient(Options{Indexes: []string{ix.URL}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := cl.Files(context.Background(), "nvidia-cublas")
	if err != nil {
		t.Fatal(err)
	}
	f := files[0]
	f.Size = maxWheelForMetadata + 1
	if _, err := cl.Metadata(context.Background(), f); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("a large wheel without a metadata file: %v", err)
	}
	if ix.Downloads() != 0 {
		t.Errorf("%d downloads", ix.Downloads())
	}
}

// A wheel file name with a version of 100,000 characters is refused with a
// short error.
func TestParseWheelBoundsTheVersion(t *testing.T) {
	name := "torch-" + strings.Repeat("1.", 50_000) + "1-cp312-cp312-manylinux_2_28_x86_64.whl"
	if _, err := ParseWheel(name); err == nil || len(err.Error()) > 300 {
		t.Errorf("ParseWheel of a %d-character version: %.300v", len(name), err)
	}
	if _, err := ParseWheel("torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"); err != nil {
		t.Error(err)
	}
}
