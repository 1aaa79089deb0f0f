package registry

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/plan"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/indextest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/internal/testkit/registrytest"
)

// fixture is NVIDIA and a package index standing in on 127.0.0.1, and a
// catalog of the stand-in's archives.
type fixture struct {
	nv       *mirrortest.Mirror
	ix       *indextest.Index
	wheel    indextest.Wheel
	archives []mirrortest.Archive
	cat      *catalog.Catalog
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	lib := func(m elf.Machine, soname string) map[string]elfwrite.Spec {
		return map[string]elfwrite.Spec{soname: {Soname: soname, Needed: []string{"libc.so.6"}, Machine: m}}
	}
	f := &fixture{archives: []mirrortest.Archive{
		{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64, Libs: lib(elf.EM_X86_64, "libcudss.so.0")},
		{Component: "libcutensor", Product: "cutensor", Version: "9.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64, Libs: lib(elf.EM_X86_64, "libcutensor.so.2")},
		{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-sbsa", Variant: "cuda13", Machine: elf.EM_AARCH64, Libs: lib(elf.EM_AARCH64, "libcudss.so.0")},
	}}
	f.nv = mirrortest.Serve(t, f.archives)
	f.wheel = indextest.Wheel{Project: "nvidia-nvjitlink-cu13", Version: "13.0.88", Tags: "py3-none-manylinux_2_27_x86_64",
		Files: map[string][]byte{"nvidia/cu13/lib/libnvJitLink.so.13": []byte("not an ELF file, only bytes")}}
	f.ix = indextest.Serve(t, f.wheel)
	var err error
	if f.cat, err = catalog.Load(context.Background(), catalog.LoadOptions{Extra: []string{f.nv.Catalog}}); err != nil {
		t.Fatal(err)
	}
	return f
}

// step is the plan step of archive i.
func (f *fixture) step(t *testing.T, i int) map[string]any {
	a := f.archives[i]
	data, err := os.ReadFile(filepath.Join(f.nv.Dir, a.RelativePath()))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return map[string]any{"source": "nvidia", "component": a.Component, "product": a.Product, "version": a.Version,
		"platform": a.Platform, "cuda_variant": a.Variant, "url": f.nv.URL + a.RelativePath(),
		"sha256": hex.EncodeToString(sum[:]), "size": len(data), "provides": a.Sonames()}
}

func (f *fixture) wheelStep() map[string]any {
	data := f.ix.File(f.wheel.Filename())
	sum := sha256.Sum256(data)
	return map[string]any{"source": "pypi", "component": "nvidia-nvjitlink-cu13", "project": f.wheel.Project, "filename": f.wheel.Filename(),
		"index": f.ix.URL, "version": f.wheel.Version, "platform": "linux-x86_64", "url": strings.TrimSuffix(f.ix.URL, "simple/") + "files/" + f.wheel.Filename(),
		"sha256": hex.EncodeToString(sum[:]), "size": len(data)}
}

// makePlan is resolve's JSON document for a plan of the steps.
func makePlan(t *testing.T, target, plat string, steps ...map[string]any) *plan.Plan {
	t.Helper()
	machine := map[string]string{"linux-x86_64": "x86_64", "linux-sbsa": "aarch64"}[plat]
	doc := map[string]any{
		"schema": plan.Schema, "platform": plat, "cuda_major": 13, "dry_run": true,
		"target": map[string]any{"kind": "python", "name": target, "dist": map[string]string{"name": target, "version": "1.0"}},
		"host":   map[string]string{"machine": machine, "glibc": "2.36"},
		"rounds": []any{map[string]any{"round": 1, "missing": []any{}, "plan": map[string]any{"platform": plat, "cuda_major": 13, "steps": steps}}},
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Parse(data, target+".json")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// node is one machine: its own download cache and a Remote for ref.
func node(t *testing.T, reg *registrytest.Registry, ref string, opts Options) (*Remote, *fetch.Client) {
	t.Helper()
	r, err := ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if reg.CA != nil && opts.RootCAs == nil {
		opts.RootCAs = reg.CA.Pool
	}
	if opts.DockerConfig == "" {
		opts.DockerConfig = reg.DockerConfig(t, r.Host)
	}
	opts.Logger = logger(t)
	rem, err := Open(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	client, err := fetch.NewClient(rem.FetchOptions(fetch.Options{CacheDir: t.TempDir(), Logger: opts.Logger}))
	if err != nil {
		t.Fatal(err)
	}
	return rem, client
}

func sha256Of(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// TestPushThenPull is the round trip through a registry that wants a login
// over TLS: the push sends every file as the blob of its own sha256, under
// a manifest of our artifact type with the annotations and an index entry
// with the OCI platform; a second push sends nothing and makes the same
// manifest; a push for another platform joins the index; each node pulls
// its platform's share into its cache and a directory mirror of links that
// the catalog layer and the simple index describe.
func TestPushThenPull(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	f := newFixture(t)
	ctx := context.Background()
	ref := "oci://" + reg.Host + "/fleet/torch:2.11"
	x86 := makePlan(t, "torch", "linux-x86_64", f.step(t, 0), f.step(t, 1), f.wheelStep())

	front := reg.Front(t)
	admin, client := node(t, reg, "oci://"+front.Host+"/fleet/torch:2.11", Options{})
	pushed, err := admin.Push(ctx, x86, PushOptions{Catalog: f.cat, Client: client})
	if err != nil {
		t.Fatalf("push: %v\n%s", err, reg.Log.String())
	}
	if len(pushed.Files) != 3 || pushed.Platform != "linux-x86_64" || len(pushed.Platforms) != 1 {
		t.Fatalf("pushed %+v", pushed)
	}
	for i, s := range x86.Steps() {
		pf := pushed.Files[i]
		if pf.Digest != "sha256:"+s.SHA256 || pf.Size != s.Size || !pf.Uploaded || pf.From != s.URL {
			t.Errorf("file %d: %+v, want the digest %s of %s, uploaded from %s", i, pf, s.SHA256, s, s.URL)
		}
	}

	// What a registry client sees.
	var index ocispec.Index
	getJSON(t, reg, "/v2/fleet/torch/manifests/2.11", ocispec.MediaTypeImageIndex, &index)
	if index.ArtifactType != ArtifactType || len(index.Manifests) != 1 {
		t.Fatalf("index %+v", index)
	}
	e := index.Manifests[0]
	if e.Platform == nil || e.Platform.OS != "linux" || e.Platform.Architecture != "amd64" || e.ArtifactType != ArtifactType ||
		e.Annotations[AnnotationPlatform] != "linux-x86_64" || e.Annotations[AnnotationTarget] != "torch" || e.Annotations[AnnotationCUDAMajor] != "13" {
		t.Fatalf("index entry %+v", e)
	}
	var m ocispec.Manifest
	getJSON(t, reg, "/v2/fleet/torch/manifests/"+e.Digest.String(), ocispec.MediaTypeImageManifest, &m)
	if m.ArtifactType != ArtifactType || m.Config.MediaType != MediaTypeContents || m.Annotations[AnnotationVersions] != "libcudss 0.9.9.9, libcutensor 9.9.9.9, nvidia-nvjitlink-cu13 13.0.88" ||
		m.Annotations[AnnotationTargetVersion] != "1.0" {
		t.Fatalf("manifest %+v", m)
	}
	var types, titles []string
	for _, l := range m.Layers {
		types = append(types, l.MediaType)
		titles = append(titles, l.Annotations[ocispec.AnnotationTitle])
	}
	if got := strings.Join(types, " "); got != MediaTypePlan+" "+MediaTypeCatalog+" "+MediaTypeArchive+" "+MediaTypeArchive+" "+MediaTypeWheel {
		t.Fatalf("layers %s", got)
	}
	if titles[2] != f.archives[0].RelativePath() || titles[4] != "simple/nvidia-nvjitlink-cu13/"+f.wheel.Filename() {
		t.Fatalf("titles %q", titles)
	}

	// Again, from a machine whose cache is empty: nothing is downloaded or
	// sent, and the manifest is the same.
	nvBefore, ixBefore := f.nv.Total(), f.ix.Requests()
	uploads := front.Count("POST", "/blobs/uploads/")
	again, client2 := node(t, reg, "oci://"+front.Host+"/fleet/torch:2.11", Options{})
	pushed2, err := again.Push(ctx, x86, PushOptions{Catalog: f.cat, Client: client2})
	if err != nil {
		t.Fatal(err)
	}
	if pushed2.Uploaded != 0 || pushed2.Manifest != pushed.Manifest || pushed2.Index != pushed.Index || f.nv.Total() != nvBefore || f.ix.Requests() != ixBefore || front.Count("POST", "/blobs/uploads/") != uploads {
		t.Fatalf("the second push uploaded %d bytes (%d upload requests), asked NVIDIA %d and the index %d times; manifest %v / %v",
			pushed2.Uploaded, front.Count("POST", "/blobs/uploads/")-uploads, f.nv.Total()-nvBefore, f.ix.Requests()-ixBefore, pushed2.Manifest, pushed.Manifest)
	}

	// An SBSA plan under the same tag: the index serves both.
	sbsa := makePlan(t, "torch", "linux-sbsa", f.step(t, 2))
	pushed3, err := admin.Push(ctx, sbsa, PushOptions{Catalog: f.cat, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed3.Platforms) != 2 || pushed3.Platforms[0].Platform != "linux-sbsa" || pushed3.Platforms[1].Digest != pushed.Manifest.Digest {
		t.Fatalf("index after the SBSA push: %+v", pushed3.Platforms)
	}

	for _, plat := range []string{"linux-x86_64", "linux-sbsa"} {
		t.Run(plat, func(t *testing.T) {
			nodeFront := reg.Front(t)
			rem, nodeClient := node(t, reg, "oci://"+nodeFront.Host+"/fleet/torch:2.11", Options{})
			art, err := rem.Read(ctx, Select{Platform: plat})
			if err != nil {
				t.Fatal(err)
			}
			want := x86
			if plat == "linux-sbsa" {
				want = sbsa
			}
			if string(art.Plan.Raw) != string(want.Raw) || art.Contents.Platform != plat || !strings.Contains(art.Reference, "@sha256:") {
				t.Fatalf("read %s: %+v", plat, art)
			}
			small := len(nodeFront.BlobGets())
			pulled, err := art.Pull(ctx, PullOptions{Client: nodeClient})
			if err != nil {
				t.Fatal(err)
			}
			gets := nodeFront.BlobGets()
			if len(gets)-small != len(want.Steps()) {
				t.Errorf("%d blobs downloaded for %d files: %v", len(gets)-small, len(want.Steps()), gets)
			}
			for _, s := range want.Steps() {
				if n := gets["sha256:"+s.SHA256]; n != 1 {
					t.Errorf("%s was downloaded %d times", s, n)
				}
			}
			for _, s := range want.Steps() {
				f := fileOf(s, "")
				p := filepath.Join(pulled.Dir, filepath.FromSlash(pathOf(t, pulled, f.Digest)))
				if got := sha256Of(t, p); got != s.SHA256 {
					t.Errorf("%s: the mirror's file has sha256 %s, want %s", s, got, s.SHA256)
				}
				if target, err := os.Readlink(p); err != nil || !strings.HasPrefix(target, nodeClient.CacheDir()) {
					t.Errorf("%s: not a link into the cache: %q %v", s, target, err)
				}
			}
			// What apply reads: the catalog layer over a catalog that knows
			// nothing of these archives, with the mirror: each archive
			// comes from the directory.
			cat, err := catalog.Load(ctx, catalog.LoadOptions{Extra: []string{pulled.Catalog}, Mirror: pulled.Mirror})
			if err != nil {
				t.Fatal(err)
			}
			ch, err := cat.Choose("libcudss", "0.9.9.9", plat, 13)
			if err != nil {
				t.Fatal(err)
			}
			if got := sha256Of(t, strings.TrimPrefix(ch.URL, "file://")); got != ch.Archive.SHA256 {
				t.Fatalf("%s: sha256 %s, want %s", ch.URL, got, ch.Archive.SHA256)
			}
			if plat == "linux-x86_64" {
				page, err := os.ReadFile(filepath.Join(pulled.Dir, "simple", "nvidia-nvjitlink-cu13", "index.html"))
				if err != nil || !strings.Contains(string(page), f.wheel.Filename()+"#sha256=") {
					t.Fatalf("the simple index: %v\n%s", err, page)
				}
			}
			// A second pull on the node downloads nothing.
			before := len(nodeFront.Requests())
			if _, err := art.Pull(ctx, PullOptions{Client: nodeClient}); err != nil {
				t.Fatal(err)
			}
			if n := len(nodeFront.Requests()) - before; n != 0 {
				t.Errorf("the second pull made %d requests: %v", n, nodeFront.Requests()[before:])
			}
		})
	}

	// Without a platform of its own to choose, and with two targets.
	tools := makePlan(t, "cupy", "linux-x86_64", f.step(t, 0))
	if _, err := admin.Push(ctx, tools, PushOptions{Catalog: f.cat, Client: client}); err != nil {
		t.Fatal(err)
	}
	rem, _ := node(t, reg, ref, Options{})
	if _, err := rem.Read(ctx, Select{Platform: "linux-x86_64"}); err == nil || !strings.Contains(err.Error(), "holds plans for cupy, torch on linux-x86_64: name the target") {
		t.Fatalf("two targets, none named: %v", err)
	}
	if art, err := rem.Read(ctx, Select{Platform: "linux-x86_64", Target: "CuPy"}); err != nil || art.Contents.Target.Name != "cupy" {
		t.Fatalf("the target named: %v", err)
	}
	if _, err := rem.Read(ctx, Select{Platform: "linux-aarch64"}); err == nil || !strings.Contains(err.Error(), "holds no plan for linux-aarch64; it holds: torch for linux-sbsa (CUDA 13); cupy for linux-x86_64 (CUDA 13); torch for linux-x86_64 (CUDA 13)") {
		t.Fatalf("a platform without a plan: %v", err)
	}
}

func pathOf(t *testing.T, p *Pulled, digest string) string {
	t.Helper()
	for _, f := range p.Files {
		if f.Digest == digest {
			return f.Path
		}
	}
	t.Fatalf("%s was not pulled", digest)
	return ""
}

// getJSON reads a manifest from the registry as any client would.
func getJSON(t *testing.T, reg *registrytest.Registry, path, accept string, v any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, reg.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(reg.User, reg.Password)
	req.Header.Set("Accept", accept)
	resp, err := reg.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// TestLogin: a registry that wants a login refuses a node without one, or
// with a wrong one, saying what to do and never the secret; a credential
// helper named by the Docker config gives it.
func TestLogin(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	ctx := context.Background()
	ref := "oci://" + reg.Host + "/fleet/torch:1"
	empty := t.TempDir()
	rem, _ := node(t, reg, ref, Options{DockerConfig: empty})
	_, err := rem.Read(ctx, Select{Platform: "linux-x86_64"})
	if err == nil || !strings.Contains(err.Error(), "asks for a login it was not given: run 'docker login "+reg.Host+"'") {
		t.Fatalf("no login: %v", err)
	}

	wrong := t.TempDir()
	writeJSON(t, filepath.Join(wrong, "config.json"), map[string]any{"auths": map[string]any{reg.Host: map[string]string{"username": reg.User, "password": "wrong-" + reg.Password}}})
	rem, _ = node(t, reg, ref, Options{DockerConfig: wrong})
	if _, err := rem.Read(ctx, Select{Platform: "linux-x86_64"}); err == nil || !strings.Contains(err.Error(), "login") || strings.Contains(err.Error(), reg.Password) {
		t.Fatalf("a wrong login: %v", err)
	}

	// A credential helper on PATH (docker-credential-NAME get).
	bin := t.TempDir()
	helper := fmt.Sprintf("#!/bin/sh\nread host\n[ \"$1\" = get ] && [ \"$host\" = %q ] || exit 1\nprintf '{\"ServerURL\":\"%%s\",\"Username\":\"%s\",\"Secret\":\"%s\"}' \"$host\"\n", reg.Host, reg.User, reg.Password)
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-fleettest"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	helped := t.TempDir()
	writeJSON(t, filepath.Join(helped, "config.json"), map[string]any{"credHelpers": map[string]string{reg.Host: "fleettest"}})
	rem, _ = node(t, reg, ref, Options{DockerConfig: helped})
	if _, err := rem.Read(ctx, Select{Platform: "linux-x86_64"}); err == nil || !strings.Contains(err.Error(), "no such tag or digest") {
		t.Fatalf("with the helper's login, the registry should only lack the tag: %v", err)
	}
}

// TestUntrustedCertificate: a registry whose certificate authority is not
// trusted is refused, with how to trust it.
func TestUntrustedCertificate(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	other := registrytest.NewCA(t, t.TempDir())
	rem, _ := node(t, reg, "oci://"+reg.Host+"/fleet/torch:1", Options{RootCAs: other.Pool})
	if _, err := rem.Read(context.Background(), Select{}); err == nil || !strings.Contains(err.Error(), "SSL_CERT_FILE") {
		t.Fatalf("an untrusted registry: %v", err)
	}
}

// TestPlainHTTPOnLoopback: a registry on 127.0.0.1 without TLS is spoken
// to in plain HTTP; a push and a pull work.
func TestPlainHTTPOnLoopback(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Plain: true, Anonymous: true})
	f := newFixture(t)
	ctx := context.Background()
	ref := "oci://" + reg.Host + "/fleet/app:1"
	rem, client := node(t, reg, ref, Options{DockerConfig: t.TempDir()})
	p := makePlan(t, "app", "linux-x86_64", f.step(t, 0))
	if _, err := rem.Push(ctx, p, PushOptions{Catalog: f.cat, Client: client}); err != nil {
		t.Fatal(err)
	}
	rem, client = node(t, reg, ref, Options{DockerConfig: t.TempDir()})
	art, err := rem.Read(ctx, Select{Platform: "linux-x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := art.Pull(ctx, PullOptions{Client: client}); err != nil {
		t.Fatal(err)
	}
	if !rem.repo.PlainHTTP {
		t.Fatal("the loopback registry without TLS was not spoken to in plain HTTP")
	}
}

// TestTamperedBlob: a blob changed in the registry's storage is refused by
// its digest, and the mirror gets no link to it.
func TestTamperedBlob(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	f := newFixture(t)
	ctx := context.Background()
	ref := "oci://" + reg.Host + "/fleet/app:1"
	rem, client := node(t, reg, ref, Options{})
	p := makePlan(t, "app", "linux-x86_64", f.step(t, 0), f.step(t, 1))
	if _, err := rem.Push(ctx, p, PushOptions{Catalog: f.cat, Client: client}); err != nil {
		t.Fatal(err)
	}
	victim := p.Steps()[1]
	blob := reg.BlobFile(victim.SHA256)
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(blob, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rem, client = node(t, reg, ref, Options{})
	art, err := rem.Read(ctx, Select{Platform: "linux-x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mirror")
	_, err = art.Pull(ctx, PullOptions{Client: client, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "sha256 mismatch") || !strings.Contains(err.Error(), "blobs/sha256:"+victim.SHA256) {
		t.Fatalf("a tampered blob: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatal("the mirror was written although a blob was refused")
	}
	if _, err := os.Stat(filepath.Join(client.CacheDir(), "archives", victim.SHA256)); err == nil {
		t.Fatal("the tampered blob is in the cache")
	}
}

// TestReadRefusesOthers: a tag that holds something cudadeps did not push
// is named as such, and a push does not overwrite it.
func TestReadRefusesOthers(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	f := newFixture(t)
	ctx := context.Background()
	rem, client := node(t, reg, "oci://"+reg.Host+"/fleet/app:1", Options{})
	if err := rem.prepare(ctx); err != nil {
		t.Fatal(err)
	}
	other := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`)
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digestOf("sha256:" + hexSum(other)), Size: int64(len(other))}
	if err := rem.repo.PushReference(ctx, d, strings.NewReader(string(other)), "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := rem.Read(ctx, Select{}); err == nil || !strings.Contains(err.Error(), "not one cudadeps pushed") {
		t.Fatalf("read of another index: %v", err)
	}
	p := makePlan(t, "app", "linux-x86_64", f.step(t, 0))
	if _, err := rem.Push(ctx, p, PushOptions{Catalog: f.cat, Client: client}); err == nil || !strings.Contains(err.Error(), "choose another tag") {
		t.Fatalf("push over another index: %v", err)
	}
	if _, err := ParseReference("oci://" + reg.Host + "/Fleet/App:1"); err == nil {
		t.Fatal("a repository name in capitals was accepted")
	}
	noTag, _ := node(t, reg, "oci://"+reg.Host+"/fleet/app", Options{})
	if _, err := noTag.Push(ctx, p, PushOptions{Catalog: f.cat, Client: client}); err == nil || !strings.Contains(err.Error(), "a push needs a tag") {
		t.Fatalf("push without a tag: %v", err)
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeJSON(t *testing.T, p string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPlainHTTPRule: plain HTTP is for loopback registries, or where
// allowed; a redirect beyond loopback to plain HTTP is refused likewise.
func TestPlainHTTPRule(t *testing.T) {
	for _, c := range []struct {
		ref   string
		allow bool
		plain bool
	}{
		{"oci://127.0.0.1:5000/a", false, true},
		{"oci://localhost:5000/a", false, true},
		{"oci://[::1]:5000/a", false, true},
		{"oci://10.0.0.5:5000/a", false, false},
		{"oci://registry.internal/a", false, false},
		{"oci://registry.internal/a", true, true},
	} {
		r, err := ParseReference(c.ref)
		if err != nil {
			t.Fatal(err)
		}
		rem, err := Open(r, Options{AllowHTTP: c.allow, DockerConfig: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if got := rem.plainAllowed(); got != c.plain {
			t.Errorf("%s (allow-http %v): plain HTTP allowed %v, want %v", c.ref, c.allow, got, c.plain)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://objects.example/blob", nil)
		if err := rem.guard.checkRedirect(req, nil); (err == nil) != c.allow {
			t.Errorf("%s (allow-http %v): a redirect to plain http beyond loopback: %v", c.ref, c.allow, err)
		}
	}
}
