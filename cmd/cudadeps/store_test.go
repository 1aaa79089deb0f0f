package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/fetch"
)

// installForTest installs a small archive under each key into the store at
// prefix, through the fetch package, from a file:// URL.
func installForTest(t *testing.T, prefix string, keys ...fetch.Key) []fetch.Entry {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"top/lib/libfoo.so.1", "top/include/foo.h"} {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 3})
		tw.Write([]byte("foo"))
	}
	tw.WriteHeader(&tar.Header{Name: "top/lib/libfoo.so", Typeflag: tar.TypeSymlink, Linkname: "libfoo.so.1"})
	tw.Close()
	p := filepath.Join(t.TempDir(), "foo.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	req := fetch.Request{Name: "foo", URL: "file://" + p, SHA256: hex.EncodeToString(sum[:]), Size: int64(buf.Len())}
	c, err := fetch.NewClient(fetch.Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := fetch.OpenStore(prefix)
	if err != nil {
		t.Fatal(err)
	}
	var items []fetch.Item
	for _, k := range keys {
		items = append(items, fetch.Item{Key: k, Request: req})
	}
	es, err := s.Install(context.Background(), c, items)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

var (
	cudssSBSA = fetch.Key{Component: "libcudss", Version: "0.8.0.10", Platform: "linux-sbsa", Variant: "cuda13"}
	cudssX86  = fetch.Key{Component: "libcudss", Version: "0.8.0.10", Platform: "linux-x86_64", Variant: "cuda13"}
	cudart    = fetch.Key{Component: "cuda_cudart", Version: "13.0.96", Platform: "linux-sbsa"}
)

func TestStoreList(t *testing.T) {
	prefix := t.TempDir()
	code, out, _ := runCLI(t, "store", "list", "--prefix", prefix)
	if code != 0 || !strings.Contains(out, "no components installed in "+prefix) {
		t.Fatalf("empty store: code %d, %q", code, out)
	}
	es := installForTest(t, prefix, cudssSBSA, cudart)
	code, out, errOut := runCLI(t, "store", "list", "--prefix", prefix)
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "COMPONENT") {
		t.Fatalf("unexpected table:\n%s", out)
	}
	for i, want := range [][]string{
		{"cuda_cudart", "13.0.96", "linux-sbsa", " - ", es[1].Dir},
		{"libcudss", "0.8.0.10", "linux-sbsa", "cuda13", es[0].Dir},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("row %q lacks %q", lines[i+1], w)
			}
		}
	}
}

func TestStoreListJSON(t *testing.T) {
	prefix := t.TempDir()
	es := installForTest(t, prefix, cudssSBSA)
	code, out, errOut := runCLI(t, "store", "list", "--prefix", prefix, "--json")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var got struct {
		Schema  string `json:"schema"`
		Store   string `json:"store"`
		Entries []struct {
			Component, Version, Platform, Variant, Dir, URL, SHA256, Layout string
			Size                                                            int64
			InstalledAt                                                     string `json:"installed_at"`
			Files                                                           []string
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if got.Schema != schemaStoreList || got.Store != prefix || len(got.Entries) != 1 {
		t.Fatalf("got %+v", got)
	}
	e := got.Entries[0]
	if e.Component != "libcudss" || e.Version != "0.8.0.10" || e.Platform != "linux-sbsa" || e.Variant != "cuda13" ||
		e.Dir != es[0].Dir || e.SHA256 != es[0].SHA256 || e.Layout != "redist" || e.InstalledAt == "" ||
		strings.Join(e.Files, ",") != "include/foo.h,lib/libfoo.so,lib/libfoo.so.1" {
		t.Errorf("entry %+v", e)
	}
}

func TestStoreRemove(t *testing.T) {
	prefix := t.TempDir()
	es := installForTest(t, prefix, cudssSBSA, cudssX86, cudart)
	// An argument that matches nothing: nothing is removed, exit 1.
	code, _, errOut := runCLI(t, "store", "remove", "--prefix", prefix, "libcudss", "libcudss@9.9")
	if code != 1 || !strings.Contains(errOut, "libcudss 9.9 is not installed") {
		t.Fatalf("code %d, %q", code, errOut)
	}
	for _, e := range es {
		if _, err := os.Stat(e.Dir); err != nil {
			t.Fatalf("removed despite the error: %v", err)
		}
	}
	// Narrowed by platform.
	code, out, errOut := runCLI(t, "store", "remove", "--prefix", prefix, "--platform", "linux-x86_64", "libcudss")
	if code != 0 || !strings.Contains(out, "removed libcudss 0.8.0.10 (linux-x86_64, cuda13)") {
		t.Fatalf("code %d, %q, %q", code, out, errOut)
	}
	if _, err := os.Stat(es[1].Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists", es[1].Dir)
	}
	if _, err := os.Stat(es[0].Dir); err != nil {
		t.Errorf("the sbsa entry went too: %v", err)
	}
	// All versions of the rest, as JSON.
	code, out, errOut = runCLI(t, "store", "remove", "--prefix", prefix, "--json", "libcudss@0.8.0.10", "cuda_cudart")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var got struct {
		Removed []struct{ Component, Dir string } `json:"removed"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Removed) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
	code, out, _ = runCLI(t, "store", "list", "--prefix", prefix)
	if code != 0 || !strings.Contains(out, "no components installed") {
		t.Errorf("after removing all: %q", out)
	}
}

func TestStoreUsage(t *testing.T) {
	for _, args := range [][]string{
		{"store"},
		{"store", "frobnicate"},
		{"store", "list", "extra"},
		{"store", "remove"},
		{"store", "remove", "@1.0"},
		{"store", "list", "--no-such-flag"},
		{"store", "remove", "--cuda", "twelve", "x"},
	} {
		if code, _, errOut := runCLI(t, append(args, "--prefix", t.TempDir())...); code != 2 || errOut == "" {
			t.Errorf("%q: code %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
}
