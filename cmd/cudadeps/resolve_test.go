package main

import (
	"debug/elf"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/resolver"
)

// TestResolveDirectoryCLI drives resolve on a directory through the command
// line: dry run (exit 3, nothing written), resolve (exit 0), scan clean,
// second resolve downloads nothing, undo restores the directory.
func TestResolveDirectoryCLI(t *testing.T) {
	dir := t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libapp.so"), elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libcudss.so.0", "libcudart.so.13", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN:$ORIGIN/../deps")}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libcudart.so.13"), elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	m := mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}}, Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}}})
	prefix := filepath.Join(t.TempDir(), "prefix")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	common := []string{"--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", "", "--quiet"}

	code, stdout, stderr := runCLI(t, append([]string{"resolve", dir, "--dry-run", "--json"}, common...)...)
	if code != exitMissing {
		t.Fatalf("dry run: exit %d\n%s%s", code, stdout, stderr)
	}
	var plan struct {
		DryRun bool `json:"dry_run"`
		Rounds []struct {
			Plan struct {
				Steps []struct {
					Component string `json:"component"`
					Provides  []string
				} `json:"steps"`
			} `json:"plan"`
		} `json:"rounds"`
	}
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil {
		t.Fatalf("dry run JSON: %v\n%s", err, stdout)
	}
	if !plan.DryRun || len(plan.Rounds) != 1 || len(plan.Rounds[0].Plan.Steps) != 1 || plan.Rounds[0].Plan.Steps[0].Component != "libcudss" {
		t.Fatalf("dry run plan: %s", stdout)
	}
	if _, err := os.Stat(prefix); err == nil || m.Total() != 0 {
		t.Fatalf("the dry run wrote the prefix or downloaded")
	}

	code, stdout, stderr = runCLI(t, append([]string{"resolve", dir, "--yes"}, common...)...)
	if code != exitOK || !strings.Contains(stdout, "Done") {
		t.Fatalf("resolve: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Lstat(filepath.Join(dir, "app/lib/libcudss.so.0")); err != nil {
		t.Fatalf("libcudss.so.0 not placed beside libapp.so (its RUNPATH $ORIGIN): %v", err)
	}
	if code, stdout, _ := runCLI(t, "scan", "--ld-library-path", "", dir); code != exitOK {
		t.Fatalf("scan after resolve: exit %d\n%s", code, stdout)
	}
	hits := m.Total()
	if code, _, _ := runCLI(t, append([]string{"resolve", dir, "--yes"}, common...)...); code != exitOK || m.Total() != hits {
		t.Fatalf("second resolve: exit %d, %d more downloads", code, m.Total()-hits)
	}
	code, stdout, stderr = runCLI(t, "undo", dir, "--prefix", prefix)
	if code != exitOK {
		t.Fatalf("undo: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Lstat(filepath.Join(dir, "app/lib/libcudss.so.0")); err == nil {
		t.Fatalf("undo left libcudss.so.0")
	}
	if code, _, _ := runCLI(t, "scan", "--ld-library-path", "", dir); code != exitMissing {
		t.Fatalf("after undo, scan should find libcudss.so.0 missing again")
	}
}

func TestFetchCommand(t *testing.T) {
	m := mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-sbsa", Variant: "cuda13", Machine: elf.EM_AARCH64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0": {Soname: "libcudss.so.0"}}}})
	prefix := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	code, stdout, stderr := runCLI(t, "fetch", "libcudss", "--platform", "linux-sbsa", "--cuda", "13", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--json", "--quiet")
	if code != exitOK || !strings.Contains(stdout, `"version": "0.9.9.9"`) {
		t.Fatalf("fetch: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "fetch", "nvpl_lapack", "--platform", "linux-x86_64", "--prefix", prefix)
	if code != exitMissing || !strings.Contains(stderr, "linux-sbsa") {
		t.Fatalf("NVPL on x86_64: exit %d, %s", code, stderr)
	}
	if code, _, _ := runCLI(t, "fetch", "nosuchthing", "--platform", "linux-sbsa", "--prefix", prefix); code != exitMissing {
		t.Fatalf("unknown component: exit %d", code)
	}
}

// TestResolveExampleWheel plans the demo wheel against the built-in catalog,
// offline, on any machine: the three libraries its library needs and
// nothing in it provides.
func TestResolveExampleWheel(t *testing.T) {
	code, stdout, stderr := runCLI(t, "resolve", "../../examples/demo-0.1-py3-none-linux_x86_64.whl", "--dry-run", "--json")
	if code != exitMissing {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	var out struct {
		Platform  string `json:"platform"`
		CUDAMajor int    `json:"cuda_major"`
		Rounds    []struct {
			Plan struct {
				Steps []struct {
					Component string   `json:"component"`
					URL       string   `json:"url"`
					Provides  []string `json:"provides"`
				} `json:"steps"`
			} `json:"plan"`
		} `json:"rounds"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	var comps []string
	for _, s := range out.Rounds[0].Plan.Steps {
		comps = append(comps, s.Component)
		if !strings.HasPrefix(s.URL, "https://developer.download.nvidia.com/compute/") {
			t.Errorf("%s: URL %s", s.Component, s.URL)
		}
	}
	slices.Sort(comps)
	if out.Platform != "linux-x86_64" || out.CUDAMajor != 13 || strings.Join(comps, ",") != "cuda_cudart,libcublas,libcudss" {
		t.Fatalf("plan: %s", stdout)
	}
}

// TestResolveCheckCLI drives --check on a directory that lacks nothing: the
// exit status says whether it ran (0), failed naming a library still
// missing (3) or failed otherwise (1, with a command to rerun it).
func TestResolveCheckCLI(t *testing.T) {
	dir := t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "lib/libapp.so"), elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	m := mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0": {Soname: "libcudss.so.0"}}}})
	prefix := filepath.Join(t.TempDir(), "prefix")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	resolve := func(extra ...string) (int, string, string) {
		return runCLI(t, append([]string{"resolve", dir, "--yes", "--quiet", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", "", "--cuda", "13"}, extra...)...)
	}

	code, stdout, stderr := resolve("--check", `echo "ok: first"; echo "ok: second"`)
	if code != exitOK || !strings.Contains(stdout, "Check: echo") || !strings.Contains(stdout, "→ ok (2 ok, 0 failed, 0 skipped)") {
		t.Fatalf("passing check: exit %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = resolve("--check", `echo "FAILED: my step: ValueError: bad"; exit 1`)
	if code != exitError || !strings.Contains(stdout, "FAILED my step: ValueError: bad") || !strings.Contains(stdout, "rerun it with: sh -c ") || !strings.Contains(stdout, "Not done (the run-time check fails)") {
		t.Fatalf("failing check: exit %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr = resolve("--json", "--check", `echo "OSError: libnothing.so.4: cannot open shared object file: No such file or directory" >&2; exit 1`)
	if code != exitMissing {
		t.Fatalf("check naming a library: exit %d\n%s%s", code, stdout, stderr)
	}
	var out struct {
		OK     bool `json:"ok"`
		Rounds []struct {
			Missing []struct {
				Soname   string   `json:"soname"`
				NeededBy []string `json:"needed_by"`
			} `json:"missing"`
		} `json:"rounds"`
		Verify struct {
			OK       bool `json:"ok"`
			ImportOK bool `json:"import_ok"`
			Probes   []struct {
				Name      string `json:"name"`
				ExitCode  int    `json:"exit_code"`
				Reproduce string `json:"reproduce"`
				Failures  []struct {
					Library string `json:"library"`
					Kind    string `json:"kind"`
				} `json:"failures"`
			} `json:"probes"`
		} `json:"verify"`
		Optional []any `json:"optional"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if out.OK || len(out.Rounds) != 2 || len(out.Rounds[1].Missing) != 1 || out.Rounds[1].Missing[0].Soname != "libnothing.so.4" ||
		!strings.HasPrefix(out.Rounds[1].Missing[0].NeededBy[0], "check: ") || out.Verify.OK || !out.Verify.ImportOK ||
		len(out.Verify.Probes) != 1 || out.Verify.Probes[0].Failures[0].Library != "libnothing.so.4" || out.Optional == nil {
		t.Fatalf("JSON: %s", stdout)
	}

	if code, _, stderr := resolve("--check", "true", "--no-verify"); code != exitUsage {
		t.Fatalf("--check with --no-verify: exit %d %s", code, stderr)
	}
	if code, _, stderr := resolve("--check", "true", "--check-timeout", "0s"); code != exitUsage {
		t.Fatalf("--check-timeout 0: exit %d %s", code, stderr)
	}
	code, stdout, _ = resolve("--check", "sleep 30", "--check-timeout", "1s")
	if code != exitError || !strings.Contains(stdout, "killed after 1s") {
		t.Fatalf("timed out check: exit %d\n%s", code, stdout)
	}
}

func TestRenderOptional(t *testing.T) {
	var b strings.Builder
	renderOptional(&b, []resolver.OptionalLib{
		{Soname: "libcutensor.so.2", For: []string{"cupy_backends.cuda.libs.cutensor", "cupyx._cutensor"}, Feature: "cuTENSOR", Install: "cutensor-cu13"},
		{Soname: "libibverbs.so.1", For: []string{"libnccl.so.2"}, RunTime: true},
		{Soname: "libtpu.so", For: []string{"libjax_common.so"}, RunTime: true},
	})
	want := "\noptional: libcutensor.so.2 for cupy_backends.cuda.libs.cutensor, cupyx._cutensor (cuTENSOR); install cutensor-cu13 to enable\n" +
		"optional, opened at run time when present: libibverbs.so.1, libtpu.so\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	renderOptional(&b, nil)
	if b.Len() != 0 {
		t.Errorf("nothing optional printed %q", b.String())
	}
}
