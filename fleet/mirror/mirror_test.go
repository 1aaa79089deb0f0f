package mirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/plan"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/python/pypi"
	"github.com/cudadeps/cudadeps/resolver"
)

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// TestWriteArchivesAndWheels mirrors one NVIDIA archive and one wheel, then
// reads the result back with the project's own readers: the manifest
// parser, a download through the mirror URL, and the simple-index client.
func TestWriteArchivesAndWheels(t *testing.T) {
	ctx := context.Background()
	nv := mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0": {Soname: "libcudss.so.0"}}}})
	cat, err := catalog.Load(ctx, catalog.LoadOptions{Extra: []string{nv.Catalog}, Mirror: nv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cat.Which("libcudss.so.0", catalog.Query{Platform: "linux-x86_64", CUDAMajor: 13})
	if err != nil || m.Version != "0.9.9.9" {
		t.Fatalf("which: %+v %v", m, err)
	}
	archive := plan.Step{Component: m.Component, Product: m.Product, Version: m.Version, Platform: m.Platform, CUDAVariant: m.CUDAVariant, URL: m.URL, SHA256: m.SHA256, Size: m.Size}

	pkgs := t.TempDir()
	wheelData := bytes.Repeat([]byte("not really a wheel\n"), 100)
	wheelName := "nvidia_cudss_cu13-0.9.9.9-py3-none-manylinux_2_27_x86_64.whl"
	if err := os.WriteFile(filepath.Join(pkgs, wheelName), wheelData, 0o644); err != nil {
		t.Fatal(err)
	}
	indexSrv := mirrortest.ServeDir(t, pkgs)
	index := indexSrv.URL
	wheel := plan.Step{Source: resolver.SourcePyPI, Project: "nvidia_cudss.CU13", Filename: wheelName, Version: "0.9.9.9", URL: index + wheelName, SHA256: sum(wheelData), Size: int64(len(wheelData))}

	client, err := fetch.NewClient(fetch.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mirror")
	res, err := Write(ctx, []plan.Step{archive, wheel}, Options{Dir: dir, Catalog: cat, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Archives) != 1 || len(res.Wheels) != 1 || res.Bytes != archive.Size+wheel.Size || res.Archives[0].Present {
		t.Fatalf("result: %+v", res)
	}
	rel := res.Archives[0].Path
	if !strings.HasSuffix(m.URL, "/"+rel) || rel != strings.TrimPrefix(m.URL, nv.URL) {
		t.Fatalf("archive at %s, want the catalog's relative path of %s", rel, m.URL)
	}
	data, err := os.ReadFile(filepath.Join(dir, "cudss/redist/redistrib_0.9.9.9.json"))
	if err != nil {
		t.Fatal(err)
	}
	man, err := catalog.ParseManifest(data, "redistrib_0.9.9.9.json")
	if err != nil || man.Product != "cudss" || len(man.Components) != 1 || len(man.Components[0].Archives) != 1 {
		t.Fatalf("manifest: %+v %v\n%s", man, err, data)
	}
	if a := man.Components[0].Archives[0]; a.RelativePath != rel || a.SHA256 != m.SHA256 || a.Size != m.Size || a.CUDAVariant != "cuda13" || man.Components[0].Version != "0.9.9.9" {
		t.Fatalf("manifest archive: %+v", a)
	}

	// Served, the mirror answers what --mirror and --index-url ask.
	served := mirrortest.ServeDir(t, dir)
	url := served.URL
	viaMirror, err := catalog.Load(ctx, catalog.LoadOptions{Extra: []string{nv.Catalog}, Mirror: url})
	if err != nil {
		t.Fatal(err)
	}
	mm, err := viaMirror.Which("libcudss.so.0", catalog.Query{Platform: "linux-x86_64", CUDAMajor: 13})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := fetch.NewClient(fetch.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	before := nv.Total()
	if _, err := fresh.Download(ctx, fetch.Request{URL: mm.URL, SHA256: mm.SHA256, Size: mm.Size}); err != nil || served.Total() == 0 || nv.Total() != before {
		t.Fatalf("download through the mirror: %v (%d requests to it)", err, served.Total())
	}
	pc, err := pypi.NewClient(pypi.Options{Indexes: []string{url + "simple/"}})
	if err != nil {
		t.Fatal(err)
	}
	files, err := pc.Files(ctx, "nvidia-cudss-cu13")
	if err != nil || len(files) != 1 || files[0].Filename != wheelName || files[0].SHA256 != wheel.SHA256 {
		t.Fatalf("simple index: %+v %v", files, err)
	}
	if _, err := fresh.Download(ctx, fetch.Request{URL: files[0].URL, SHA256: files[0].SHA256, Size: wheel.Size}); err != nil {
		t.Fatalf("the wheel through the index: %v", err)
	}

	// Again: everything is there and verified, nothing is fetched.
	nvBefore, ixBefore := nv.Total(), indexSrv.Total()
	again, err := Write(ctx, []plan.Step{archive, wheel}, Options{Dir: dir, Catalog: cat, Client: client})
	if err != nil || !again.Archives[0].Present || !again.Wheels[0].Present || again.Bytes != 0 || nv.Total() != nvBefore || indexSrv.Total() != ixBefore {
		t.Fatalf("second run: %+v %v", again, err)
	}
	// A damaged file is replaced (from the download cache here).
	if err := os.WriteFile(filepath.Join(dir, rel), bytes.Repeat([]byte{0}, int(m.Size)), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err = Write(ctx, []plan.Step{archive}, Options{Dir: dir, Catalog: cat, Client: client})
	if err != nil || again.Archives[0].Present {
		t.Fatalf("damaged archive: %+v %v", again, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, rel)); sum(got) != m.SHA256 {
		t.Fatal("the damaged archive was not replaced")
	}
	// The wheel index still lists the wheel a run without it did not touch.
	if files, err := pc.Files(ctx, "nvidia-cudss-cu13"); err != nil || len(files) != 1 {
		t.Fatalf("simple index after another run: %+v %v", files, err)
	}

	// A plan from another catalog is refused with the reason.
	other := archive
	other.SHA256 = strings.Repeat("0", 64)
	if _, err := Write(ctx, []plan.Step{other}, Options{Dir: dir, Catalog: cat, Client: client}); err == nil || !strings.Contains(err.Error(), "the plan's sha256 is 000") {
		t.Fatalf("another sha256: %v", err)
	}
	unknown := archive
	unknown.Component = "libnosuch"
	if _, err := Write(ctx, []plan.Step{unknown}, Options{Dir: dir, Catalog: cat, Client: client}); err == nil || !strings.Contains(err.Error(), "no catalog here lists this archive") {
		t.Fatalf("unknown archive: %v", err)
	}
}

// TestSources: a mirror in force that lacks an archive gives way to the
// plan's URL; a plan that points into the mirror being filled is refused
// with the way out.
func TestSources(t *testing.T) {
	ctx := context.Background()
	nv := mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0": {Soname: "libcudss.so.0"}}}})
	plain, err := catalog.Load(ctx, catalog.LoadOptions{Extra: []string{nv.Catalog}, Mirror: nv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m, err := plain.Which("libcudss.so.0", catalog.Query{Platform: "linux-x86_64", CUDAMajor: 13})
	if err != nil {
		t.Fatal(err)
	}
	step := plan.Step{Component: m.Component, Version: m.Version, Platform: m.Platform, CUDAVariant: m.CUDAVariant, URL: m.URL, SHA256: m.SHA256, Size: m.Size}
	emptySrv := mirrortest.ServeDir(t, t.TempDir())
	empty := emptySrv.URL
	viaEmpty, err := catalog.Load(ctx, catalog.LoadOptions{Extra: []string{nv.Catalog}, Mirror: empty})
	if err != nil {
		t.Fatal(err)
	}
	client, err := fetch.NewClient(fetch.Options{CacheDir: t.TempDir(), Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	res, err := Write(ctx, []plan.Step{step}, Options{Dir: dir, Catalog: viaEmpty, Client: client})
	if err != nil || res.Archives[0].From != m.URL || emptySrv.Total() == 0 {
		t.Fatalf("fallback to the plan's URL: %+v %v (%d requests to the empty mirror)", res, err, emptySrv.Total())
	}
	self := step
	self.URL = "file://" + filepath.Join(dir, "other", filepath.FromSlash(res.Archives[0].Path))
	selfCat, err := catalog.Load(ctx, catalog.LoadOptions{Extra: []string{nv.Catalog}, Mirror: "file://" + filepath.Join(dir, "other") + "/"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Write(ctx, []plan.Step{self}, Options{Dir: filepath.Join(dir, "other"), Catalog: selfCat, Client: client})
	if err == nil || !strings.Contains(err.Error(), "only source is the mirror being filled") {
		t.Fatalf("a plan into the mirror itself: %v", err)
	}
}
