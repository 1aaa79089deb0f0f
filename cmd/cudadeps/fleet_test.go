package main

import (
	"bytes"
	"crypto/rand"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/internal/testkit/registrytest"
)

// fleetStandIn stands in for NVIDIA: cuDSS, and cuTENSOR with a payload
// of payload random bytes (so that a pull can be stopped part-way).
func fleetStandIn(t testing.TB, payload int) *mirrortest.Mirror {
	data := make([]byte, payload)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	return mirrortest.Serve(t, []mirrortest.Archive{
		{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
			Libs:  map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}},
			Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}},
		{Component: "libcutensor", Product: "cutensor", Version: "9.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
			Libs:  map[string]elfwrite.Spec{"libcutensor.so.9.9.9": {Soname: "libcutensor.so.2", Needed: []string{"libc.so.6"}}},
			Links: map[string]string{"libcutensor.so.2": "libcutensor.so.9.9.9"},
			Raw:   map[string][]byte{"cutensor-kernels.bin": data}},
	})
}

// toolTree is a second target: a tool whose library needs cuDSS alone.
func toolTree(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "tool/lib/libtool.so"), elfwrite.Spec{Soname: "libtool.so",
		Needed: []string{"libcudss.so.0", "libcudart.so.13", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.Write(filepath.Join(dir, "tool/lib/libcudart.so.13"), elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fleetNode is one simulated machine: its tree, prefix and environment
// (own cache, store and config, the registry's login and CA), reaching the
// registry through its own front, which counts what it asks for.
type fleetNode struct {
	tree, prefix string
	env          []string
	front        *registrytest.Front
}

func newFleetNode(t testing.TB, reg *registrytest.Registry, tree string) *fleetNode {
	t.Helper()
	n := &fleetNode{tree: tree, prefix: filepath.Join(t.TempDir(), "prefix"), front: reg.Front(t)}
	n.env = nodeEnv(t, "SSL_CERT_FILE="+reg.CA.File, "DOCKER_CONFIG="+reg.DockerConfig(t, n.front.Host))
	return n
}

func (n *fleetNode) ref(path string) string { return "oci://" + n.front.Host + path }

func (n *fleetNode) applyArgs(path string, extra ...string) []string {
	return append([]string{"apply", n.ref(path), n.tree, "--prefix", n.prefix, "--ld-library-path", "", "--quiet"}, extra...)
}

// cacheEnv is the node's download cache.
func (n *fleetNode) cache() string {
	for _, kv := range n.env {
		if v, ok := strings.CutPrefix(kv, "XDG_CACHE_HOME="); ok {
			return filepath.Join(v, "cudadeps")
		}
	}
	return ""
}

type pushResult struct {
	Schema   string `json:"schema"`
	Manifest struct {
		Digest string `json:"digest"`
	} `json:"manifest"`
	Files []struct {
		Name     string `json:"name"`
		Digest   string `json:"digest"`
		Size     int64  `json:"size"`
		Uploaded bool   `json:"uploaded"`
	} `json:"files"`
	Uploaded int64 `json:"bytes_uploaded"`
}

type planSteps struct {
	Rounds []struct {
		Plan struct {
			Steps []struct {
				Component string `json:"component"`
				SHA256    string `json:"sha256"`
				Size      int64  `json:"size"`
			} `json:"steps"`
		} `json:"plan"`
	} `json:"rounds"`
}

// TestFleetThroughRegistry is a fleet served by a registry that wants a
// login over TLS (docker-registry, htpasswd, a test CA): one machine plans
// against NVIDIA and pushes; a second push sends nothing; then nodes, each
// with its own prefix, store and cache, apply the plan at once through
// their own fronts, and one of them a second target's plan beside it. Each
// ends with the files the planning machine's own resolve places; each blob
// is fetched once per node; NVIDIA sees no request. A node killed
// mid-pull resumes where it stopped; a blob tampered with in the
// registry's storage is refused by its digest, and nothing is placed.
func TestFleetThroughRegistry(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	nv := fleetStandIn(t, 2<<20)
	work := t.TempDir()
	admin := newFleetNode(t, reg, appTree(t))
	adminEnv := append(admin.env, "CUDADEPS_CATALOG="+nv.Catalog)

	r := runBinary(t, adminEnv, "", "resolve", admin.tree, "--dry-run", "--json", "--mirror", nv.URL, "--ld-library-path", "")
	if r.code != exitMissing {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	planFile := filepath.Join(work, "plan.json")
	if err := os.WriteFile(planFile, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	var ps planSteps
	if err := json.Unmarshal([]byte(r.stdout), &ps); err != nil || len(ps.Rounds) == 0 || len(ps.Rounds[0].Plan.Steps) != 2 {
		t.Fatalf("plan: %v\n%s", err, r.stdout)
	}
	steps := ps.Rounds[0].Plan.Steps

	r = runBinary(t, adminEnv, "", "mirror", "--plan", planFile, "--to", admin.ref("/fleet/app:v1"), "--json", "--quiet", "--mirror", nv.URL)
	if r.code != exitOK {
		t.Fatalf("push: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var pushed pushResult
	if err := json.Unmarshal([]byte(r.stdout), &pushed); err != nil || pushed.Schema != schemaPush || len(pushed.Files) != 2 {
		t.Fatalf("push result: %v\n%s", err, r.stdout)
	}
	for i, s := range steps {
		if f := pushed.Files[i]; f.Digest != "sha256:"+s.SHA256 || f.Size != s.Size || !f.Uploaded {
			t.Fatalf("pushed %+v for %+v", f, s)
		}
	}
	uploads := admin.front.Count("POST", "/blobs/uploads/")
	r = runBinary(t, adminEnv, "", "mirror", "--plan", planFile, "--to", admin.ref("/fleet/app:v1"), "--quiet", "--mirror", nv.URL)
	if r.code != exitOK || strings.Count(r.stdout, "in the registry already") != 2 || admin.front.Count("POST", "/blobs/uploads/") != uploads {
		t.Fatalf("second push: exit %d, %d uploads\n%s%s", r.code, admin.front.Count("POST", "/blobs/uploads/")-uploads, r.stdout, r.stderr)
	}
	// The second target, made by mirror itself, under its own tag.
	tool := toolTree(t)
	r = runBinary(t, adminEnv, "", "mirror", "--target", tool, "--to", admin.ref("/fleet/app:tools"), "--quiet", "--mirror", nv.URL, "--ld-library-path", "")
	if r.code != exitOK || !strings.Contains(r.stdout, "libcudss 0.9.9.9 (linux-x86_64, cuda13)") || !strings.Contains(r.stdout, "in the registry already") {
		t.Fatalf("push of the second target: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// For reference, the planning machine carries its plan out itself.
	r = runBinary(t, adminEnv, "", "resolve", admin.tree, "--yes", "--mirror", nv.URL, "--prefix", admin.prefix, "--ld-library-path", "", "--quiet")
	if r.code != exitOK {
		t.Fatalf("resolve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := tree(t, admin.tree, map[string]string{admin.prefix: "PREFIX"})
	store := tree(t, admin.prefix, nil)
	nv.Forbid(t)

	const nodes = 6
	fleet := make([]*fleetNode, nodes)
	for i := range fleet {
		fleet[i] = newFleetNode(t, reg, appTree(t))
	}
	toolPrefix := filepath.Join(t.TempDir(), "prefix")
	results := make([]cliResult, nodes)
	var toolResult cliResult
	var wg sync.WaitGroup
	for i, n := range fleet {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runBinary(t, n.env, "", n.applyArgs("/fleet/app:v1", "--json")...)
		}()
	}
	// Node 0 applies the second target's plan at the same time, into
	// another prefix but through the same download cache.
	wg.Add(1)
	go func() {
		defer wg.Done()
		toolResult = runBinary(t, fleet[0].env, "", "apply", fleet[0].ref("/fleet/app:tools"), tool, "--prefix", toolPrefix, "--ld-library-path", "", "--quiet")
	}()
	wg.Wait()
	if toolResult.code != exitOK {
		t.Fatalf("node 0, second target: exit %d\n%s%s", toolResult.code, toolResult.stdout, toolResult.stderr)
	}
	for i, n := range fleet {
		r := results[i]
		var res struct {
			Schema   string `json:"schema"`
			Artifact struct {
				Reference string `json:"reference"`
			} `json:"artifact"`
			Pulled struct {
				Files []struct {
					Digest string `json:"digest"`
				} `json:"files"`
			} `json:"pulled"`
			Resolve struct {
				OK bool `json:"ok"`
			} `json:"resolve"`
		}
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &res) != nil || !res.Resolve.OK || res.Schema != schemaApply ||
			!strings.HasSuffix(res.Artifact.Reference, "@"+pushed.Manifest.Digest) || len(res.Pulled.Files) != 2 {
			t.Fatalf("node %d: exit %d\n%s%s", i, r.code, r.stdout, r.stderr)
		}
		sameTree(t, fmt.Sprintf("the placed files (the planning machine and node %d)", i), want, tree(t, n.tree, map[string]string{n.prefix: "PREFIX"}))
		sameTree(t, fmt.Sprintf("the stores (the planning machine and node %d)", i), store, tree(t, n.prefix, nil))
		gets := n.front.BlobGets()
		for _, s := range steps {
			if got := gets["sha256:"+s.SHA256]; got != 1 {
				t.Errorf("node %d fetched the blob of %s %d times, want once (both targets take it on node 0)", i, s.Component, got)
			}
		}
	}
	if _, err := os.Lstat(filepath.Join(tool, "tool/lib/libcudss.so.0")); err != nil {
		t.Fatalf("the second target's library is not placed: %v", err)
	}

	t.Run("killed mid-pull, resumed", func(t *testing.T) {
		n := newFleetNode(t, reg, appTree(t))
		big := steps[1]
		if big.Component != "libcutensor" {
			t.Fatalf("step 2 is %s", big.Component)
		}
		reached := n.front.Hold("sha256:"+big.SHA256, big.Size/2)
		cmd := exec.Command(binary(t), n.applyArgs("/fleet/app:v1")...)
		cmd.Env = n.env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		part := filepath.Join(n.cache(), "archives", big.SHA256+".part")
		select {
		case <-reached:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("the pull never reached half of the blob\n%s", out.String())
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if st, err := os.Stat(part); err == nil && st.Size() > 0 {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("no partial download at %s\n%s", part, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		n.front.Release("sha256:" + big.SHA256)
		if _, err := os.Lstat(filepath.Join(n.tree, "app/lib/libcudss.so.0")); err == nil {
			t.Fatal("the killed run placed a library before its pull was whole")
		}
		r := runBinary(t, n.env, "", n.applyArgs("/fleet/app:v1")...)
		if r.code != exitOK {
			t.Fatalf("the rerun: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		sameTree(t, "the placed files (the planning machine and the resumed node)", want, tree(t, n.tree, map[string]string{n.prefix: "PREFIX"}))
		var ranges []string
		for _, q := range n.front.Requests() {
			if strings.HasSuffix(q.Path, "/blobs/sha256:"+big.SHA256) && q.Method == "GET" {
				ranges = append(ranges, q.Range)
			}
		}
		var from int64
		if len(ranges) != 2 || ranges[0] != "" || fmtSscanf(ranges[1], "bytes=%d-", &from) != nil || from <= 0 || from > big.Size/2 {
			t.Fatalf("the blob's GETs had the ranges %q: want a whole one, then one from where the first stopped", ranges)
		}
	})

	t.Run("tampered blob", func(t *testing.T) {
		victim := steps[0]
		blob := reg.BlobFile(victim.SHA256)
		data, err := os.ReadFile(blob)
		if err != nil {
			t.Fatal(err)
		}
		bad := bytes.Clone(data)
		bad[len(bad)/2] ^= 0x55
		if err := os.WriteFile(blob, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := os.WriteFile(blob, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}()
		n := newFleetNode(t, reg, appTree(t))
		r := runBinary(t, n.env, "", n.applyArgs("/fleet/app:v1")...)
		if r.code != exitError || !strings.Contains(r.stderr, "sha256 mismatch: expected "+victim.SHA256) || !strings.Contains(r.stderr, "/blobs/sha256:"+victim.SHA256) {
			t.Fatalf("apply of a tampered blob: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, lib := range []string{"libcudss.so.0", "libcutensor.so.2"} {
			if _, err := os.Lstat(filepath.Join(n.tree, "app/lib", lib)); err == nil {
				t.Errorf("%s was placed although a blob was refused", lib)
			}
		}
	})
}

func fmtSscanf(s, format string, v ...any) error {
	_, err := fmt.Sscanf(s, format, v...)
	return err
}
