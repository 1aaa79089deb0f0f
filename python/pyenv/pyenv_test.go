package pyenv

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

func TestEvalMarker(t *testing.T) {
	vars := Markers{"platform_system": "Linux", "platform_machine": "aarch64", "sys_platform": "linux", "python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython", "os_name": "posix"}
	for _, c := range []struct {
		expr string
		want bool
	}{
		{`platform_system == "Linux"`, true},
		{`platform_system == "Linux" and platform_machine == "x86_64"`, false},
		{`platform_machine == "x86_64" or platform_machine == "aarch64"`, true},
		{`(platform_system == "Windows" or sys_platform == "linux") and python_version >= "3.10"`, true},
		{`python_version < "3.9"`, false},
		{`python_full_version >= "3.12.1"`, true},
		{`python_version == "3.12" and extra == "cuda"`, false},
		{`'linux' in sys_platform`, true},
		{`platform_machine not in "x86_64 AMD64"`, true},
		{`"3.12" == python_version`, true},
	} {
		got, err := EvalMarker(c.expr, vars)
		if err != nil || got != c.want {
			t.Errorf("%s = %v, %v; want %v", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`platform_system ==`, `(platform_system == "Linux"`, `"a" < "b"`, `nosuch == "x"`} {
		if _, err := EvalMarker(bad, vars); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func writeDistInfo(t *testing.T, site, name, version, meta string, files []string) {
	t.Helper()
	info := filepath.Join(site, strings.ReplaceAll(name, "-", "_")+"-"+version+".dist-info")
	if err := os.MkdirAll(info, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(info, "METADATA"), []byte("Metadata-Version: 2.1\nName: "+name+"\nVersion: "+version+"\n"+meta+"\n\nbody text\nRequires-Dist: not-a-header\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := strings.Join(files, ",,\n") + ",,\n"
	if err := os.WriteFile(filepath.Join(info, "RECORD"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFindAndClosure(t *testing.T) {
	site := t.TempDir()
	writeDistInfo(t, site, "torchaudio", "2.11.0", "Requires-Dist: torch==2.11.0\nRequires-Dist: sox; extra == \"sox\"", []string{"torchaudio/lib/libtorchaudio.so", "../../../bin/tool"})
	writeDistInfo(t, site, "torch", "2.11.0", "Requires-Dist: nvidia-cublas==13.0.0.19; platform_system == \"Linux\"\nRequires-Dist: nvidia-nccl-cu13 ; platform_machine == \"x86_64\"\nRequires-Dist: typing-extensions>=4.10.0", []string{"torch/lib/libtorch.so"})
	writeDistInfo(t, site, "nvidia-cublas", "13.0.0.19", "", []string{"nvidia/cu13/lib/libcublas.so.13"})
	writeDistInfo(t, site, "nvidia_nccl_cu13", "2.28.3", "", []string{"nvidia/nccl/lib/libnccl.so.2"})
	env := &Env{SiteDirs: []string{site}, Markers: Markers{"platform_system": "Linux", "platform_machine": "aarch64"}}
	ta, err := env.Find("TorchAudio")
	if err != nil {
		t.Fatal(err)
	}
	if ta.Version != "2.11.0" || len(ta.Files) != 2 || ta.Files[0] != filepath.Join(site, "torchaudio/lib/libtorchaudio.so") {
		t.Fatalf("torchaudio = %+v", ta)
	}
	order, err := env.ImportOrder(ta)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range order {
		names = append(names, d.Name)
	}
	// nccl's marker is for x86_64 only; typing-extensions is not installed;
	// sox is an extra; what torch requires comes before torch.
	if strings.Join(names, ",") != "nvidia-cublas,torch" {
		t.Fatalf("import order = %v", names)
	}
	if _, err := env.Find("nvidia-nccl-cu13"); err != nil {
		t.Fatalf("normalised names: %v", err)
	}
	if _, err := env.Find("nosuch"); err == nil {
		t.Fatal("found a distribution that is not there")
	}
	// Without an interpreter, markers are unknown and count as met.
	bare, _ := FromSiteDir(site, "")
	torch, _ := bare.Find("torch")
	if strings.Join(torch.Requires, ",") != "nvidia-cublas,nvidia-nccl-cu13,typing-extensions" {
		t.Fatalf("requires without markers = %v", torch.Requires)
	}
}

func TestDiscoverRealInterpreter(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	venv := filepath.Join(t.TempDir(), "venv")
	out, err := exec.Command(py, "-m", "venv", "--without-pip", venv).CombinedOutput()
	lddtest.Need(t, err == nil, "python3 -m venv: %v: %s", err, out)
	env, err := Discover(context.Background(), filepath.Join(venv, "bin", "python3"))
	if err != nil {
		t.Fatal(err)
	}
	inVenv := false
	for _, d := range env.SiteDirs {
		inVenv = inVenv || strings.HasPrefix(d, venv)
	}
	if !inVenv || env.Prefix != venv || env.Markers["sys_platform"] != "linux" || env.Version == "" {
		t.Fatalf("env = %+v", env)
	}
	if _, err := Discover(context.Background(), filepath.Join(venv, "bin", "nosuchpython")); err == nil {
		t.Fatal("no error for a missing interpreter")
	}
}

// TestDiscoverCanceled checks that an interpreter killed because the caller
// gave up (Ctrl-C) is reported as the cancellation, which callers test
// for, not as a signal the interpreter died of.
func TestDiscoverCanceled(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	slow := filepath.Join(dir, "python")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\n: > '"+started+"'\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if _, err := os.Stat(started); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := Discover(ctx, slow)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), slow) {
		t.Errorf("Discover with a canceled context: %v, want context.Canceled naming the interpreter", err)
	}
}

// The import order puts each distribution after those it requires, ties
// by name; a package that imports another without declaring it
// (imports.yaml: torchaudio imports torch) requires it all the same.
func TestImportOrder(t *testing.T) {
	site := t.TempDir()
	writeDistInfo(t, site, "app", "1.0", "Requires-Dist: torchvision\nRequires-Dist: zlib-ng\nRequires-Dist: torchaudio", nil)
	writeDistInfo(t, site, "torchvision", "0.26.0", "Requires-Dist: torch==2.11.0\nRequires-Dist: numpy", nil)
	writeDistInfo(t, site, "torchaudio", "2.11.0", "", nil)
	writeDistInfo(t, site, "torch", "2.11.0", "Requires-Dist: numpy\nRequires-Dist: triton", nil)
	writeDistInfo(t, site, "triton", "3.6.0", "", nil)
	writeDistInfo(t, site, "numpy", "2.3.0", "", nil)
	writeDistInfo(t, site, "zlib-ng", "1.0", "", nil)
	env, err := FromSiteDir(site, "")
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]string{
		"app":        "numpy,triton,torch,torchaudio,torchvision,zlib-ng",
		"torchaudio": "numpy,triton,torch",
		"torch":      "numpy,triton",
		"numpy":      "",
	} {
		d, err := env.Find(target)
		if err != nil {
			t.Fatal(err)
		}
		order, err := env.ImportOrder(d)
		if err != nil {
			t.Fatal(err)
		}
		if got := distNames(order); got != want {
			t.Errorf("%s: import order %s, want %s", target, got, want)
		}
	}
}

// isPlain agrees with its definition, cleaning leaves the path as it is
// and no element is "..", on paths its fast checks and its element loop
// each answer.
func TestIsPlain(t *testing.T) {
	def := func(p string) bool {
		return p != "" && p[0] != '/' && path.Clean(p) == p && p != "." && !slices.Contains(strings.Split(p, "/"), "..")
	}
	for _, p := range []string{
		"torch/lib/libc10.so", "a", "a/b", ".hidden", "a/.hidden/b", "a/..b", "a/b..", "..a", "a/.b/c",
		"", "/abs", "a/", "a//b", ".", "..", "./a", "../a", "a/.", "a/..", "a/./b", "a/../b", "a/b/..", ".a/../b",
		"../../../bin/torchrun", "torch-2.11.0.dist-info/RECORD", "a/.../b",
	} {
		if got, want := isPlain(p), def(p); got != want {
			t.Errorf("isPlain(%q) = %v, want %v", p, got, want)
		}
	}
}
