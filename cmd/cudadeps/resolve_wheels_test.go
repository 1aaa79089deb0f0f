package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/indextest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
)

// wheelTarget is a directory whose library needs libcudss.so.0 (RUNPATH
// $ORIGIN), a mirror with NVIDIA's libcudss archive, and an index with the
// nvidia-cudss-cu13 wheel of the same release. pip's configuration files
// are out of the way.
func wheelTarget(t *testing.T) (dir string, m *mirrortest.Mirror, ix *indextest.Index, wheel indextest.Wheel) {
	t.Helper()
	t.Setenv("PIP_CONFIG_FILE", os.DevNull)
	t.Setenv("PIP_INDEX_URL", "")
	t.Setenv("PIP_EXTRA_INDEX_URL", "")
	t.Setenv("PIP_NO_INDEX", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir = t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libapp.so"), elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libcudss.so.0", "libcudart.so.13", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libcudart.so.13"), elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	m = mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}}, Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}}})
	lib, err := elfwrite.Build(elfwrite.Spec{Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}})
	if err != nil {
		t.Fatal(err)
	}
	wheel = indextest.Wheel{Project: "nvidia-cudss-cu13", Version: "0.9.9.9", Tags: "py3-none-manylinux_2_17_x86_64",
		Files: map[string][]byte{"nvidia/cu13/lib/libcudss.so.0": lib}}
	ix = indextest.Serve(t, wheel)
	return dir, m, ix, wheel
}

type wheelPlan struct {
	Rounds []struct {
		Plan struct {
			Steps []struct {
				Source    string   `json:"source"`
				Component string   `json:"component"`
				Project   string   `json:"project"`
				Filename  string   `json:"filename"`
				Index     string   `json:"index"`
				URL       string   `json:"url"`
				SHA256    string   `json:"sha256"`
				Size      int64    `json:"size"`
				Provides  []string `json:"provides"`
			} `json:"steps"`
		} `json:"plan"`
	} `json:"rounds"`
}

func parseWheelPlan(t *testing.T, stdout string) wheelPlan {
	t.Helper()
	var p wheelPlan
	if err := json.Unmarshal([]byte(stdout), &p); err != nil || len(p.Rounds) == 0 || len(p.Rounds[0].Plan.Steps) != 1 {
		t.Fatalf("plan JSON (%v):\n%s", err, stdout)
	}
	return p
}

// TestResolveSourcePyPIWithoutIndex: wheels only, and pip's configuration
// names no index: a usage error that says what to do.
func TestResolveSourcePyPIWithoutIndex(t *testing.T) {
	dir, m, _, _ := wheelTarget(t)
	code, stdout, stderr := runCLI(t, "resolve", dir, "--source", "pypi", "--catalog", m.Catalog, "--mirror", m.URL, "--ld-library-path", "", "--dry-run")
	if code != exitUsage || !strings.Contains(stderr, "no package index is configured") || !strings.Contains(stderr, "--index-url") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCLI(t, "resolve", dir, "--source", "conda", "--dry-run"); code != exitUsage || !strings.Contains(stderr, "--source") {
		t.Fatalf("--source conda: exit %d, %s", code, stderr)
	}
}

// TestResolveWheelsFromPipIndexURL: PIP_INDEX_URL names the index. With
// --source pypi the library no pin names comes as the wheel the
// distribution table names for its component, shown in the plan with its
// source, project, file and index; it is installed from the index alone
// and linked where the loader searches. --index-url overrides the
// environment, and auto, with nothing pinned, keeps to NVIDIA's archives.
func TestResolveWheelsFromPipIndexURL(t *testing.T) {
	dir, m, ix, wheel := wheelTarget(t)
	prefix := filepath.Join(t.TempDir(), "prefix")
	common := []string{"--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", "", "--quiet"}
	t.Setenv("PIP_INDEX_URL", ix.URL)

	code, stdout, stderr := runCLI(t, append([]string{"resolve", dir, "--source", "pypi", "--dry-run", "--json"}, common...)...)
	if code != exitMissing {
		t.Fatalf("dry run: exit %d\n%s%s", code, stdout, stderr)
	}
	data := ix.File(wheel.Filename())
	sum := sha256.Sum256(data)
	st := parseWheelPlan(t, stdout).Rounds[0].Plan.Steps[0]
	if st.Source != "pypi" || st.Project != "nvidia-cudss-cu13" || st.Filename != wheel.Filename() || st.Index != ix.URL ||
		st.SHA256 != hex.EncodeToString(sum[:]) || st.Size != int64(len(data)) || !strings.HasPrefix(st.URL, strings.TrimSuffix(ix.URL, "simple/")) {
		t.Fatalf("step %+v", st)
	}

	code, stdout, stderr = runCLI(t, append([]string{"resolve", dir, "--source", "pypi", "--dry-run"}, common...)...)
	if code != exitMissing || !strings.Contains(stdout, "wheel "+wheel.Filename()) {
		t.Fatalf("text plan: exit %d\n%s%s", code, stdout, stderr)
	}

	// The flag wins over the environment, as with pip.
	t.Setenv("PIP_INDEX_URL", "http://127.0.0.1:1/simple/")
	code, stdout, stderr = runCLI(t, append([]string{"resolve", dir, "--source", "pypi", "--index-url", ix.URL, "--dry-run", "--json"}, common...)...)
	if code != exitMissing || parseWheelPlan(t, stdout).Rounds[0].Plan.Steps[0].Filename != wheel.Filename() {
		t.Fatalf("--index-url: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Setenv("PIP_INDEX_URL", ix.URL)

	code, stdout, stderr = runCLI(t, append([]string{"resolve", dir, "--dry-run", "--json"}, common...)...)
	if st := parseWheelPlan(t, stdout).Rounds[0].Plan.Steps[0]; code != exitMissing || st.Source != "nvidia" || st.Component != "libcudss" {
		t.Fatalf("auto with nothing pinned: exit %d, step %+v\n%s", code, st, stderr)
	}
	if m.Total() != 0 || ix.Downloads() != 0 {
		t.Fatalf("dry runs downloaded: %d from the mirror, %d from the index", m.Total(), ix.Downloads())
	}

	code, stdout, stderr = runCLI(t, append([]string{"resolve", dir, "--source", "pypi", "--yes"}, common...)...)
	if code != exitOK || !strings.Contains(stdout, "Done") {
		t.Fatalf("resolve: exit %d\n%s%s", code, stdout, stderr)
	}
	if m.Total() != 0 || ix.Downloads() != 1 {
		t.Fatalf("%d requests to NVIDIA's mirror, %d downloads from the index; want 0 and 1", m.Total(), ix.Downloads())
	}
	placed := filepath.Join(dir, "app/lib/libcudss.so.0")
	got, err := os.ReadFile(placed)
	if err != nil || !bytes.Equal(got, wheel.Files["nvidia/cu13/lib/libcudss.so.0"]) {
		t.Fatalf("libcudss.so.0 beside libapp.so is not the wheel's: %v", err)
	}
	if real, _ := filepath.EvalSymlinks(placed); !strings.Contains(real, filepath.Join("nvidia-cudss-cu13", "0.9.9.9")) {
		t.Errorf("libcudss.so.0 links to %s, not the wheel's store entry", real)
	}
	if code, stdout, _ := runCLI(t, "scan", "--ld-library-path", "", dir); code != exitOK {
		t.Fatalf("scan after resolve: exit %d\n%s", code, stdout)
	}
}

// TestMirrorAndApplyAWheelPlan: a plan that takes a wheel (--source pypi)
// is mirrored, wheel and simple index, and applied with another prefix
// while the original index is gone: the wheel comes from the mirror's
// simple index alone and the library is placed where the loader searches.
func TestMirrorAndApplyAWheelPlan(t *testing.T) {
	dir, m, ix, wheel := wheelTarget(t)
	work := t.TempDir()
	t.Setenv("PIP_INDEX_URL", ix.URL)
	code, stdout, stderr := runCLI(t, "resolve", dir, "--source", "pypi", "--dry-run", "--json", "--catalog", m.Catalog, "--mirror", m.URL,
		"--prefix", filepath.Join(work, "p1"), "--ld-library-path", "", "--quiet")
	if code != exitMissing {
		t.Fatalf("plan: exit %d\n%s%s", code, stdout, stderr)
	}
	planFile := filepath.Join(work, "plan.json")
	if err := os.WriteFile(planFile, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	mdir := filepath.Join(work, "mirror")
	if code, stdout, stderr := runCLI(t, "mirror", mdir, "--plan", planFile, "--catalog", m.Catalog, "--quiet"); code != exitOK {
		t.Fatalf("mirror: exit %d\n%s%s", code, stdout, stderr)
	}
	indexed := ix.Requests()
	served := mirrortest.ServeDir(t, mdir)
	url := served.URL
	t.Setenv("PIP_INDEX_URL", "http://127.0.0.1:1/simple/") // the original index is out of reach now
	p2 := filepath.Join(work, "p2")
	code, stdout, stderr = runCLI(t, "apply", planFile, dir, "--catalog", m.Catalog, "--mirror", url, "--prefix", p2, "--ld-library-path", "", "--json", "--quiet")
	if code != exitOK {
		t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
	}
	if ix.Requests() != indexed || served.Total() == 0 {
		t.Fatalf("the original index answered %d more request(s), the mirror %d", ix.Requests()-indexed, served.Total())
	}
	got, err := os.ReadFile(filepath.Join(dir, "app/lib/libcudss.so.0"))
	if err != nil || !bytes.Equal(got, wheel.Files["nvidia/cu13/lib/libcudss.so.0"]) {
		t.Fatalf("libcudss.so.0 after apply: %v (the wheel's bytes: %v)", err, bytes.Equal(got, wheel.Files["nvidia/cu13/lib/libcudss.so.0"]))
	}
	if code, stdout, stderr := runCLI(t, "scan", dir, "--ld-library-path", "", "--symbols=false"); code != exitOK {
		t.Fatalf("scan after apply: exit %d\n%s%s", code, stdout, stderr)
	}
}
