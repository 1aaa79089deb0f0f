package pymeta

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/distinfo"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// corpusDistInfo is every file whose path ends in suffix of the shared
// corpus' dist-info folders of a real torch environment, by path.
func corpusDistInfo(t *testing.T, suffix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range distinfo.Read(t, filepath.Join(lddtest.SharedDir(t), "corpus/torch/torch-2.11.0-cu130-x86_64-distinfo.tgz")) {
		for name, data := range f.Files {
			if p := f.Dir + "/" + name; strings.HasSuffix(p, suffix) {
				out[p] = data
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("%d %s files in the corpus", len(out), suffix)
	}
	return out
}

// Markers shared across an environment's METADATA parse as they do alone,
// read side by side, and one text gives one Marker.
func TestSharedMarkersParseAsAlone(t *testing.T) {
	var metas [][]byte
	for _, b := range corpusDistInfo(t, ".dist-info/METADATA") {
		metas = append(metas, b)
	}
	var shared SharedMarkers
	got := make([]*Metadata, len(metas))
	var wg sync.WaitGroup
	for i, b := range metas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := ParseMetadataSharing(bytes.NewReader(b), &shared)
			if err != nil {
				t.Error(err)
			}
			got[i] = m
		}()
	}
	wg.Wait()
	envs := []Environment{
		{"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "python_version": "3.12", "python_full_version": "3.12.3"},
		{"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "aarch64", "python_version": "3.10", "python_full_version": "3.10.12", "extra": "cublas"},
	}
	byText := map[string]*Marker{}
	markers := 0
	for i, b := range metas {
		alone, err := ParseMetadata(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if len(alone.RequiresDist) != len(got[i].RequiresDist) {
			t.Fatalf("%s: %d requirements shared, %d alone", alone.Name, len(got[i].RequiresDist), len(alone.RequiresDist))
		}
		for j, r := range alone.RequiresDist {
			s := got[i].RequiresDist[j]
			if r.String() != s.String() {
				t.Errorf("%s: %q shared, %q alone", alone.Name, s, r)
			}
			if r.Marker == nil {
				continue
			}
			markers++
			for _, env := range envs {
				a, aerr := r.Marker.Evaluate(env)
				b, berr := s.Marker.Evaluate(env)
				if a != b || (aerr == nil) != (berr == nil) {
					t.Errorf("%s: %q evaluates %v (%v) shared, %v (%v) alone", alone.Name, r.Marker, b, berr, a, aerr)
				}
			}
			if m, ok := byText[s.Marker.String()]; ok && m != s.Marker {
				t.Errorf("%q parsed twice", s.Marker)
			}
			byText[s.Marker.String()] = s.Marker
		}
	}
	if len(byText) >= markers {
		t.Fatalf("%d markers, %d distinct: nothing shared", markers, len(byText))
	}
	t.Logf("%d markers in %d METADATA, %d parsed", markers, len(metas), len(byText))
}
