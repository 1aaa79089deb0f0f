//go:build dlprobe

package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/libprobe"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// The test binary is its own probe child, as cudadeps is.
func TestMain(m *testing.M) {
	if os.Getenv("CUDADEPS_TEST_PROBE_CHILD") == "1" {
		os.Exit(ProbeChild(os.Stdout))
	}
	os.Exit(m.Run())
}

func runChild(t *testing.T, dir string, extra ...string) *ProbeResult {
	t.Helper()
	h := newGPUHost(t)
	opts := h.options()
	env := append(os.Environ(), "CUDADEPS_TEST_PROBE_CHILD=1", "LD_LIBRARY_PATH="+dir)
	opts.System.Exec = libprobe.RunCommand(append(env, extra...))
	opts.Probe, opts.ProbeCommand = true, []string{os.Args[0]}
	return h.run(opts).Summary.Probe
}

func TestProbeChildDriverCalls(t *testing.T) {
	dir := buildFakeDriver(t)
	p := runChild(t, dir, "FAKE_CUINIT=999")
	if p.Init == nil || *p.Init != 999 || p.DriverCUDA == nil || *p.DriverCUDA != 13000 || p.Devices == nil || *p.Devices != 2 ||
		p.Stage != "done" || p.Loaded != filepath.Join(dir, "libcuda.so.1") {
		t.Errorf("%+v (stderr %q)", p, p.Stderr)
	}
}

func TestProbeChildFailures(t *testing.T) {
	t.Run("not-a-driver", func(t *testing.T) {
		dir := t.TempDir()
		if err := elfwrite.Write(filepath.Join(dir, "libcuda.so.1"), elfwrite.Spec{Soname: "libcuda.so.1"}); err != nil {
			t.Fatal(err)
		}
		p := runChild(t, dir)
		if p.Stage != "dlsym" || !strings.Contains(p.Error, "cuInit") {
			t.Errorf("%+v", p)
		}
	})
	t.Run("crash", func(t *testing.T) {
		dir := t.TempDir()
		b, err := elfwrite.Build(elfwrite.Spec{Soname: "libcuda.so.1", Symbols: []elfwrite.Symbol{{Name: "cuInit", Defined: true, Func: true}}})
		if err != nil {
			t.Fatal(err)
		}
		setSymbolValue(t, b, "cuInit", 0x40)
		if err := os.WriteFile(filepath.Join(dir, "libcuda.so.1"), b, 0o755); err != nil {
			t.Fatal(err)
		}
		p := runChild(t, dir)
		if p.Died == "" || p.Stage != "cuInit" || p.Init != nil {
			t.Errorf("%+v (stderr %q)", p, p.Stderr)
		}
	})
}
