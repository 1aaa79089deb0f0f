package main

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/libprobe"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// gpuRoot builds a host with driver 580.95.05, one GPU and the driver's
// libcuda in a directory, for --root.
func gpuRoot(t *testing.T, uvm bool) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, body string) { writeTestFile(t, filepath.Join(root, p), body, 0o644) }
	obj := func(p string, spec elfwrite.Spec) {
		if err := elfwrite.Write(filepath.Join(root, p), spec); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	const interp = "/lib64/ld-linux-x86-64.so.2"
	obj(interp, elfwrite.Spec{Soname: "ld-linux-x86-64.so.2", VersionDefs: []string{"GLIBC_2.3"}})
	obj("/lib64/libc.so.6", elfwrite.Spec{Soname: "libc.so.6", Interp: interp, VersionDefs: []string{"GLIBC_2.2.5", "GLIBC_2.38"}})
	obj("/bin/sh", elfwrite.Spec{Interp: interp, Flags1: elf.DF_1_PIE, Needed: []string{"libc.so.6"}})
	var syms []elfwrite.Symbol
	for _, n := range []string{"cuInit", "cuGetProcAddress_v2", "cuDriverGetVersion"} {
		syms = append(syms, elfwrite.Symbol{Name: n, Defined: true, Func: true})
	}
	obj("/usr/lib64/libcuda.so.580.95.05", elfwrite.Spec{Soname: "libcuda.so.1", Symbols: syms})
	link("/usr/lib64/libcuda.so.1", "libcuda.so.580.95.05")
	obj("/usr/lib64/libnvidia-ptxjitcompiler.so.580.95.05", elfwrite.Spec{Soname: "libnvidia-ptxjitcompiler.so.1"})
	link("/usr/lib64/libnvidia-ptxjitcompiler.so.1", "libnvidia-ptxjitcompiler.so.580.95.05")
	obj("/usr/local/cuda/lib64/stubs/libcuda.so", elfwrite.Spec{Soname: "libcuda.so.1", Symbols: syms})
	link("/usr/local/cuda/lib64/stubs/libcuda.so.1", "libcuda.so")
	write("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:46:41 UTC 2025\n")
	write("/dev/nvidiactl", "")
	write("/dev/nvidia0", "")
	if uvm {
		write("/dev/nvidia-uvm", "")
	}
	obj("/opt/hook/libhook.so", elfwrite.Spec{Soname: "libhook.so", Symbols: []elfwrite.Symbol{{Name: "cudaMalloc", Defined: true, Func: true}}})
	return root
}

// quietEnv clears the variables doctor reads from this process. The fake
// roots have no ld.so.cache, so Triton is told where libcuda is.
func quietEnv(t *testing.T) {
	t.Setenv("TRITON_LIBCUDA_PATH", "/usr/lib64")
	for _, k := range []string{"CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LD_PRELOAD", "NVIDIA_VISIBLE_DEVICES",
		"NVIDIA_DRIVER_CAPABILITIES", "KUBERNETES_SERVICE_HOST", "APPTAINER_CONTAINER", "SINGULARITY_CONTAINER", "container"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

func doctorCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestDoctorHealthyJSON(t *testing.T) {
	quietEnv(t)
	root := gpuRoot(t, true)
	code, out, stderr := doctorCLI("doctor", "--root", root, "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	var rep struct {
		Host struct {
			Kind, Platform string
			Evidence       []struct{ Source, Says string }
		} `json:"host"`
		Checks []struct {
			ID, Status, Evidence, Advice string
		} `json:"checks"`
		Summary struct {
			Status  string `json:"status"`
			OK      int    `json:"ok"`
			Driver  string `json:"driver"`
			Libcuda string `json:"libcuda"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Summary.Status != "ok" || rep.Summary.OK != len(rep.Checks) || rep.Summary.Driver != "580.95.05" ||
		rep.Summary.Libcuda != "/usr/lib64/libcuda.so.580.95.05" {
		t.Errorf("summary %+v", rep.Summary)
	}
	if len(rep.Checks) != 10 || rep.Checks[0].ID != "host" || rep.Checks[1].ID != "driver" {
		t.Errorf("checks %+v", rep.Checks)
	}
	if rep.Host.Kind != "x86_64" || rep.Host.Platform != "linux-x86_64" || len(rep.Host.Evidence) == 0 || rep.Host.Evidence[0].Source != "/etc/nv_tegra_release" {
		t.Errorf("host %+v", rep.Host)
	}
}

func TestDoctorFailureExitAndText(t *testing.T) {
	quietEnv(t)
	root := gpuRoot(t, false)
	code, out, _ := doctorCLI("doctor", "--root", root)
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	if !strings.Contains(out, "FAIL  devices") || !strings.Contains(out, "no /dev/nvidia-uvm") || !strings.Contains(out, "→ sudo modprobe nvidia-uvm") {
		t.Errorf("output:\n%s", out)
	}
	if !strings.HasSuffix(out, "1 failure, 0 warnings, 9 ok\n") {
		t.Errorf("closing line of\n%s", out)
	}
}

func TestDoctorLoaderFlags(t *testing.T) {
	quietEnv(t)
	root := gpuRoot(t, true)
	stubs := "/usr/local/cuda/lib64/stubs"
	code, out, _ := doctorCLI("doctor", "--root", root, "--ld-library-path", stubs)
	if code != exitError || !strings.Contains(out, "FAIL  libcuda") || !strings.Contains(out, "CUDA_ERROR_STUB_LIBRARY") {
		t.Errorf("--ld-library-path %s: exit %d\n%s", stubs, code, out)
	}
	// An empty --ld-library-path replaces a stub-laden $LD_LIBRARY_PATH.
	t.Setenv("LD_LIBRARY_PATH", stubs)
	if code, out, _ := doctorCLI("doctor", "--root", root, "--ld-library-path", ""); code != exitOK {
		t.Errorf("--ld-library-path \"\": exit %d\n%s", code, out)
	}
	if code, out, _ := doctorCLI("doctor", "--root", root); code != exitError || !strings.Contains(out, "LD_LIBRARY_PATH") {
		t.Errorf("$LD_LIBRARY_PATH: exit %d\n%s", code, out)
	}
	os.Unsetenv("LD_LIBRARY_PATH")
	code, out, _ = doctorCLI("doctor", "--root", root, "--preload", "/opt/hook/libhook.so")
	if code != exitOK || !strings.Contains(out, "warn  interposers") || !strings.Contains(out, "interposes cudaMalloc") {
		t.Errorf("--preload: exit %d\n%s", code, out)
	}
}

func TestDoctorTarget(t *testing.T) {
	quietEnv(t)
	root := gpuRoot(t, true)
	lib := filepath.Join(root, "opt/app/libapp.so")
	if err := elfwrite.Write(lib, elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libcudart.so.13"}}); err != nil {
		t.Fatal(err)
	}
	// The root has no libcudart.so.13: doctor says the target does not
	// load whole, as check and resolve --dry-run do, and fails.
	code, out, _ := doctorCLI("doctor", "--root", root, lib)
	if code != exitError || !strings.Contains(out, "libapp.so needs CUDA 13 (libcudart.so.13 in its closure)") || !strings.Contains(out, "static-runtime") ||
		!strings.Contains(out, "FAIL  target") || !strings.Contains(out, "libcudart.so.13") {
		t.Errorf("exit %d\n%s", code, out)
	}
	if err := elfwrite.Write(filepath.Join(root, "opt/app/libcudart.so.13"), elfwrite.Spec{Soname: "libcudart.so.13"}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.Write(lib, elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libcudart.so.13"}, RunPath: elfwrite.Str("$ORIGIN")}); err != nil {
		t.Fatal(err)
	}
	code, out, _ = doctorCLI("doctor", "--root", root, lib)
	if code != exitOK || !strings.Contains(out, "ok    target") {
		t.Errorf("with libcudart beside it: exit %d\n%s", code, out)
	}
}

func TestDoctorBadInput(t *testing.T) {
	quietEnv(t)
	root := gpuRoot(t, true)
	wheel := filepath.Join(t.TempDir(), "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl")
	if err := os.WriteFile(wheel, []byte("PK"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--root", root, wheel}, "doctor examines what is installed"},
		{[]string{"doctor", "--root", root, "--probe"}, "--probe loads this machine's libcuda.so.1"},
		{[]string{"doctor", "a", "b"}, "at most one TARGET"},
		{[]string{"doctor", "--probe-timeout", "soon"}, "--probe-timeout: "},
	} {
		code, out, stderr := doctorCLI(c.args...)
		if code != exitUsage || out != "" || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args[1:], code, out, stderr)
		}
	}
	// A target that is not there, or holds nothing to examine, is an error
	// as for resolve and check, not a usage error.
	empty := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"doctor", "--root", root, filepath.Join(root, "nonexistent")}, "no such file or directory"},
		{[]string{"doctor", "--root", root, empty}, "target " + empty + ": no dynamically linked ELF object in this directory"},
	} {
		code, out, stderr := doctorCLI(c.args...)
		if code != exitError || out != "" || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args[1:], code, out, stderr)
		}
	}
}

func TestDoctorProbeChildHidden(t *testing.T) {
	_, help, _ := doctorCLI("doctor", "--help")
	if strings.Contains(help, "probe-child") || !strings.Contains(help, "--probe ") {
		t.Errorf("help:\n%s", help)
	}
}

func TestDoctorProbeChildStatic(t *testing.T) {
	if libprobe.Dlopen {
		// Not an oracle: the other build is tested elsewhere.
		t.Skip("the dlopen build's child is tested in package doctor")
	}
	code, out, _ := doctorCLI("doctor", "--probe-child")
	if code != exitError || !strings.HasPrefix(out, "error dlopen ") || !strings.Contains(out, "-tags dlprobe") {
		t.Errorf("exit %d, output %q", code, out)
	}
}

// TestDoctorDistribution: TARGET as an installed distribution, found
// through an interpreter (here a stand-in that reports a site-packages
// directory) and read from its RECORD.
func TestDoctorDistribution(t *testing.T) {
	quietEnv(t)
	root := gpuRoot(t, true)
	site := t.TempDir()
	rpath := "$ORIGIN/../../nvidia/cu13/lib"
	for p, spec := range map[string]elfwrite.Spec{
		"torch/lib/libtorch_cuda.so":      {Soname: "libtorch_cuda.so", Needed: []string{"libcudart.so.13"}, RPath: &rpath},
		"nvidia/cu13/lib/libcudart.so.13": {Soname: "libcudart.so.13"},
	} {
		if err := elfwrite.Write(filepath.Join(site, p), spec); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"torch/__init__.py":                              "",
		"torch/version.py":                               "cuda: Optional[str] = '13.0'\n",
		"torch-2.11.0.dist-info/METADATA":                "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n",
		"torch-2.11.0.dist-info/RECORD":                  "torch/__init__.py,,\ntorch/version.py,,\ntorch/lib/libtorch_cuda.so,,\ntorch-2.11.0.dist-info/RECORD,,\n",
		"nvidia_cuda_runtime-13.0.96.dist-info/METADATA": "Name: nvidia-cuda-runtime\nVersion: 13.0.96\n",
	}
	for p, body := range files {
		writeTestFile(t, filepath.Join(site, p), body, 0o644)
	}
	python := filepath.Join(t.TempDir(), "python3")
	report, _ := json.Marshal(map[string]any{"executable": python, "prefix": "/venv", "base_prefix": "/usr", "version": "3.12.3",
		"machine": "x86_64", "site_dirs": []string{site}, "markers": map[string]string{"sys_platform": "linux"}})
	if err := os.WriteFile(python, []byte("#!/bin/sh\ncat <<'EOF'\n"+string(report)+"\nEOF\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := doctorCLI("doctor", "--root", root, "torch", "--python", python)
	if code != exitOK || !strings.Contains(out, "torch needs CUDA 13.0 (libcudart.so.13 in its closure; version.py says 13.0)") {
		t.Errorf("exit %d\n%s\n%s", code, out, stderr)
	}
	code, _, stderr = doctorCLI("doctor", "--root", root, "tensorflow", "--python", python)
	if code != exitError || !strings.Contains(stderr, `no installed distribution "tensorflow"`) {
		t.Errorf("unknown distribution: exit %d, %s", code, stderr)
	}
}
