package resolver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// Messages as users and the GPU machine saw them.
func TestParseProbeOutput(t *testing.T) {
	cases := []struct {
		name, out string
		want      []ProbeFailure
	}{
		{"nvrtc builtins (CuPy kernel after a resolve)",
			"cupy_backends.cuda.libs.nvrtc.NVRTCError: NVRTC_ERROR_BUILTIN_OPERATION_FAILURE (7)\nnvrtc: error: failed to open libnvrtc-builtins.so.13.0.\n  Make sure that libnvrtc-builtins.so.13.0 is installed correctly.",
			[]ProbeFailure{{Library: "libnvrtc-builtins.so.13.0", Kind: "not_found"}}},
		{"undefined symbol with a version node (pytorch#131312)",
			"ImportError: /sp/nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12",
			[]ProbeFailure{{Library: "libnvJitLink.so.12", Kind: "undefined_symbol", Object: "/sp/nvidia/cusparse/lib/libcusparse.so.12", Symbol: "__nvJitLinkComplete_12_4", Version: "libnvJitLink.so.12"}}},
		{"cuDNN version mismatch (torch conv)",
			"RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 19, 0) but found runtime version (9, 14, 0). PyTorch already comes bundled with cuDNN.",
			[]ProbeFailure{{Library: "libcudnn.so.9", Kind: "incompatible", Version: "9.19.0", Found: "9.14.0"}}},
		{"cannot open shared object file",
			"OSError: libcublasLt.so.13: cannot open shared object file: No such file or directory",
			[]ProbeFailure{{Library: "libcublasLt.so.13", Kind: "not_found"}}},
		{"cuDNN 9 sub-library",
			"Could not load library libcudnn_cnn.so.9. Error: libcudnn_cnn.so.9: cannot open shared object file: No such file or directory\nUnable to load any of {libcudnn_cnn.so.9.1.0, libcudnn_cnn.so.9.1, libcudnn_cnn.so.9, libcudnn_cnn.so}",
			[]ProbeFailure{{Library: "libcudnn_cnn.so.9", Kind: "not_found"}}},
		{"symbol version node absent",
			"ImportError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by /sp/torch/lib/libtorch_cpu.so)",
			[]ProbeFailure{{Library: "libstdc++.so.6", Kind: "version", Version: "GLIBCXX_3.4.32", Object: "/sp/torch/lib/libtorch_cpu.so"}}},
		{"TensorFlow dlopen warning",
			"W tensorflow/stream_executor/platform/default/dso_loader.cc:64] Could not load dynamic library 'libcudnn.so.8'; dlerror: libcudnn.so.8: cannot open shared object file: No such file or directory",
			[]ProbeFailure{{Library: "libcudnn.so.8", Kind: "not_found"}}},
		{"nothing to blame", "RuntimeError: CUDA error: out of memory", nil},
	}
	for _, c := range cases {
		got := parseProbeOutput(c.out)
		if len(got) != len(c.want) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
			continue
		}
		for i, w := range c.want {
			g := got[i]
			if g.Library != w.Library || g.Kind != w.Kind || g.Symbol != w.Symbol || g.Version != w.Version || g.Found != w.Found || (w.Object != "" && g.Object != w.Object) {
				t.Errorf("%s: got %+v, want %+v", c.name, g, w)
			}
		}
	}
}

func TestProbeScripts(t *testing.T) {
	for _, d := range []string{"torch", "cupy-cuda13x", "jax-cuda13-plugin", "onnxruntime-gpu", "tensorflow"} {
		s, ok := ProbeScript(d)
		if !ok || !strings.Contains(s, "def step(") || !strings.Contains(s, "finish()") {
			t.Errorf("%s: no probe", d)
		}
	}
	for _, d := range []string{"requests", "jax", "jaxlib"} {
		// jax alone runs on the CPU: only its CUDA plugin calls for a probe.
		if _, ok := ProbeScript(d); ok {
			t.Errorf("a probe for %s", d)
		}
	}
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 not found: probe syntax not checked")
	// Every probe compiles; without its framework it fails at the import,
	// naming the module (never a library).
	for _, d := range []string{"torch", "cupy", "jax-cuda13-plugin", "onnxruntime-gpu", "tensorflow"} {
		s, ok := ProbeScript(d)
		if !ok {
			t.Fatalf("%s: no probe", d)
		}
		f := filepath.Join(t.TempDir(), "probe.py")
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(py, "-m", "py_compile", f).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", d, err, out)
		}
	}
}

func TestProbeSkipped(t *testing.T) {
	got := probeSkipped("ok: import cupy: 14.2.0\nno GPU: skipped fft (cuFFT)\nno GPU: skipped GEMM (cuBLAS)\nprobe passed\n")
	if strings.Join(got, ";") != "fft (cuFFT);GEMM (cuBLAS)" {
		t.Errorf("got %q", got)
	}
}
