package gpuarch

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	fb "github.com/cudadeps/cudadeps/internal/testkit/fatbintest"
)

// TestAssess: a set of libraries judged for an H100, each read once
// whatever names it is listed under, with the JSON the docs describe.
func TestAssess(t *testing.T) {
	dir := t.TempDir()
	lib := func(name string, cs ...fb.Container) string {
		p := filepath.Join(dir, name)
		if err := fb.Library(p, name, cs...); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sm80 := lib("libsm80.so", fb.SASS(80))
	ptx := lib("libptx.so", fb.Container{Entries: []fb.Entry{{Kind: fb.ELF, Arch: 80}, {Kind: fb.PTX, Arch: 80, LZ: true, UncompressedSize: 3000}}})
	sm90 := lib("libsm90.so", fb.SASS(80, 90))
	cufft := lib("libcufft.so.12", fb.SASS(75))
	plain := lib("libplain.so")
	files := []File{{Path: sm80, Host: sm80}, {Path: ptx, Host: ptx}, {Path: sm90, Host: sm90}, {Path: sm90, Host: sm90, Names: []string{"libsm90.so.1"}},
		{Path: cufft, Host: cufft}, {Path: plain, Host: plain}, {Path: "/gone/libx.so", Host: filepath.Join(dir, "gone.so")}}
	dev := &Device{CC: CC{9, 0}, Source: SourceFlag, DriverCUDA: &Version{13, 0}}
	rep, err := Assess(context.Background(), dev, files, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Verdict{}
	for _, o := range rep.Objects {
		if o.Judgement != nil {
			got[filepath.Base(o.Path)] = o.Verdict
		} else {
			got[filepath.Base(o.Path)] = Verdict("error: " + o.Error)
		}
	}
	want := map[string]Verdict{"libsm80.so": None, "libptx.so": JIT, "libsm90.so": Native, "libcufft.so.12": RuntimeCompiled, "libplain.so": NoCode}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	if !strings.HasPrefix(string(got["libx.so"]), "error: ") || len(rep.Objects) != 6 {
		t.Errorf("%v", got)
	}
	s := rep.Summary
	if s.Objects != 6 || s.Native != 1 || s.JIT != 1 || s.None != 1 || s.RuntimeCompiled != 1 || s.NoCode != 1 || s.Unreadable != 1 || s.JITBytes != 3000 || s.Containers != 4 || s.Entries != 6 {
		t.Errorf("%+v", s)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{`"device":{"cc":"9.0","source":"--sm","driver_cuda":"13.0"}`, `"verdict":"jit"`, `"arch":"compute_80","ptx_isa":"9.0","entries":1,"bytes":40,"size":3000`,
		`"builds_at_run_time":"cuFFT builds`, `"by_container":{"total":1,"native":1,"jit":0,"none":0}`} {
		if !strings.Contains(string(b), frag) {
			t.Errorf("JSON lacks %s:\n%s", frag, b)
		}
	}
	// Without a device: what each carries, no verdicts.
	rep, _ = Assess(context.Background(), &Device{}, files[:1], nil, 1)
	if rep.Objects[0].Judgement != nil || len(rep.Objects[0].SASS) != 1 {
		t.Errorf("%+v", rep)
	}
	if b, _ := json.Marshal(rep.Device); string(b) != `{"cc":null,"source":""}` {
		t.Errorf("unknown device: %s", b)
	}
}
