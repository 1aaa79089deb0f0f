package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/registrytest"
)

// pushPlan plans tree against the stand-in and pushes the plan to path
// in the registry (through the admin's front); it returns the plan file.
func pushPlan(t *testing.T, admin *fleetNode, env []string, nvURL, tree, path string, extra ...string) string {
	t.Helper()
	r := runBinary(t, env, "", append([]string{"resolve", tree, "--dry-run", "--json", "--mirror", nvURL, "--ld-library-path", ""}, extra...)...)
	if r.code != exitMissing {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runBinary(t, env, "", "mirror", "--plan", planFile, "--to", admin.ref(path), "--quiet", "--mirror", nvURL)
	if r.code != exitOK {
		t.Fatalf("push: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return planFile
}

// TestResolveAndFetchFromRegistry: --mirror oci://HOST/REPOSITORY makes
// the registry the mirror of resolve and fetch: the archives the catalog
// names come as the blobs of their sha256, with the login, and NVIDIA sees
// no request; an archive the registry lacks is named.
func TestResolveAndFetchFromRegistry(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	nv := fleetStandIn(t, 64<<10)
	admin := newFleetNode(t, reg, appTree(t))
	pushPlan(t, admin, append(admin.env, "CUDADEPS_CATALOG="+nv.Catalog), nv.URL, admin.tree, "/fleet/app:v1")
	nv.Forbid(t)

	n := newFleetNode(t, reg, appTree(t))
	env := append(n.env, "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR="+n.ref("/fleet/app"))
	r := runBinary(t, env, "", "resolve", n.tree, "--yes", "--prefix", n.prefix, "--ld-library-path", "", "--quiet", "--json")
	if r.code != exitOK || !strings.Contains(r.stdout, `"url": "oci://`+n.front.Host+`/fleet/app/libcudss/linux-x86_64/`) {
		t.Fatalf("resolve --mirror oci://: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if gets := n.front.BlobGets(); len(gets) != 2 {
		t.Fatalf("blobs fetched: %v, want the two archives once each", gets)
	}
	r = runBinary(t, env, "", "fetch", "libcudss@0.9.9.9", "--platform", "linux-x86_64", "--cuda", "13", "--prefix", filepath.Join(t.TempDir(), "p"), "--mirror", n.ref("/fleet/app:v1"), "--quiet")
	if r.code != exitOK || !strings.Contains(r.stdout, "libcudss 0.9.9.9 (linux-x86_64, cuda13)") {
		t.Fatalf("fetch --mirror oci://...:TAG: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Another repository lacks the blob: said, with the archive's name (a
	// fresh download cache, since the cache serves any URL of a sha256).
	r = runBinary(t, append(env, "XDG_CACHE_HOME="+t.TempDir()), "", "fetch", "libcutensor@9.9.9.9", "--platform", "linux-x86_64", "--cuda", "13", "--prefix", filepath.Join(t.TempDir(), "p"), "--mirror", n.ref("/other/repo"), "--quiet")
	if r.code != exitError || !strings.Contains(r.stderr, "/v2/other/repo/blobs/sha256:") || !strings.Contains(r.stderr, "404") {
		t.Fatalf("fetch from a repository without the blob: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// connectProxy is an HTTPS proxy (CONNECT) on 127.0.0.1 that takes every
// host to the registry's port, counting the tunnels it opens.
func connectProxy(t *testing.T, to string) (string, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		n.Add(1)
		up, err := net.Dial("tcp", to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			up.Close()
			return
		}
		_, _ = conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(up, bufio.NewReader(io.MultiReader(buf.Reader, conn)))
			up.(*net.TCPConn).CloseWrite()
		}()
		go func() { defer wg.Done(); _, _ = io.Copy(conn, up); conn.Close() }()
		wg.Wait()
		up.Close()
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// TestApplyThroughProxy: a node that reaches the registry only through
// HTTPS_PROXY (a registry named registry.test, which resolves nowhere but
// at the proxy) applies the plan; every connection went through the proxy.
func TestApplyThroughProxy(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{Names: []string{"registry.test"}})
	nv := fleetStandIn(t, 64<<10)
	admin := newFleetNode(t, reg, appTree(t))
	pushPlan(t, admin, append(admin.env, "CUDADEPS_CATALOG="+nv.Catalog), nv.URL, admin.tree, "/fleet/app:v1")
	nv.Forbid(t)

	proxy, tunnels := connectProxy(t, reg.Host)
	_, port, _ := net.SplitHostPort(reg.Host)
	host := "registry.test:" + port
	tree, prefix := appTree(t), filepath.Join(t.TempDir(), "prefix")
	var env []string
	for _, kv := range nodeEnv(t, "SSL_CERT_FILE="+reg.CA.File, "DOCKER_CONFIG="+reg.DockerConfig(t, host)) {
		if k, _, _ := strings.Cut(kv, "="); !strings.EqualFold(k, "no_proxy") && !strings.EqualFold(k, "https_proxy") {
			env = append(env, kv)
		}
	}
	env = append(env, "HTTPS_PROXY="+proxy)
	r := runBinary(t, env, "", "apply", "oci://"+host+"/fleet/app:v1", tree, "--prefix", prefix, "--ld-library-path", "", "--quiet")
	if r.code != exitOK {
		t.Fatalf("apply through the proxy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if tunnels.Load() == 0 {
		t.Fatal("the proxy opened no tunnel")
	}
	if _, err := os.Lstat(filepath.Join(tree, "app/lib/libcutensor.so.2")); err != nil {
		t.Fatalf("nothing placed: %v", err)
	}
	// Without the proxy, registry.test is nowhere.
	var direct []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HTTPS_PROXY=") {
			direct = append(direct, kv)
		}
	}
	r = runBinary(t, direct, "", "apply", "oci://"+host+"/fleet/app:v1", appTree(t), "--prefix", filepath.Join(t.TempDir(), "p"), "--ld-library-path", "", "--quiet")
	if r.code != exitError || !strings.Contains(r.stderr, "registry.test") {
		t.Fatalf("apply without the proxy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestApplyWheelsFromRegistry: a plan of wheels (--source pypi) pushed to
// the registry is applied from it with the package index forbidden: the
// wheel comes as a blob, is listed in the pulled simple index, and the
// node ends as the planning machine does.
func TestApplyWheelsFromRegistry(t *testing.T) {
	reg := registrytest.Start(t, registrytest.Options{})
	dir, m, ix, wheel := wheelTarget(t)
	fresh := copyTree(t, dir)
	admin := newFleetNode(t, reg, dir)
	pip := []string{"PIP_CONFIG_FILE=" + os.DevNull, "CUDADEPS_CATALOG=" + m.Catalog}
	env := append(append([]string{}, admin.env...), pip...)
	pushPlan(t, admin, env, m.URL, admin.tree, "/fleet/wheels:v1", "--source", "pypi", "--index-url", ix.URL)
	r := runBinary(t, env, "", "resolve", admin.tree, "--yes", "--source", "pypi", "--index-url", ix.URL, "--mirror", m.URL, "--prefix", admin.prefix, "--ld-library-path", "", "--quiet")
	if r.code != exitOK {
		t.Fatalf("resolve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ix.Forbid(t)
	m.Forbid(t)

	n := newFleetNode(t, reg, fresh)
	r = runBinary(t, append(n.env, "PIP_CONFIG_FILE="+os.DevNull), "", n.applyArgs("/fleet/wheels:v1")...)
	if r.code != exitOK || !strings.Contains(r.stdout, wheel.Filename()) {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	sameTree(t, "the placed files", tree(t, admin.tree, map[string]string{admin.prefix: "PREFIX"}), tree(t, n.tree, map[string]string{n.prefix: "PREFIX"}))
	sum := sha256.Sum256(ix.File(wheel.Filename()))
	if gets := n.front.BlobGets(); gets["sha256:"+hex.EncodeToString(sum[:])] != 1 {
		t.Fatalf("the wheel's blob was fetched %d times: %v", gets["sha256:"+hex.EncodeToString(sum[:])], gets)
	}
}

// copyTree copies the directories and regular files of src (a target
// before anything is placed in it) into a new directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		switch {
		case info.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dst, rel), data, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestRegistryUsage: what does not go together is a usage error that says
// what to do instead.
func TestRegistryUsage(t *testing.T) {
	plan := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(plan, []byte(`{"schema":"cudadeps.resolve/v1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := nodeEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", plan, "--mirror", "oci://registry.example/fleet/app"}, "a registry serves its plans with their archives: cudadeps apply oci://registry.example/fleet/app:TAG"},
		{[]string{"mirror", t.TempDir(), "--to", "oci://registry.example/fleet/app:v1", "--plan", plan}, "one of DIR and --to"},
		{[]string{"mirror", "--plan", plan}, "one of DIR and --to"},
		{[]string{"apply", "oci://registry.example/Fleet/App:v1"}, "oci://registry.example/Fleet/App:v1"},
		{[]string{"resolve", "x", "--mirror", "oci://registry.example"}, "oci://HOST/REPOSITORY"},
		{[]string{"catalog", "update", "--mirror", "oci://registry.example/fleet/app"}, "a registry (oci://registry.example/fleet/app) carries the catalog entries"},
	} {
		r := runBinary(t, env, "", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, want %d saying %q\n%s", strings.Join(c.args, " "), r.code, exitUsage, c.want, r.stderr)
		}
	}
}
