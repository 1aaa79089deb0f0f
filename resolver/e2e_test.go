package resolver

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// The skeleton package: torch-shaped RPATHs into the nvidia wheels' lib
// directories, one of which (cudss) is absent, a library of the catalog
// that needs another archive (cuDSS needs cuBLAS), and a library the package
// loads only at run time, by name.
func writeDist(t *testing.T, site, name, version string, requires []string, files map[string][]byte, modes map[string]fs.FileMode) {
	t.Helper()
	info := filepath.Join(site, fmt.Sprintf("%s-%s.dist-info", strings.ReplaceAll(name, "-", "_"), version))
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files[filepath.Join(filepath.Base(info), "METADATA")] = []byte(meta)
	var record strings.Builder
	var names []string
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		full := filepath.Join(site, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := fs.FileMode(0o644)
		if m, ok := modes[p]; ok {
			mode = m
		}
		if err := os.WriteFile(full, files[p], mode); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(files[p])
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
	}
	fmt.Fprintf(&record, "%s,,\n", filepath.Join(filepath.Base(info), "RECORD"))
	if err := os.WriteFile(filepath.Join(info, "RECORD"), []byte(record.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func elfBytes(t *testing.T, spec elfwrite.Spec) []byte {
	t.Helper()
	b, err := elfwrite.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixture is a Python environment with the skeleton package and a mirror
// with a catalog for what it lacks.
type fixture struct {
	python  string
	site    string
	mirror  *mirrortest.Mirror
	catalog *catalog.Catalog
	prefix  string
	lib     string // the package's library
}

func newFixture(t *testing.T, runtimeLib bool) *fixture {
	t.Helper()
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	venv := filepath.Join(t.TempDir(), "venv")
	out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput()
	lddtest.Need(t, err == nil, "python3 -m venv failed: %s", out)
	f := &fixture{python: filepath.Join(venv, "bin", "python3")}
	env, err := pyenv.Discover(context.Background(), f.python)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range env.SiteDirs {
		if strings.HasPrefix(d, venv) {
			f.site = d
		}
	}
	if f.site == "" {
		t.Fatalf("no site-packages inside the venv: %v", env.SiteDirs)
	}
	init := "import ctypes, os\n" +
		"_d = os.path.dirname(__file__)\n" +
		"ctypes.CDLL(os.path.join(_d, 'lib', 'libgpupkg.so'))\n"
	if runtimeLib {
		init += "ctypes.CDLL('libcufft.so.12')\n"
	}
	writeDist(t, f.site, "gpupkg", "1.0", []string{"nvidia-cuda-runtime==13.0", "nvidia-extra; extra == \"all\""}, map[string][]byte{
		"gpupkg/__init__.py": []byte(init),
		"gpupkg/lib/libgpupkg.so": elfBytes(t, elfwrite.Spec{Soname: "libgpupkg.so", Needed: []string{"libcudart.so.13", "libcudss.so.0", "libc.so.6"},
			RPath: elfwrite.Str("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../../nvidia/cudss/lib:$ORIGIN")}),
	}, map[string]fs.FileMode{"gpupkg/lib/libgpupkg.so": 0o755})
	writeDist(t, f.site, "nvidia-cuda-runtime", "13.0", nil, map[string][]byte{
		"nvidia/cu13/lib/libcudart.so.13": elfBytes(t, elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}),
	}, map[string]fs.FileMode{"nvidia/cu13/lib/libcudart.so.13": 0o755})
	f.lib = filepath.Join(f.site, "gpupkg/lib/libgpupkg.so")

	archives := []mirrortest.Archive{
		{Component: "libcudss", Product: "cudss", Version: "0.9.0.1", Platform: "linux-x86_64", Variant: "cuda13",
			Libs: map[string]elfwrite.Spec{
				"libcudss.so.0.9.0":                {Soname: "libcudss.so.0", Needed: []string{"libcublas.so.13", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")},
				"libcudss_commlayer_nccl.so.0.9.0": {Soname: "libcudss_commlayer_nccl.so.0", Needed: []string{"libnccl.so.2"}},
				"libcudss_mtlayer_gomp.so.0.9.0":   {Soname: "libcudss_mtlayer_gomp.so.0", Needed: []string{"libcudss.so.0"}, RunPath: elfwrite.Str("$ORIGIN")},
			},
			Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.0", "libcudss.so": "libcudss.so.0",
				"libcudss_commlayer_nccl.so.0": "libcudss_commlayer_nccl.so.0.9.0", "libcudss_mtlayer_gomp.so.0": "libcudss_mtlayer_gomp.so.0.9.0"},
		},
		{Component: "libcublas", Product: "cuda", Version: "13.9.9.9", Platform: "linux-x86_64", Variant: "cuda13",
			Libs: map[string]elfwrite.Spec{
				"libcublas.so.13.0.1":   {Soname: "libcublas.so.13", Needed: []string{"libcublasLt.so.13", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")},
				"libcublasLt.so.13.0.1": {Soname: "libcublasLt.so.13", Needed: []string{"libc.so.6"}},
			},
			Links: map[string]string{"libcublas.so.13": "libcublas.so.13.0.1", "libcublasLt.so.13": "libcublasLt.so.13.0.1"},
		},
		{Component: "libcufft", Product: "cuda", Version: "12.9.9.9", Platform: "linux-x86_64", Variant: "cuda13",
			Libs:  map[string]elfwrite.Spec{"libcufft.so.12.0.0": {Soname: "libcufft.so.12", Needed: []string{"libc.so.6"}}},
			Links: map[string]string{"libcufft.so.12": "libcufft.so.12.0.0"},
		},
	}
	for i := range archives {
		archives[i].Machine = elf.EM_X86_64
	}
	f.mirror, f.catalog = serveCatalog(t, archives)
	f.prefix = filepath.Join(t.TempDir(), "prefix")
	return f
}

// openPrefix opens a prefix for a test.
func openPrefix(t *testing.T, dir string) *activation.Prefix {
	t.Helper()
	return openPrefixIn(t, dir, "")
}

// openPrefixIn opens the prefix dir for the system under root ("" for the
// one inside root, ROOT/opt/cudadeps).
func openPrefixIn(t *testing.T, dir, root string) *activation.Prefix {
	t.Helper()
	p, err := activation.OpenIn(dir, root)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// undo recovers what interrupted runs left under the prefix dir, then
// undoes targets, as the undo command does.
func undo(t *testing.T, ctx context.Context, dir string, targets ...string) ([]activation.UndoReport, error) {
	t.Helper()
	p := openPrefix(t, dir)
	recovered, err := p.Recover(ctx)
	if err != nil {
		return nil, err
	}
	return p.Undo(ctx, targets, recovered)
}

func (f *fixture) options(t *testing.T, dryRun bool) Options {
	t.Helper()
	client, err := fetch.NewClient(fetch.Options{CacheDir: filepath.Join(f.prefix, "..", "cache")})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	return Options{
		Loader:  ldso.Options{LDLibraryPath: &empty, PreloadSet: true},
		Catalog: f.catalog, Prefix: openPrefix(t, f.prefix), Client: client,
		DryRun: dryRun, Verify: true,
	}
}

// snapshot describes a tree: every path with its type, mode, size, content
// hash or link target.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%s %v", rel, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case info.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			sum := sha256.Sum256(data)
			line += " " + hex.EncodeToString(sum[:8])
		}
		lines = append(lines, line)
		return nil
	})
	return strings.Join(lines, "\n")
}

// realLoaderFinds runs the host's loader on file with an empty environment.
func realLoaderFinds(t *testing.T, file string) *lddtest.Output {
	t.Helper()
	ld, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so")
	out, err := lddtest.List(context.Background(), ld, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestResolveEndToEnd(t *testing.T) {
	f := newFixture(t, true)
	ctx := context.Background()
	target, err := FindTarget(ctx, "gpupkg", TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	if target.Kind != KindPython || len(target.Requires) != 1 || target.Module != "gpupkg" {
		t.Fatalf("target = %+v (requires %d)", target, len(target.Requires))
	}
	before := snapshot(t, f.site)

	// A dry run plans and changes nothing, neither the tree nor the prefix.
	dry, err := Resolve(ctx, target, f.options(t, true))
	if err != nil {
		t.Fatal(err)
	}
	if dry.OK || len(dry.Rounds) != 1 || dry.Rounds[0].Plan == nil || len(dry.Rounds[0].Plan.Steps) != 1 || dry.Rounds[0].Plan.Steps[0].Component != "libcudss" {
		t.Fatalf("dry run plan = %+v", dry.Rounds)
	}
	if got := dry.Rounds[0].Decisions[0].Placements; len(got) != 1 || got[0].HostDir != physical(f.site)+"/nvidia/cudss/lib" || !got[0].Create {
		t.Fatalf("dry run placement = %+v, want the package's own nvidia/cudss/lib RPATH entry, to be created", got)
	}
	if after := snapshot(t, f.site); after != before {
		t.Fatalf("the dry run changed the tree")
	}
	if _, err := os.Stat(f.prefix); err == nil {
		t.Fatalf("the dry run created the prefix %s", f.prefix)
	}
	if f.mirror.Total() != 0 {
		t.Fatalf("the dry run downloaded something")
	}

	// The real resolve.
	out, err := Resolve(ctx, target, f.options(t, false))
	if err != nil {
		t.Fatal(err)
	}
	if !out.OK {
		t.Fatalf("resolve did not succeed: stopped %q, unresolved %+v, verify %+v", out.Stopped, out.Unresolved, out.Verify)
	}
	var comps []string
	verifiedBefore := map[string]bool{}
	sawVerify := false
	for _, r := range out.Rounds {
		for _, k := range r.Installed {
			comps = append(comps, fmt.Sprintf("%d:%s", r.N, k.Component))
			verifiedBefore[k.Component] = sawVerify
		}
		sawVerify = sawVerify || r.Verify != nil
	}
	// cuDSS first; cuBLAS, which cuDSS needs, on the next round; cuFFT,
	// which only the import asks for, after an import check.
	if len(comps) != 3 || comps[0] != "1:libcudss" || comps[1] != "2:libcublas" || !strings.HasSuffix(comps[2], ":libcufft") || !verifiedBefore["libcufft"] {
		t.Errorf("installed in rounds %v", comps)
	}
	if out.Verify == nil || !out.Verify.OK {
		t.Fatalf("import check: %+v", out.Verify)
	}
	// The library loaded by name at run time cannot be placed where a plain
	// dlopen looks: it goes through the activation script.
	if out.Activation.Script == "" {
		t.Errorf("no activation script for the run-time library")
	}

	// The real loader, with no environment at all, finds everything the
	// package's library needs.
	res := realLoaderFinds(t, f.lib)
	for _, l := range res.Lines {
		if l.NotFound {
			t.Errorf("after resolve, ld.so still does not find %s", l.Name)
		}
	}
	if len(res.Lines) < 5 {
		t.Errorf("ld.so listed only %v", res.Lines)
	}

	// A second run is a no-op that downloads nothing.
	hits := f.mirror.Total()
	again, err := Resolve(ctx, target, f.options(t, false))
	if err != nil {
		t.Fatal(err)
	}
	if !again.OK || len(again.Rounds) != 1 || len(again.Rounds[0].Installed) != 0 || f.mirror.Total() != hits {
		t.Fatalf("second run: ok=%v rounds=%d downloads=%d", again.OK, len(again.Rounds), f.mirror.Total()-hits)
	}

	// undo restores the tree exactly and empties the prefix of what it added.
	reps, err := undo(t, ctx, f.prefix, "gpupkg")
	if err != nil {
		t.Fatal(err)
	}
	store := openPrefix(t, f.prefix).Store()
	if len(reps) != 1 || len(reps[0].Left) != 0 {
		t.Fatalf("undo = %+v", reps)
	}
	if after := snapshot(t, f.site); after != before {
		t.Fatalf("undo did not restore the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if entries, _ := store.List(); len(entries) != 0 {
		t.Errorf("store still holds %d entries after undo", len(entries))
	}
	if _, err := os.Stat(openPrefix(t, f.prefix).EnvScript()); err == nil {
		t.Errorf("env.sh survived undo")
	}
}

// TestResolveLeavesOthersFilesAlone checks that a file in the way is kept,
// and that undo never removes a file it did not place or that changed.
func TestResolveLeavesOthersFilesAlone(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	target, err := FindTarget(ctx, "gpupkg", TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	out, err := Resolve(ctx, target, f.options(t, false))
	if err != nil || !out.OK {
		t.Fatalf("resolve: %v %+v", err, out)
	}
	// The user replaces one of the placed links with a file of their own.
	var placed string
	for _, r := range out.Rounds {
		for _, p := range r.Placed {
			if p.Soname == "libcudss.so.0" {
				placed = p.Path
			}
		}
	}
	if placed == "" {
		t.Fatal("libcudss.so.0 was not placed")
	}
	if err := os.Remove(placed); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(placed, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	reps, err := undo(t, ctx, f.prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || len(reps[0].Left) != 1 || reps[0].Left[0] != placed {
		t.Fatalf("undo = %+v, want the changed file left", reps)
	}
	if data, _ := os.ReadFile(placed); string(data) != "mine" {
		t.Fatalf("undo touched the user's file")
	}
}

// serveCatalog serves archives from 127.0.0.1 in NVIDIA's layout and loads
// the built-in catalog with the mirror's layer over it, downloads going to
// the mirror.
func serveCatalog(t *testing.T, archives []mirrortest.Archive) (*mirrortest.Mirror, *catalog.Catalog) {
	t.Helper()
	m := mirrortest.Serve(t, archives)
	cat, err := catalog.Load(context.Background(), catalog.LoadOptions{Extra: []string{m.Catalog}, Mirror: m.URL})
	if err != nil {
		t.Fatal(err)
	}
	return m, cat
}

// TestCheckMissingFilesOfExtrasOnly: app requires helper, and names
// tables under its [tutorials] extra, which counts because that
// distribution is installed. Files missing from helper (and from app) are
// app's problem, each said once with the file; files missing from the
// extra's distribution are its own (check exited 3 for triton on the GPU
// machine because pandas lacked two files, and named scikit-image twice).
func TestCheckMissingFilesOfExtrasOnly(t *testing.T) {
	python, site := venvSite(t)
	writeDist(t, site, "helper", "1.0", nil, map[string][]byte{"helper/__init__.py": []byte("x = 1\n"), "helper/data.txt": []byte("d")}, nil)
	writeDist(t, site, "tables", "2.0", nil, map[string][]byte{"tables/__init__.py": []byte("y = 2\n"), "tables/data.txt": []byte("d")}, nil)
	// Its [tutorials] extra names tables, and app itself (as
	// scikit-image[data] does).
	writeDist(t, site, "app", "0.1", []string{"helper", `tables; extra == "tutorials"`, `app[data]; extra == "tutorials"` + "\nProvides-Extra: tutorials\nProvides-Extra: data"},
		map[string][]byte{"app/__init__.py": nil, "app/data.txt": []byte("d"), "app/lib/libapp.so": elfBytes(t, elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libc.so.6"}})}, nil)
	for _, p := range []string{"helper/data.txt", "tables/data.txt", "app/data.txt"} {
		if err := os.Remove(filepath.Join(site, p)); err != nil {
			t.Fatal(err)
		}
	}
	base, err := catalog.Load(context.Background(), catalog.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := FindTarget(context.Background(), "app", TargetOptions{Python: python})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	a, err := Analyze(context.Background(), tg, Options{Loader: ldso.Options{LDLibraryPath: &empty, PreloadSet: true}, Catalog: base})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(a.Outcome.Incomplete, func(l string) bool { return strings.HasPrefix(l, "tables ") }) {
		t.Fatalf("the extra's distribution is not in the closure: %q", a.Outcome.Incomplete)
	}
	var subjects []string
	for _, p := range a.Problems() {
		if p.Kind == ProblemFiles {
			subjects = append(subjects, p.Subject)
			if !strings.HasSuffix(p.Detail, "missing (data.txt)") {
				t.Errorf("the problem does not name the file: %+v", p)
			}
		}
	}
	slices.Sort(subjects)
	if !slices.Equal(subjects, []string{"app", "helper"}) {
		t.Errorf("missing_files problems for %q, want app and helper, once each", subjects)
	}
}
