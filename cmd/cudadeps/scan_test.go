package main

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// runCmd runs one command line in-process.
func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// torchLikeTree writes a small site-packages in the shape of torch and the
// nvidia wheels: torch/lib/libtorch_cuda.so finds libcudart through an
// $ORIGIN-relative RPATH into nvidia/cu13/lib, and needs a cuDSS that is
// not installed.
func torchLikeTree(t *testing.T, dir string, withCudss bool) {
	t.Helper()
	objs := map[string]elfwrite.Spec{
		"torch/lib/libtorch_cuda.so": {Soname: "libtorch_cuda.so", Needed: []string{"libc10.so", "libcudart.so.13", "libcudss.so.0", "libc.so.6"},
			RPath: elfwrite.Str("$ORIGIN/../../nvidia/cu13/lib:$ORIGIN")},
		"torch/lib/libc10.so":             {Soname: "libc10.so", Needed: []string{"libc.so.6"}},
		"nvidia/cu13/lib/libcudart.so.13": {Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}},
	}
	if withCudss {
		objs["nvidia/cu13/lib/libcudss.so.0"] = elfwrite.Spec{Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}
	}
	for p, s := range objs {
		if err := elfwrite.Write(filepath.Join(dir, p), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "torch", "__init__.py"), []byte("import os\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestScanTreeJSONAndExitCodes(t *testing.T) {
	dir := t.TempDir()
	torchLikeTree(t, dir, false)
	stdout, stderr, code := runCmd(t, "scan", "--json", "--ld-library-path", "", dir)
	if code != exitMissing {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitMissing, stderr)
	}
	var rep struct {
		Roots []struct {
			Path    string `json:"path"`
			OK      bool   `json:"ok"`
			Closure []struct {
				Soname   string   `json:"soname"`
				Path     *string  `json:"path"`
				Via      string   `json:"via"`
				NeededBy []string `json:"needed_by"`
			} `json:"closure"`
		} `json:"roots"`
		Missing []struct {
			Soname   string   `json:"soname"`
			NeededBy []string `json:"needed_by"`
		} `json:"missing"`
		VersionErrors []any `json:"version_errors"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, stdout)
	}
	if len(rep.Roots) != 3 {
		t.Fatalf("%d roots, want 3 (the three libraries)", len(rep.Roots))
	}
	if len(rep.Missing) != 1 || rep.Missing[0].Soname != "libcudss.so.0" || len(rep.Missing[0].NeededBy) != 1 ||
		rep.Missing[0].NeededBy[0] != filepath.Join(dir, "torch/lib/libtorch_cuda.so") {
		t.Fatalf("missing = %+v", rep.Missing)
	}
	for _, r := range rep.Roots {
		if !strings.HasSuffix(r.Path, "libtorch_cuda.so") {
			continue
		}
		var order []string
		for _, c := range r.Closure {
			order = append(order, c.Soname+":"+c.Via)
			if c.Soname == "libcudss.so.0" && c.Path != nil {
				t.Errorf("libcudss.so.0 has a path")
			}
		}
		got := strings.Join(order, " ")
		if !strings.HasPrefix(got, "libc10.so:rpath libcudart.so.13:rpath libcudss.so.0:not_found libc.so.6:") {
			t.Errorf("closure order/vias = %s", got)
		}
	}

	// With cuDSS present everything resolves: exit 0.
	torchLikeTree(t, dir, true)
	if _, stderr, code := runCmd(t, "scan", dir); code != exitOK {
		t.Fatalf("exit %d with everything present; stderr: %s", code, stderr)
	}
}

func TestScanWheelWithoutUnpacking(t *testing.T) {
	src := t.TempDir()
	torchLikeTree(t, src, false)
	// Pack the tree as a wheel (deflated members, like pip's).
	whl := filepath.Join(t.TempDir(), "torch-2.11.0-cp312-cp312-linux_x86_64.whl")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	_ = filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		w, err := zw.CreateHeader(&zip.FileHeader{Name: filepath.ToSlash(rel), Method: zip.Deflate})
		if err != nil {
			return err
		}
		data, _ := os.ReadFile(p)
		_, err = w.Write(data)
		return err
	})
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(whl, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCmd(t, "scan", "--json", whl)
	if code != exitMissing {
		t.Fatalf("exit %d; stderr %s", code, stderr)
	}
	if !strings.Contains(stdout, `"soname": "libcudss.so.0"`) || !strings.Contains(stdout, "/site-packages/nvidia/cu13/lib/libcudart.so.13") {
		t.Fatalf("wheel scan did not resolve inside the wheel or did not report cuDSS:\n%s", stdout)
	}
	// A wheel's members are not bound, and the report says so for each,
	// the second time too: no answer kept for the host's files stands in
	// for theirs.
	var rep struct {
		Roots []struct {
			Path            string `json:"path"`
			SymbolsNotBound string `json:"symbols_not_bound"`
		} `json:"roots"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Roots) == 0 {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	for _, r := range rep.Roots {
		if !strings.HasPrefix(r.SymbolsNotBound, "a wheel's member (") {
			t.Errorf("%s: symbols_not_bound %q", r.Path, r.SymbolsNotBound)
		}
	}
	if again, _, _ := runCmd(t, "scan", "--json", whl); again != stdout {
		t.Fatalf("the second scan of the wheel differs:\n%s\nfirst:\n%s", again, stdout)
	}
	if text, _, _ := runCmd(t, "scan", whl); !strings.Contains(text, fmt.Sprintf("Symbols not bound in %d object(s)", len(rep.Roots))) {
		t.Errorf("the text does not say the symbols were not bound:\n%s", text)
	}
	// The wheel checked against a real site-packages that has cuDSS: clean.
	site := t.TempDir()
	if err := elfwrite.Write(filepath.Join(site, "nvidia/cu13/lib/libcudss.so.0"), elfwrite.Spec{Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := runCmd(t, "scan", "--site-packages", site, whl); code != exitOK {
		t.Fatalf("wheel over a site-packages with cuDSS: exit %d; stderr %s\n%s", code, stderr, stdout)
	}
}

func TestWhyExplainsAMiss(t *testing.T) {
	dir := t.TempDir()
	torchLikeTree(t, dir, false)
	lib := filepath.Join(dir, "torch/lib/libtorch_cuda.so")
	stdout, _, code := runCmd(t, "why", "libcudss.so.0", "--from", lib, "--ld-library-path", "")
	if code != exitMissing {
		t.Fatalf("exit %d, want 3", code)
	}
	for _, want := range []string{"RPATH of " + lib, dir + "/torch/lib/../../nvidia/cu13/lib/libcudss.so.0", "no such file", "ld.so.cache", "Not found"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("why output lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, code = runCmd(t, "why", "libcudart.so.13", "--from", lib, "--json")
	if code != exitOK {
		t.Fatalf("exit %d, want 0", code)
	}
	var r struct {
		Found *struct {
			Path, Via, Entry string
		} `json:"found"`
		Steps []struct{ Outcome string } `json:"steps"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	if r.Found == nil || r.Found.Via != "rpath" || r.Found.Entry != "$ORIGIN/../../nvidia/cu13/lib" {
		t.Fatalf("found = %+v", r.Found)
	}
	if _, _, code := runCmd(t, "why", "libx.so"); code != exitUsage {
		t.Errorf("why without --from: exit %d, want 2", code)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"scan"}, {"scan", "--bogus", "x"}, {"nosuchcommand"}} {
		if _, _, code := runCmd(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	_, stderr, code := runCmd(t, "scan", "/nonexistent/file.so")
	if code != exitError || !strings.Contains(stderr, "/nonexistent/file.so") {
		t.Errorf("missing file: exit %d, stderr %q", code, stderr)
	}
}

func TestScanForeignMachineWarns(t *testing.T) {
	dir := t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "libarm.so"), elfwrite.Spec{Machine: elf.EM_AARCH64, Soname: "libarm.so", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runCmd(t, "scan", filepath.Join(dir, "libarm.so"))
	if code != exitMissing || !strings.Contains(stdout, "warning: objects built for aarch64") || !strings.Contains(stdout, "--root") {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
}

// TestArgumentErrorsAreUsageErrors covers every command's argument check.
func TestArgumentErrorsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"catalog", "which"}, {"catalog", "list", "extra"}, {"why"}, {"resolve"}, {"fetch"}} {
		if _, stderr, code := runCmd(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d (%s), want 2", args, code, stderr)
		}
	}
}
