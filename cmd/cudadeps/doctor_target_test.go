package main

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/torchenv"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// doctor torch runs resolve's own analysis and the import itself. On the
// real torch metadata with skeleton libraries (torch/__init__.py loads
// libtorch_cuda.so, as torch's global-deps load does), a driver's
// libcuda.so.1 on LD_LIBRARY_PATH:
//   - whole: the target and the import are ok;
//   - the import raising while the files are whole: the import fails, and
//     doctor with it (it never reports success while the import fails);
//   - every nvidia-* distribution uninstalled: the target fails, naming the
//     absent distributions, and the import fails on the missing library.
func TestDoctorPythonTargetAnalysisAndImport(t *testing.T) {
	quietEnv(t)
	python := lddtest.Venv(t)
	env, err := pyenv.Discover(t.Context(), python)
	if err != nil {
		t.Fatal(err)
	}
	site := ""
	for _, d := range env.SiteDirs {
		if strings.HasPrefix(d, filepath.Dir(filepath.Dir(python))) {
			site = d
		}
	}
	torchenv.Build(t, torchenv.Options{Site: site, ELF: true, Consistent: true, AllFiles: true})
	initPy := filepath.Join(site, "torch", "__init__.py")
	load := "import ctypes, os\nctypes.CDLL(os.path.join(os.path.dirname(__file__), 'lib', 'libtorch_cuda.so'), mode=ctypes.RTLD_GLOBAL)\n"
	if err := os.WriteFile(initPy, []byte(load), 0o644); err != nil {
		t.Fatal(err)
	}
	driver := t.TempDir()
	if err := elfwrite.Write(filepath.Join(driver, "libcuda.so.1"), elfwrite.Spec{Soname: "libcuda.so.1", Machine: elf.EM_X86_64, Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LD_LIBRARY_PATH", driver)
	args := []string{"doctor", "torch", "--python", python, "--prefix", filepath.Join(t.TempDir(), "prefix"), "--sm", "9.0"}

	_, out, stderr := doctorCLI(args...)
	if !strings.Contains(out, "ok    target") || !strings.Contains(out, "ok    import") {
		t.Errorf("whole: want the target and the import ok\n%s\n%s", out, stderr)
	}

	if err := os.WriteFile(initPy, []byte("raise ImportError('torch could not be imported')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := doctorCLI(args...)
	if code != exitError || !strings.Contains(out, "FAIL  import") || !strings.Contains(out, "torch could not be imported") {
		t.Errorf("a failing import: exit %d\n%s\n%s", code, out, stderr)
	}

	if err := os.WriteFile(initPy, []byte(load), 0o644); err != nil {
		t.Fatal(err)
	}
	torchenv.Uninstall(t, site, torchenv.NVIDIA()...)
	code, out, stderr = doctorCLI(args...)
	if code != exitError || !strings.Contains(out, "FAIL  target") || !strings.Contains(out, "nvidia-cudnn-cu13") ||
		!strings.Contains(out, "FAIL  import") || !strings.Contains(out, "cannot open shared object file") {
		t.Errorf("distributions uninstalled: exit %d\n%s\n%s", code, out, stderr)
	}
}
