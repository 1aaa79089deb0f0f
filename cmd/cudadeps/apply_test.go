package main

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
)

// nvidiaStandIn serves two archives from 127.0.0.1, standing in for
// NVIDIA: cuDSS and cuTENSOR for CUDA 13.
func nvidiaStandIn(t *testing.T) *mirrortest.Mirror {
	return mirrortest.Serve(t, []mirrortest.Archive{
		{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
			Libs:  map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}},
			Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}},
		{Component: "libcutensor", Product: "cutensor", Version: "9.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
			Libs:  map[string]elfwrite.Spec{"libcutensor.so.9.9.9": {Soname: "libcutensor.so.2", Needed: []string{"libc.so.6"}}},
			Links: map[string]string{"libcutensor.so.2": "libcutensor.so.9.9.9"}},
	})
}

// appTree writes one node's copy of an application whose library needs
// both, beside the libcudart it ships.
func appTree(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libapp.so"), elfwrite.Spec{Soname: "libapp.so",
		Needed: []string{"libcudss.so.0", "libcutensor.so.2", "libcudart.so.13", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libcudart.so.13"), elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// nodeEnv is one machine's environment: its own cache, data and config
// directories, and the site's catalog from CUDADEPS_CATALOG.
func nodeEnv(t testing.TB, extra ...string) []string {
	env := append(userEnv(t), "XDG_CONFIG_HOME="+t.TempDir(), "XDG_CONFIG_DIRS="+t.TempDir())
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CUDADEPS_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// tree lists what is under dir, for comparing two machines: each file's
// sha256, each link's target with the machine's own directories replaced
// by names (links are compared by where they lead, relative or not). Resolve's records and the store's entry records, which hold
// times and the machine's paths, are left out.
func tree(t *testing.T, dir string, names map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case strings.HasSuffix(p, ".json") || d.Name() == "env.sh" || strings.HasSuffix(d.Name(), ".lock"):
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(p), target)
			}
			target = strings.Replace(target, dir, "DIR", 1)
			for from, to := range names {
				target = strings.ReplaceAll(target, from, to)
			}
			out[rel] = "-> " + target
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			out[rel] = hex.EncodeToString(sum[:])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, a, b map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range a {
		if b[k] != v {
			diffs = append(diffs, k+": "+v+" / "+b[k])
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, k+": (none) / "+v)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("%s differ between the nodes:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// TestMirrorThenApplyOnAnotherNode is the cluster story: node 1 plans
// against NVIDIA (a stand-in on 127.0.0.1), mirror fills a directory from
// the plan, and node 2, with its own prefix and cache, applies the plan
// from that directory served over HTTP, and node 3 from it as file://,
// without a request to NVIDIA; all end with the same files.
func TestMirrorThenApplyOnAnotherNode(t *testing.T) {
	nv := nvidiaStandIn(t)
	work := t.TempDir()
	node1, node2, node3 := appTree(t), appTree(t), appTree(t)
	p1, p2, p3 := filepath.Join(work, "p1"), filepath.Join(work, "p2"), filepath.Join(work, "p3")
	env1 := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog)

	r := runBinary(t, env1, "", "resolve", node1, "--dry-run", "--json", "--mirror", nv.URL, "--prefix", p1, "--ld-library-path", "")
	if r.code != exitMissing {
		t.Fatalf("node 1 dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	planFile := filepath.Join(work, "plan.json")
	if err := os.WriteFile(planFile, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Host struct{ Machine, Glibc string } `json:"host"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Host.Machine == "" {
		t.Fatalf("the plan names no host: %v\n%s", err, r.stdout)
	}

	mdir := filepath.Join(work, "mirror")
	r = runBinary(t, env1, "", "mirror", mdir, "--plan", planFile, "--json", "--quiet")
	if r.code != exitOK {
		t.Fatalf("mirror: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var mres struct {
		Schema   string `json:"schema"`
		Archives []struct {
			Path string `json:"path"`
			Step struct {
				SHA256 string `json:"sha256"`
			} `json:"step"`
		} `json:"archives"`
		Manifests []string `json:"manifests"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &mres); err != nil || mres.Schema != schemaMirror || len(mres.Archives) != 2 || len(mres.Manifests) != 2 {
		t.Fatalf("mirror result: %v\n%s", err, r.stdout)
	}
	// Each archive lies where --mirror fetches it, and its manifest, as
	// NVIDIA's parser reads it, lists it there with the same sha256.
	listed := map[string]string{}
	for _, m := range mres.Manifests {
		data, err := os.ReadFile(filepath.Join(mdir, m))
		if err != nil {
			t.Fatal(err)
		}
		man, err := catalog.ParseManifest(data, m)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range man.Components {
			for _, a := range c.Archives {
				listed[a.RelativePath] = a.SHA256
			}
		}
		page, err := os.ReadFile(filepath.Join(mdir, filepath.Dir(m), "index.html"))
		if err != nil || !strings.Contains(string(page), filepath.Base(m)) {
			t.Fatalf("%s: the redist listing does not name it: %v\n%s", m, err, page)
		}
	}
	for _, a := range mres.Archives {
		data, err := os.ReadFile(filepath.Join(mdir, a.Path))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != a.Step.SHA256 || listed[a.Path] != a.Step.SHA256 {
			t.Fatalf("%s: sha256 %x, plan %s, manifest %s", a.Path, sum, a.Step.SHA256, listed[a.Path])
		}
	}

	// Node 1 carries its plan out against NVIDIA, for reference.
	r = runBinary(t, env1, "", "resolve", node1, "--yes", "--mirror", nv.URL, "--prefix", p1, "--ld-library-path", "", "--quiet")
	if r.code != exitOK {
		t.Fatalf("node 1 resolve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	toNVIDIA := nv.Total()

	served := mirrortest.ServeDir(t, mdir)
	url := served.URL
	env2 := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR="+url, "CUDADEPS_PREFIX="+p2)
	r = runBinary(t, env2, "", "apply", planFile, node2, "--ld-library-path", "", "--json", "--quiet")
	if r.code != exitOK {
		t.Fatalf("node 2 apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var ares struct {
		Schema   string `json:"schema"`
		Mirror   string `json:"mirror"`
		Archives []any  `json:"archives"`
		Resolve  struct {
			OK bool `json:"ok"`
		} `json:"resolve"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ares); err != nil || ares.Schema != schemaApply || ares.Mirror != url || len(ares.Archives) != 2 || !ares.Resolve.OK {
		t.Fatalf("apply result: %v\n%s", err, r.stdout)
	}
	if nv.Total() != toNVIDIA {
		t.Fatalf("node 2 sent %d requests to NVIDIA", nv.Total()-toNVIDIA)
	}
	if served.Total() < 2 {
		t.Fatalf("node 2 fetched %d files from the mirror, want both archives", served.Total())
	}

	// Node 3 reads the mirror in place, named in its config file.
	cfg := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg, "cudadeps"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := "mirror = \"file://" + mdir + "\"\ncatalog = [\"" + nv.Catalog + "\"]\nprefix = \"" + p3 + "\"\n"
	if err := os.WriteFile(filepath.Join(cfg, "cudadeps", "config.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runBinary(t, nodeEnv(t, "XDG_CONFIG_HOME="+cfg), "", "apply", planFile, node3, "--ld-library-path", "", "--quiet")
	if r.code != exitOK || nv.Total() != toNVIDIA {
		t.Fatalf("node 3 apply: exit %d, %d requests to NVIDIA\n%s%s", r.code, nv.Total()-toNVIDIA, r.stdout, r.stderr)
	}

	want := tree(t, node1, map[string]string{p1: "PREFIX"})
	if len(want) != 4 {
		t.Fatalf("node 1 placed too little: %v", want)
	}
	sameTree(t, "the placed files (nodes 1 and 2)", want, tree(t, node2, map[string]string{p2: "PREFIX"}))
	sameTree(t, "the placed files (nodes 1 and 3)", want, tree(t, node3, map[string]string{p3: "PREFIX"}))
	store := tree(t, p1, nil)
	sameTree(t, "the stores (nodes 1 and 2)", store, tree(t, p2, nil))
	sameTree(t, "the stores (nodes 1 and 3)", store, tree(t, p3, nil))
}

// editPlan writes a copy of the plan with edit applied to its JSON.
func editPlan(t *testing.T, planFile string, edit func(map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(planFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestApplyRefusesAnotherKindOfNode: a plan whose machine, glibc,
// platform, target or CUDA major this node does not share is refused with
// each difference named, before anything is downloaded or placed.
func TestApplyRefusesAnotherKindOfNode(t *testing.T) {
	nv := nvidiaStandIn(t)
	work := t.TempDir()
	node1, node2 := appTree(t), appTree(t)
	env := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog)
	r := runBinary(t, env, "", "resolve", node1, "--dry-run", "--json", "--mirror", nv.URL, "--ld-library-path", "")
	if r.code != exitMissing {
		t.Fatalf("dry run: exit %d\n%s", r.code, r.stderr)
	}
	planFile := filepath.Join(work, "plan.json")
	if err := os.WriteFile(planFile, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	mdir := filepath.Join(work, "mirror")
	if r := runBinary(t, env, "", "mirror", mdir, "--plan", planFile, "--quiet"); r.code != exitOK {
		t.Fatalf("mirror: exit %d\n%s", r.code, r.stderr)
	}
	served := mirrortest.ServeDir(t, mdir)
	url := served.URL
	apply := func(plan string, args ...string) cliResult {
		prefix := filepath.Join(t.TempDir(), "prefix")
		return runBinary(t, nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog), "", append([]string{"apply", plan, node2, "--mirror", url, "--prefix", prefix, "--ld-library-path", ""}, args...)...)
	}
	stillMissing := func(what string) {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(node2, "app/lib/libcudss.so.0")); err == nil {
			t.Fatalf("%s: the refused apply placed libcudss.so.0", what)
		}
		if served.Total() != 0 {
			t.Fatalf("%s: the refused apply fetched %d files", what, served.Total())
		}
	}

	other := editPlan(t, planFile, func(doc map[string]any) {
		doc["platform"] = "linux-sbsa"
		doc["host"] = map[string]any{"machine": "aarch64", "glibc": "99.1"}
		doc["target"] = map[string]any{"kind": "python", "name": "torch", "dist": map[string]any{"name": "torch", "version": "2.11.0"}}
	})
	r = apply(other, "--json")
	if r.code != exitError {
		t.Fatalf("apply on another kind of node: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"machine: the plan was made on aarch64, this machine is x86_64",
		"glibc: the plan was made on glibc 99.1, this machine has the older",
		"platform: the plan's archives are for linux-sbsa, this machine needs linux-x86_64",
		"target: the plan's is a Python distribution (torch), this one a directory",
	} {
		if !strings.Contains(r.stderr, want) || !strings.Contains(r.stdout, want) {
			t.Errorf("the refusal does not say %q\nstdout:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
		}
	}
	stillMissing("another machine")

	r = apply(editPlan(t, planFile, func(doc map[string]any) { doc["cuda_major"] = 12 }))
	if r.code != exitError || !strings.Contains(r.stderr, "CUDA major: the plan is for CUDA 12, the package here needs CUDA 13") {
		t.Fatalf("apply of a CUDA 12 plan: exit %d\n%s", r.code, r.stderr)
	}
	stillMissing("CUDA 12")

	// A plan whose cuDSS is another build than the catalog here picks.
	r = apply(editPlan(t, planFile, func(doc map[string]any) {
		for _, round := range doc["rounds"].([]any) {
			for _, s := range round.(map[string]any)["plan"].(map[string]any)["steps"].([]any) {
				if step := s.(map[string]any); step["component"] == "libcudss" {
					step["sha256"] = strings.Repeat("ab", 32)
				}
			}
		}
	}))
	if r.code != exitError || !strings.Contains(r.stderr, "round 1 here takes libcudss 0.9.9.9 (linux-x86_64, cuda13) for libcudss.so.0, which the plan does not list") {
		t.Fatalf("apply of a plan with another cuDSS: exit %d\n%s", r.code, r.stderr)
	}
	stillMissing("another cuDSS")

	if r := runBinary(t, nodeEnv(t), "", "apply", planFile, node2); r.code != exitUsage || !strings.Contains(r.stderr, "only from a mirror") {
		t.Fatalf("apply without a mirror: exit %d\n%s", r.code, r.stderr)
	}
	if r := apply(filepath.Join(mdir, "cudss/redist/redistrib_0.9.9.9.json")); r.code != exitError || !strings.Contains(r.stderr, "redistrib_0.9.9.9.json: schema \"\" is not a plan's") {
		t.Fatalf("apply of a manifest: exit %d\n%s", r.code, r.stderr)
	}
	stillMissing("bad input")
	// The node itself is fine: the plan as made applies.
	if r := apply(planFile); r.code != exitOK {
		t.Fatalf("apply: exit %d\n%s", r.code, r.stderr)
	}
}

// TestApplyPlanOfEveryRound: a dry run plans the first round only, so
// where an installed library needs another archive, apply of a dry-run
// plan stops at that round; the document of a resolve that ran lists
// every round, and mirror and apply then carry all of it.
func TestApplyPlanOfEveryRound(t *testing.T) {
	nv := mirrortest.Serve(t, []mirrortest.Archive{
		{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
			Libs: map[string]elfwrite.Spec{"libcudss.so.0": {Soname: "libcudss.so.0", Needed: []string{"libcutensor.so.2", "libc.so.6"}}}},
		{Component: "libcutensor", Product: "cutensor", Version: "9.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
			Libs: map[string]elfwrite.Spec{"libcutensor.so.2": {Soname: "libcutensor.so.2", Needed: []string{"libc.so.6"}}}},
	})
	work := t.TempDir()
	app := func() string {
		dir := t.TempDir()
		if err := elfwrite.Write(filepath.Join(dir, "lib/libapp.so"), elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libcudss.so.0", "libcudart.so.13", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")}); err != nil {
			t.Fatal(err)
		}
		if err := elfwrite.Write(filepath.Join(dir, "lib/libcudart.so.13"), elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	node1, node2 := app(), app()
	env1 := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR="+nv.URL, "CUDADEPS_PREFIX="+filepath.Join(work, "p1"))
	write := func(name, text string) string {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	r := runBinary(t, env1, "", "resolve", node1, "--dry-run", "--json", "--ld-library-path", "")
	dryPlan := write("dry.json", r.stdout)
	r = runBinary(t, env1, "", "resolve", node1, "--yes", "--json", "--ld-library-path", "", "--quiet")
	if r.code != exitOK {
		t.Fatalf("node 1 resolve: exit %d\n%s", r.code, r.stderr)
	}
	fullPlan := write("full.json", r.stdout)

	mdir := filepath.Join(work, "mirror")
	for _, p := range []string{dryPlan, fullPlan} {
		if r := runBinary(t, env1, "", "mirror", mdir, "--plan", p, "--quiet"); r.code != exitOK {
			t.Fatalf("mirror %s: exit %d\n%s", p, r.code, r.stderr)
		}
	}
	env2 := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR=file://"+mdir, "CUDADEPS_PREFIX="+filepath.Join(work, "p2"))
	r = runBinary(t, env2, "", "apply", dryPlan, node2, "--ld-library-path", "", "--quiet")
	if r.code != exitError || !strings.Contains(r.stderr, "round 2 here takes libcutensor 9.9.9.9 (linux-x86_64, cuda13) for libcutensor.so.2, which the plan does not list") {
		t.Fatalf("apply of the dry-run plan: exit %d\n%s", r.code, r.stderr)
	}
	toNVIDIA := nv.Total()
	r = runBinary(t, env2, "", "apply", fullPlan, node2, "--ld-library-path", "", "--quiet")
	if r.code != exitOK || nv.Total() != toNVIDIA {
		t.Fatalf("apply of the full plan: exit %d, %d requests to NVIDIA\n%s%s", r.code, nv.Total()-toNVIDIA, r.stdout, r.stderr)
	}
	sameTree(t, "the placed files", tree(t, node1, map[string]string{filepath.Join(work, "p1"): "PREFIX"}), tree(t, node2, map[string]string{filepath.Join(work, "p2"): "PREFIX"}))
}

// site writes a site-packages directory: gpupkg 1.0, whose library finds
// libcudss.so.0 in the nvidia-cudss-cu13 wheel's directory, and that wheel
// at cudssVersion with its library gone (its RECORD still lists it).
func site(t *testing.T, cudssVersion string) string {
	t.Helper()
	dir := t.TempDir()
	dist := func(name, version string, requires []string, files map[string][]byte) {
		info := strings.ReplaceAll(name, "-", "_") + "-" + version + ".dist-info"
		meta := "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
		for _, r := range requires {
			meta += "Requires-Dist: " + r + "\n"
		}
		files[info+"/METADATA"] = []byte(meta)
		var record strings.Builder
		for p, data := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p), data, 0o755); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			record.WriteString(p + ",sha256=" + hex.EncodeToString(sum[:]) + "," + strconv.Itoa(len(data)) + "\n")
		}
		record.WriteString(info + "/RECORD,,\n")
		if err := os.WriteFile(filepath.Join(dir, info, "RECORD"), []byte(record.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	elfFile := func(s elfwrite.Spec) []byte {
		p := filepath.Join(t.TempDir(), "lib.so")
		if err := elfwrite.Write(p, s); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	dist("gpupkg", "1.0", []string{"nvidia-cudss-cu13==" + cudssVersion}, map[string][]byte{
		"gpupkg/__init__.py":         nil,
		"gpupkg/lib/libgpupkg.so":    elfFile(elfwrite.Spec{Soname: "libgpupkg.so", Needed: []string{"libcudss.so.0", "libcudart.so.13", "libc.so.6"}, RPath: elfwrite.Str("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN")}),
		"gpupkg/lib/libcudart.so.13": elfFile(elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}),
	})
	dist("nvidia-cudss-cu13", cudssVersion, nil, map[string][]byte{"nvidia/cu13/lib/libcudss.so.0": elfFile(elfwrite.Spec{Soname: "libcudss.so.0"})})
	if err := os.Remove(filepath.Join(dir, "nvidia/cu13/lib/libcudss.so.0")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestApplyChecksRequiredDistributions: for a Python distribution, the
// plan holds where the required distribution it names has the plan's
// version, and is refused where it has another.
func TestApplyChecksRequiredDistributions(t *testing.T) {
	nv := nvidiaStandIn(t)
	work := t.TempDir()
	site1, same, older := site(t, "0.9.9.9"), site(t, "0.9.9.9"), site(t, "0.9.9.8")
	env1 := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR="+nv.URL)
	r := runBinary(t, env1, "", "resolve", "gpupkg", "--site-packages", site1, "--dry-run", "--json", "--ld-library-path", "")
	if r.code != exitMissing || !strings.Contains(r.stdout, `"distribution": "nvidia-cudss-cu13"`) {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	planFile := filepath.Join(work, "plan.json")
	if err := os.WriteFile(planFile, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	mdir := filepath.Join(work, "mirror")
	if r := runBinary(t, env1, "", "mirror", mdir, "--plan", planFile, "--quiet"); r.code != exitOK {
		t.Fatalf("mirror: exit %d\n%s", r.code, r.stderr)
	}
	env2 := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR=file://"+mdir, "CUDADEPS_PREFIX="+filepath.Join(work, "p2"))
	r = runBinary(t, env2, "", "apply", planFile, "--site-packages", older, "--ld-library-path", "")
	if r.code != exitError || !strings.Contains(r.stderr, "nvidia-cudss-cu13: the plan was made with version 0.9.9.9, this machine has 0.9.9.8") {
		t.Fatalf("apply with another nvidia-cudss-cu13: exit %d\n%s", r.code, r.stderr)
	}
	toNVIDIA := nv.Total()
	r = runBinary(t, env2, "", "apply", planFile, "--site-packages", same, "--ld-library-path", "", "--quiet")
	if r.code != exitOK || nv.Total() != toNVIDIA {
		t.Fatalf("apply: exit %d, %d requests to NVIDIA\n%s%s", r.code, nv.Total()-toNVIDIA, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(same, "nvidia/cu13/lib/libcudss.so.0")); err != nil {
		t.Fatalf("libcudss.so.0 is not back where the RECORD puts it: %v", err)
	}
}

// TestMirrorTarget: mirror makes the plan itself; both archives land where
// --mirror looks, and a second run downloads nothing.
func TestMirrorTarget(t *testing.T) {
	nv := nvidiaStandIn(t)
	env := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR="+nv.URL)
	mdir := filepath.Join(t.TempDir(), "mirror")
	r := runBinary(t, env, "", "mirror", mdir, "--target", appTree(t), "--ld-library-path", "")
	if r.code != exitOK || !strings.Contains(r.stdout, "2 archive(s), 0 wheel(s)") {
		t.Fatalf("mirror --target: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, rel := range []string{"libcudss/linux-x86_64/libcudss-linux-x86_64-0.9.9.9_cuda13-archive.tar.xz", "libcutensor/linux-x86_64/libcutensor-linux-x86_64-9.9.9.9_cuda13-archive.tar.xz"} {
		want, err := os.ReadFile(filepath.Join(nv.Dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(mdir, rel)); err != nil || string(got) != string(want) {
			t.Fatalf("%s: not the served archive (%v)", rel, err)
		}
	}
	hits := nv.Total()
	r = runBinary(t, env, "", "mirror", mdir, "--target", appTree(t), "--ld-library-path", "")
	if r.code != exitOK || nv.Total() != hits || strings.Count(r.stdout, "present, verified") != 2 {
		t.Fatalf("second mirror: exit %d, %d downloads\n%s", r.code, nv.Total()-hits, r.stdout)
	}
	if r := runBinary(t, env, "", "mirror", mdir); r.code != exitUsage || !strings.Contains(r.stderr, "one of --plan FILE and --target TARGET") {
		t.Fatalf("mirror without a plan: exit %d\n%s", r.code, r.stderr)
	}
}

// mirrorOfApp writes, with cudadeps mirror, what the app tree needs from a
// stand-in for NVIDIA into a new directory, and returns it.
func mirrorOfApp(t *testing.T) string {
	t.Helper()
	nv := nvidiaStandIn(t)
	env := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR="+nv.URL)
	mdir := filepath.Join(t.TempDir(), "mirror")
	if r := runBinary(t, env, "", "mirror", mdir, "--target", appTree(t), "--ld-library-path", "", "--quiet"); r.code != exitOK {
		t.Fatalf("mirror: exit %d\n%s", r.code, r.stderr)
	}
	return mdir
}

// TestCatalogUpdateFromAMirror: the manifests mirror writes are what
// catalog update reads from a mirror; the layer it writes then lists the
// mirrored releases.
func TestCatalogUpdateFromAMirror(t *testing.T) {
	url := mirrortest.ServeDir(t, mirrorOfApp(t)).URL
	node := nodeEnv(t, "CUDADEPS_MIRROR="+url)
	r := runBinary(t, node, "", "catalog", "update", "--json", "--quiet")
	if r.code != exitOK {
		t.Fatalf("catalog update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var res struct {
		Manifests []string `json:"manifests"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || strings.Join(res.Manifests, " ") != "cudss/redistrib_0.9.9.9.json cutensor/redistrib_9.9.9.9.json" {
		t.Fatalf("catalog update read %v (%v)\n%s", res.Manifests, err, r.stdout)
	}
	// The node now knows the mirrored release without the site's catalog,
	// and fetches it from the mirror.
	r = runBinary(t, node, "", "catalog", "which", "libcudss.so.0", "--platform", "linux-x86_64", "--cuda", "13", "--json")
	if r.code != exitOK || !strings.Contains(r.stdout, `"version": "0.9.9.9"`) || !strings.Contains(r.stdout, `"url": "`+url+"libcudss/linux-x86_64/") {
		t.Fatalf("which after the update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Without a mirror in force, the layer's own base URL (the mirror's
	// cudss/redist/, as NVIDIA lays it out) serves the archive too.
	var plain []string
	for _, kv := range node {
		if !strings.HasPrefix(kv, "CUDADEPS_MIRROR=") {
			plain = append(plain, kv)
		}
	}
	r = runBinary(t, plain, "", "catalog", "which", "libcudss.so.0", "--platform", "linux-x86_64", "--cuda", "13", "--json")
	var which struct {
		URL    string `json:"url"`
		SHA256 string `json:"sha256"`
	}
	if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &which) != nil || !strings.HasPrefix(which.URL, url+"cudss/redist/") {
		t.Fatalf("which without a mirror: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	resp, err := http.Get(which.URL)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	sum := sha256.Sum256(data)
	if err != nil || resp.StatusCode != http.StatusOK || hex.EncodeToString(sum[:]) != which.SHA256 {
		t.Fatalf("GET %s: %s (%v), sha256 %x, want %s", which.URL, resp.Status, err, sum, which.SHA256)
	}
}

// TestCatalogUpdateFromAFileMirror: a mirror on a shared file system
// (file:///DIR) serves catalog update as it serves every other --mirror:
// its directories are listed, its manifests read in place.
func TestCatalogUpdateFromAFileMirror(t *testing.T) {
	url := "file://" + mirrorOfApp(t) + "/"
	node := nodeEnv(t)
	r := runBinary(t, node, "", "catalog", "update", "--mirror", url, "--json", "--quiet")
	if r.code != exitOK {
		t.Fatalf("catalog update --mirror %s: exit %d\n%s%s", url, r.code, r.stdout, r.stderr)
	}
	var res struct {
		Manifests []string `json:"manifests"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || strings.Join(res.Manifests, " ") != "cudss/redistrib_0.9.9.9.json cutensor/redistrib_9.9.9.9.json" {
		t.Fatalf("catalog update read %v (%v)\n%s", res.Manifests, err, r.stdout)
	}
	r = runBinary(t, node, "", "catalog", "which", "libcudss.so.0", "--platform", "linux-x86_64", "--cuda", "13", "--mirror", url, "--json")
	if r.code != exitOK || !strings.Contains(r.stdout, `"version": "0.9.9.9"`) || !strings.Contains(r.stdout, `"url": "`+url+"libcudss/linux-x86_64/") {
		t.Fatalf("which after the update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A product the mirror lacks is passed over, as over http.
	r = runBinary(t, node, "", "catalog", "update", "--mirror", url, "--product", "cudss", "--product", "nccl", "--quiet")
	if r.code != exitOK {
		t.Fatalf("catalog update with a product the mirror lacks: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
