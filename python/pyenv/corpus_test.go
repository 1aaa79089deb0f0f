package pyenv

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/distinfo"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// untarCorpus unpacks the real dist-info folders of a torch 2.11.0+cu130
// environment into a fresh site directory.
func untarCorpus(t testing.TB) string {
	t.Helper()
	site := t.TempDir()
	distinfo.Unpack(t, filepath.Join(lddtest.SharedDir(t), "corpus", "torch", "torch-2.11.0-cu130-x86_64-distinfo.tgz"), site)
	return site
}

var linuxX86Py312 = Markers{
	"implementation_name": "cpython", "implementation_version": "3.12.3", "os_name": "posix",
	"platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "6.8.0",
	"platform_system": "Linux", "platform_version": "#1 SMP", "python_full_version": "3.12.3",
	"python_version": "3.12", "sys_platform": "linux",
}

// distInfoDir finds the dist-info folder of a project by its file name.
func distInfoDir(t *testing.T, site, prefix string) (dir, version string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(site, prefix+"-*.dist-info"))
	if len(m) != 1 {
		t.Fatalf("%s: %d dist-info folders", prefix, len(m))
	}
	base := strings.TrimSuffix(filepath.Base(m[0]), ".dist-info")
	return m[0], base[len(prefix)+1:]
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}

// TestCorpusTorchPins reads the pins out of the METADATA text with plain
// pattern matching and checks that the resolution of torch finds each,
// through cuda-toolkit's extras, satisfied by what is installed.
func TestCorpusTorchPins(t *testing.T) {
	site := untarCorpus(t)
	env := &Env{SiteDirs: []string{site}, Markers: linuxX86Py312}
	res, err := env.Resolve("torch")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) > 0 {
		t.Fatalf("unreadable dist-info: %v", res.Problems)
	}
	torchDir, _ := distInfoDir(t, site, "torch")
	pinRE := regexp.MustCompile(`^Requires-Dist: ([A-Za-z0-9._-]+)(?:\[([^\]]*)\])?==([0-9.]+); platform_system == "Linux"$`)
	want := map[string]string{} // name -> ==version
	var toolkitExtras []string
	for _, line := range readLines(t, filepath.Join(torchDir, "METADATA")) {
		m := pinRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[1] == "cuda-toolkit" {
			toolkitExtras = strings.Split(m[2], ",")
		}
		want[m[1]] = "==" + m[3]
	}
	if want["nvidia-cudnn-cu13"] != "==9.19.0.56" || len(toolkitExtras) < 5 {
		t.Fatalf("the corpus METADATA changed: pins %v, extras %v", want, toolkitExtras)
	}
	// cuda-toolkit's own METADATA pins one distribution per extra.
	tkDir, _ := distInfoDir(t, site, "cuda_toolkit")
	extraRE := regexp.MustCompile(`^Requires-Dist: ([A-Za-z0-9._-]+)(==[0-9.]+\.\*); \(([^)]*)\) and extra == '([a-z0-9-]+)'$`)
	viaExtra := map[string]string{} // name -> extra
	for _, line := range readLines(t, filepath.Join(tkDir, "METADATA")) {
		m := extraRE.FindStringSubmatch(line)
		if m == nil || !slices.Contains(toolkitExtras, m[4]) || !strings.Contains(m[3], "sys_platform == 'linux'") {
			continue
		}
		want[m[1]] = m[2]
		viaExtra[m[1]] = m[4]
	}
	if len(viaExtra) != len(toolkitExtras) {
		t.Fatalf("extras %v give %v", toolkitExtras, viaExtra)
	}
	for name, spec := range want {
		dep := res.Find(name)
		if dep == nil {
			t.Errorf("%s (%s) is not among torch's requirements", name, spec)
			continue
		}
		if !slices.Contains(dep.Pins(), spec) {
			t.Errorf("%s: pins %v, want %s", name, dep.Pins(), spec)
		}
		if x, ok := viaExtra[name]; ok && !hasEdge(dep.RequiredBy, "cuda-toolkit", x) {
			t.Errorf("%s: not required by cuda-toolkit[%s]: %+v", name, x, dep.RequiredBy)
		}
		// The installed version, from the dist-info folder name.
		prefix := strings.ReplaceAll(name, "-", "_")
		if _, v := distInfoDir(t, site, prefix); dep.Version() != v {
			t.Errorf("%s: installed %q, the folder says %q", name, dep.Version(), v)
		}
		if !dep.Satisfied {
			t.Errorf("%s does not satisfy %s: %s", name, spec, dep)
		}
	}
	cudnn := res.Find("nvidia_cudnn_cu13")
	if cudnn == nil || len(cudnn.RequiredBy) == 0 || strings.Join(cudnn.RequiredBy[0].Chain, ">") != "torch" {
		t.Fatalf("cudnn: %+v", cudnn)
	}
	// Extras nobody asked for bring nothing in.
	for _, name := range []string{"nvidia-npp", "nvidia-cuda-nvcc", "optree", "pyyaml"} {
		if d := res.Find(name); d != nil {
			t.Errorf("%s required: %s", name, d)
		}
	}
	// On macOS the Linux-only pins do not apply.
	mac := Markers{}
	for k, v := range linuxX86Py312 {
		mac[k] = v
	}
	mac["platform_system"], mac["sys_platform"] = "Darwin", "darwin"
	macRes, err := (&Env{SiteDirs: []string{site}, Markers: mac}).Resolve("torch")
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		if d := macRes.Find(name); d != nil {
			t.Errorf("on Darwin, %s is required: %s", name, d)
		}
	}
}

func hasEdge(edges []pymeta.Edge, by, extra string) bool {
	for _, e := range edges {
		if e.By == by && e.Extra == extra {
			return true
		}
	}
	return false
}

// recordLines reads a RECORD's paths and sizes with plain string
// splitting (the corpus has no quoted paths).
func recordLines(t *testing.T, infoDir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, line := range readLines(t, filepath.Join(infoDir, "RECORD")) {
		f := strings.Split(line, ",")
		if len(f) != 3 || f[0] == "" {
			continue
		}
		size := int64(-1)
		if f[2] != "" {
			n, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", infoDir, line)
			}
			size = n
		}
		out[f[0]] = size
	}
	return out
}

// corpusInstalled is the corpus' environment (untarCorpus) as a Linux
// x86_64 Python 3.12 sees it, and its distributions.
func corpusInstalled(t *testing.T) (string, *Env, map[string]*Dist) {
	t.Helper()
	site := untarCorpus(t)
	env := &Env{SiteDirs: []string{site}, Markers: linuxX86Py312}
	dists, problems := env.Installed()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	return site, env, dists
}

// distNames are the names of an order's distributions, joined by commas.
func distNames(order []*Dist) string {
	var out []string
	for _, d := range order {
		out = append(out, d.Name)
	}
	return strings.Join(out, ",")
}

// TestCorpusOwners checks that every shared library that an nvidia-*
// distribution's RECORD lists is owned by that distribution.
func TestCorpusOwners(t *testing.T) {
	site, _, dists := corpusInstalled(t)
	owners := NewOwners(dists)
	infos, _ := filepath.Glob(filepath.Join(site, "nvidia_*.dist-info"))
	libs := 0
	for _, info := range infos {
		project, _, _ := strings.Cut(filepath.Base(info), "-")
		for path := range recordLines(t, info) {
			if !strings.Contains(filepath.Base(path), ".so") {
				continue
			}
			libs++
			d := owners.Owner(filepath.Join(site, path))
			if d == nil || pymeta.NormalizeName(d.Name) != pymeta.NormalizeName(project) {
				t.Errorf("%s: owner %v, want %s", path, d, project)
			}
		}
	}
	if libs < 30 {
		t.Fatalf("only %d libraries in the nvidia RECORDs", libs)
	}
	if d := owners.Owner(filepath.Join(site, "nvidia/cudnn/lib/libcudnn.so.9")); d == nil || d.Name != "nvidia-cudnn-cu13" {
		t.Fatalf("libcudnn.so.9 owner: %v", d)
	}
	if d := owners.Owner(filepath.Join(site, "nvidia/cudnn/lib/libnosuch.so")); d != nil {
		t.Fatalf("an unlisted file has an owner: %v", d.Name)
	}
}

// TestCorpusIntegrity builds cuDNN's files from its RECORD (sparse, of the
// recorded sizes), removes some and checks that they are reported by name
// and version.
func TestCorpusIntegrity(t *testing.T) {
	site := untarCorpus(t)
	info, version := distInfoDir(t, site, "nvidia_cudnn_cu13")
	files := recordLines(t, info)
	var libs, others []string
	for path, size := range files {
		if strings.HasSuffix(filepath.Dir(path), ".dist-info") {
			continue // the corpus has the dist-info files themselves
		}
		p := filepath.Join(site, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if size > 0 {
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		if strings.Contains(filepath.Base(path), ".so") {
			libs = append(libs, p)
		} else if size > 1 {
			others = append(others, p)
		}
	}
	env := &Env{SiteDirs: []string{site}, Markers: linuxX86Py312}
	d, err := env.Find("nvidia-cudnn-cu13")
	if err != nil {
		t.Fatal(err)
	}
	ok, err := d.Check(context.Background(), false)
	if err != nil || !ok.OK() {
		t.Fatalf("complete tree: %v %v", ok, err)
	}
	sort.Strings(libs)
	sort.Strings(others)
	if len(libs) < 8 || len(others) == 0 {
		t.Fatalf("%d libraries, %d other files", len(libs), len(others))
	}
	removed := libs[:8]
	for _, p := range removed {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	// One more file of the wrong size.
	resized := others[0]
	if err := os.Truncate(resized, 1); err != nil {
		t.Fatal(err)
	}
	got, err := d.Check(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got.Missing)
	if strings.Join(got.Missing, "\n") != strings.Join(removed, "\n") || len(got.WrongSize) != 1 || got.WrongSize[0] != resized {
		t.Fatalf("missing %v, wrong size %v", got.Missing, got.WrongSize)
	}
	want := fmt.Sprintf("nvidia-cudnn-cu13 %s is installed but 8 of its files are missing (%s, %s and 6 more), 1 has the wrong size (%s)",
		version, filepath.Base(removed[0]), filepath.Base(removed[1]), filepath.Base(resized))
	if got.String() != want {
		t.Fatalf("%q\nwant %q", got.String(), want)
	}
}

// TestIntegrityHashes checks sha256 verification on a distribution whose
// RECORD is written here.
func TestIntegrityHashes(t *testing.T) {
	site := t.TempDir()
	content := []byte("print('hello')\n")
	sum := sha256.Sum256(content)
	rec := fmt.Sprintf("demo/__init__.py,sha256=%s,%d\ndemo-1.0.dist-info/RECORD,,\ndemo/__pycache__/x.cpython-312.pyc,sha256=AAAA,9\n", base64.RawURLEncoding.EncodeToString(sum[:]), len(content))
	writeDistInfo(t, site, "demo", "1.0", "", nil)
	if err := os.WriteFile(filepath.Join(site, "demo-1.0.dist-info", "RECORD"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(site, "demo"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(site, "demo", "__init__.py")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := (&Env{SiteDirs: []string{site}}).Find("demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, verify := range []bool{false, true} {
		if r, err := d.Check(context.Background(), verify); err != nil || !r.OK() || r.Checked != 2 {
			t.Fatalf("verify=%v: %v %v", verify, r, err)
		}
	}
	// Same size, other bytes: only the hash tells.
	if err := os.WriteFile(src, []byte("print('HELLO')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, _ := d.Check(context.Background(), false); !r.OK() {
		t.Fatalf("without hashes: %v", r)
	}
	r, err := d.Check(context.Background(), true)
	if err != nil || len(r.WrongHash) != 1 || r.WrongHash[0] != src {
		t.Fatalf("with hashes: %+v %v", r, err)
	}
	if r.String() != "demo 1.0 is installed but 1 has the wrong sha256 ("+filepath.Base(src)+")" {
		t.Fatalf("%q", r.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Check(ctx, true); err == nil {
		t.Fatal("a cancelled check went on")
	}
}

// Every file of every distribution has an owner, found by the path as
// listed and by its real path when the site directory is reached through a
// link; a file two distributions list belongs to the first by name.
func TestCorpusOwnersThroughLink(t *testing.T) {
	site := untarCorpus(t)
	link := filepath.Join(t.TempDir(), "site-link")
	if err := os.Symlink(site, link); err != nil {
		t.Fatal(err)
	}
	env := &Env{SiteDirs: []string{link}, Markers: linuxX86Py312}
	dists, problems := env.Installed()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	// A file cuDNN lists is listed by cuBLAS too: "nvidia-cublas" comes
	// first by name.
	cudnn, cublas := dists["nvidia-cudnn-cu13"], dists["nvidia-cublas"]
	if cudnn == nil || cublas == nil {
		t.Fatal("no cuDNN or cuBLAS in the corpus")
	}
	// One file of each kind the index keeps apart: a library, another.
	shared := map[string]bool{}
	for _, f := range cudnn.Files {
		if len(shared) < 2 && !shared[f] && (len(shared) == 0) == strings.Contains(filepath.Base(f), ".so") {
			shared[f] = true
		}
	}
	if len(shared) < 2 {
		t.Fatalf("cuDNN lists no library or no other file: %v", shared)
	}
	cublas.Files = slices.Clip(cublas.Files)
	for f := range shared {
		cublas.Files = append(cublas.Files, f)
	}
	owners := NewOwners(dists)
	files := 0
	for _, d := range dists {
		for _, f := range d.Files {
			want := d
			if shared[f] {
				want = cublas
			}
			if got := owners.Owner(f); got != want {
				t.Fatalf("%s: owner %v, want %s", f, got, want.Name)
			}
			rel, ok := strings.CutPrefix(f, link+"/")
			if !ok {
				continue // a console script outside site-packages
			}
			if real := filepath.Join(site, rel); owners.Owner(real) != want {
				t.Fatalf("%s (real path): owner %v, want %s", real, owners.Owner(real), want.Name)
			}
			files++
		}
	}
	if files < 20000 {
		t.Fatalf("only %d files", files)
	}
}

// An environment read with ObjectsOnly has, of every distribution's
// files as the full reading lists them, those that may be objects (every
// library among them) in order, and no RECORD entries.
func TestCorpusObjectsOnly(t *testing.T) {
	site := untarCorpus(t)
	full, problems := (&Env{SiteDirs: []string{site}, Markers: linuxX86Py312}).Installed()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	objects, problems := (&Env{SiteDirs: []string{site}, Markers: linuxX86Py312, ObjectsOnly: true}).Installed()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if len(objects) != len(full) || len(full) < 10 {
		t.Fatalf("%d distributions read for their objects, %d in full", len(objects), len(full))
	}
	files, kept, libs := 0, 0, 0
	for name, d := range full {
		o := objects[name]
		if o == nil || o.Record != nil || o.Version != d.Version {
			t.Fatalf("%s: read for its objects: %+v", name, o)
		}
		want := slices.DeleteFunc(slices.Clone(d.Files), func(f string) bool { return !MayBeObject(f) })
		if !slices.Equal(o.Files, want) {
			t.Fatalf("%s: read for its objects, %d files; %d of the full reading's %d may be objects", name, len(o.Files), len(want), len(d.Files))
		}
		for _, f := range d.Files {
			if strings.Contains(filepath.Base(f), ".so") {
				libs++
				if !slices.Contains(o.Files, f) {
					t.Errorf("%s: library %s left out", name, f)
				}
			}
		}
		files += len(d.Files)
		kept += len(o.Files)
	}
	if files < 20000 || libs < 100 || kept >= files/4 {
		t.Fatalf("%d files, %d libraries, %d kept as objects", files, libs, kept)
	}
}

func TestMayBeObject(t *testing.T) {
	for p, want := range map[string]bool{
		"torch/lib/libtorch_cuda.so": true, "nvidia/cu13/lib/libcublas.so.13": true, "nvidia/cu13/bin/ptxas": true,
		"bin/tool": true, ".hidden": true, "a/b.so.py": false, "torch/__init__.py": false,
		"torch/__pycache__/x.cpython-312.pyc": false, "nvidia/cu13/include/cuda.h": false, "x.dist-info/RECORD": true,
		"x.dist-info/METADATA": true, "cupy/_core/core.pyx": false, "lib/libfoo.so.1.txt": false, "data.bin": true,
	} {
		if got := MayBeObject(p); got != want {
			t.Errorf("MayBeObject(%q) = %v, want %v", p, got, want)
		}
	}
}

// One ImportOrders asked for every distribution of the real torch
// environment at once gives each the order a fresh one gives it alone:
// what it resolves once and shares changes no order.
func TestImportOrdersSharedAsAlone(t *testing.T) {
	_, env, dists := corpusInstalled(t)
	shared, err := env.ImportOrders(dists)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for n, d := range dists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order, err := shared.Of(d)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got[n] = distNames(order)
			mu.Unlock()
		}()
	}
	wg.Wait()
	long := 0
	for n, d := range dists {
		alone, err := env.ImportOrders(dists)
		if err != nil {
			t.Fatal(err)
		}
		order, err := alone.Of(d)
		if err != nil {
			t.Fatal(err)
		}
		if want := distNames(order); got[n] != want {
			t.Errorf("%s: shared %s, alone %s", n, got[n], want)
		}
		if len(order) > 10 {
			long++
		}
	}
	if long == 0 || !strings.Contains(got["torchvision"], "torch") {
		t.Fatalf("no order of the corpus names many distributions (torchvision's: %q)", got["torchvision"])
	}
}
