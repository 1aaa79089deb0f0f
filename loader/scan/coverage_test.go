package scan

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/runtimeopen"
)

// TestLoadedFiles: what coverage reads is every object the roots load, once
// each, with the libraries opened at run time (libcudart opens libcuda),
// under the names they answer to.
func TestLoadedFiles(t *testing.T) {
	dir := t.TempDir()
	drv := filepath.Join(dir, "driver")
	for p, s := range map[string]elfwrite.Spec{
		"app/libapp.so":       {Soname: "libapp.so", Needed: []string{"libcudart.so.13"}, RunPath: elfwrite.Str("$ORIGIN")},
		"app/libtool.so":      {Soname: "libtool.so", Needed: []string{"libcudart.so.13"}, RunPath: elfwrite.Str("$ORIGIN")},
		"app/libcudart.so.13": {Soname: "libcudart.so.13"},
	} {
		if err := elfwrite.Write(filepath.Join(dir, p), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := elfwrite.Write(filepath.Join(drv, "libcuda.so.1"), elfwrite.Spec{Soname: "libcuda.so.1"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := ldso.New(ctx, ldso.Options{LDLibraryPath: &drv, NoPreloadFile: true, PreloadSet: true})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := runtimeopen.Load()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, l, []string{filepath.Join(dir, "app")}, Options{RuntimeOpens: runtimeopen.NewResolver(tab, l)})
	if err != nil {
		t.Fatal(err)
	}
	files := rep.LoadedFiles()
	byPath := map[string][]string{}
	for _, f := range files {
		if _, dup := byPath[f.Path]; dup {
			t.Errorf("%s listed twice", f.Path)
		}
		if f.Host != f.Path {
			t.Errorf("%s read from %s", f.Path, f.Host)
		}
		byPath[f.Path] = f.Names
	}
	for _, want := range []string{"app/libapp.so", "app/libtool.so", "app/libcudart.so.13", "driver/libcuda.so.1"} {
		names, ok := byPath[filepath.Join(dir, want)]
		if !ok {
			t.Errorf("%s not listed: %v", want, byPath)
		}
		if want == "app/libcudart.so.13" && !slices.Contains(names, "libcudart.so.13") {
			t.Errorf("libcudart names %v", names)
		}
	}
}
