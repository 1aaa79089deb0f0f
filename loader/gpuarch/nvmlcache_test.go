package gpuarch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/libprobe"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// nvmlHost is a machine with an H100 for NVML's cache: its /proc, /sys and
// /dev under a root, the libnvidia-ml.so.1 the query says it loaded, and
// a query that counts how often it runs.
type nvmlHost struct {
	t       testing.TB
	root    string
	lib     string
	queries int
	out     string
	opts    DetectOptions
	// first is NVML's answer to the first query.
	first *SourceResult
}

func newNVMLHost(t testing.TB) *nvmlHost {
	h := &nvmlHost{t: t, root: fakeSystem(t, map[string][3]string{"0000:17:00.0": {"0x10de", "0x2330", "0x030200"}}, "")}
	h.write("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n")
	h.write("dev/nvidiactl", "")
	h.write("dev/nvidia0", "")
	h.lib = filepath.Join(t.TempDir(), "libnvidia-ml.so.580.95.05")
	if err := os.WriteFile(h.lib, []byte("nvml"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.out = "stage dlopen\nloaded " + h.lib + "\nstage init\ndriver_cuda 13000\nstage count\ncount 1\ngpu 0 9 0 233010de NVIDIA H100 80GB HBM3\ndone\n"
	h.opts = DetectOptions{Root: h.root, NVMLCommand: []string{"/bin/sh", "-c", "query"}, Via: "test", Cache: factcache.At(t.TempDir()),
		Exec: func(ctx context.Context, argv []string) (libprobe.Result, error) {
			h.queries++
			return libprobe.Result{Stdout: []byte(h.out)}, nil
		}}
	return h
}

func (h *nvmlHost) write(p, s string) {
	h.t.Helper()
	p = filepath.Join(h.root, p)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// detect runs Detect and checks that NVML was asked queries times in all,
// and that the answer, kept or not as said, is NVML's first one.
func (h *nvmlHost) detect(what string, queries int, kept bool) *Device {
	h.t.Helper()
	d, err := Detect(context.Background(), h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	r := d.Sources[0]
	if h.queries != queries {
		h.t.Errorf("%s: %d queries, want %d", what, h.queries, queries)
	}
	if (r.KeptFrom != nil) != kept {
		h.t.Errorf("%s: kept from %v, want kept %v", what, r.KeptFrom, kept)
	}
	if h.first == nil {
		h.first = &r
	}
	r.KeptFrom = nil
	if d.Source != SourceNVML || r.Via != "test" || r.Library != h.lib || !reflect.DeepEqual(r, *h.first) {
		h.t.Errorf("%s: %+v, first %+v", what, r, *h.first)
	}
	return d
}

// TestNVMLKept: NVML is asked once while nothing its answer depends on
// changes, and again when something does.
func TestNVMLKept(t *testing.T) {
	h := newNVMLHost(t)
	d := h.detect("first", 1, false)
	if d.CC != (CC{9, 0}) || d.Name != "NVIDIA H100 80GB HBM3" || d.Driver() != (Version{13, 0}) || d.Sources[0].GPUs[0].PCIID != "10de:2330" {
		t.Errorf("%+v", d)
	}
	d = h.detect("second", 1, true)
	if at := d.Sources[0].KeptFrom; at == nil || at.IsZero() || at.Location() != time.UTC {
		t.Errorf("kept from %v", at)
	}

	h.write("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.105.08  Release Build\n")
	h.detect("another driver", 2, false)
	h.detect("another driver, again", 2, true)

	if err := os.WriteFile(h.lib, []byte("nvml of another build"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.detect("the library replaced", 3, false)
	h.detect("the library replaced, again", 3, true)

	h.write("dev/nvidia1", "")
	h.detect("a device file more", 4, false)

	h.write("sys/devices/pci0000:00/0000:18:00.0/vendor", "0x10de\n")
	h.write("sys/devices/pci0000:00/0000:18:00.0/device", "0x2330\n")
	h.write("sys/devices/pci0000:00/0000:18:00.0/class", "0x030200\n")
	if err := os.Symlink("../../../devices/pci0000:00/0000:18:00.0", filepath.Join(h.root, "sys/bus/pci/devices/0000:18:00.0")); err != nil {
		t.Fatal(err)
	}
	h.detect("a GPU more", 5, false)
	h.detect("a GPU more, again", 5, true)

	h.opts.NVMLCommand = []string{"/bin/sh", "-c", "another query"}
	h.detect("another query", 6, false)

	// A library put first on the loader's path changes its directory.
	dir := t.TempDir()
	t.Setenv("LD_LIBRARY_PATH", dir)
	h.detect("LD_LIBRARY_PATH set", 7, false)
	h.detect("LD_LIBRARY_PATH set, again", 7, true)
	if err := os.WriteFile(filepath.Join(dir, "libnvidia-ml.so.1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.detect("a library added on LD_LIBRARY_PATH", 8, false)

	// The zero Dir (--no-cache) asks every time.
	h.opts.Cache = factcache.Dir{}
	h.detect("no cache", 9, false)
}

// TestNVMLKeptDamaged: a damaged or unwritable cache makes the query run
// again, never a wrong answer.
func TestNVMLKeptDamaged(t *testing.T) {
	h := newNVMLHost(t)
	h.detect("first", 1, false)
	files, _ := filepath.Glob(filepath.Join(h.opts.Cache.Path(), "nvml-*"))
	if len(files) != 1 {
		t.Fatalf("cache files %q", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, damage := range []func([]byte) []byte{
		func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }, // a flipped bit
		func(b []byte) []byte { return b[:len(b)/2] },           // cut short
		func(b []byte) []byte { return nil },                    // empty
	} {
		if err := os.WriteFile(files[0], damage(append([]byte(nil), data...)), 0o644); err != nil {
			t.Fatal(err)
		}
		q := h.queries
		h.detect("damaged", q+1, false)
		h.detect("written again", q+1, true)
	}

	// A cache where no file can be written: every run asks, and answers.
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h.opts.Cache = factcache.At(filepath.Join(blocked, "facts"))
	q := h.queries
	h.detect("unwritable", q+1, false)
	h.detect("unwritable, again", q+2, false)
}

// TestNVMLNotKept: without the driver's proc file, or with an answer that
// is not whole, the query runs every time.
func TestNVMLNotKept(t *testing.T) {
	t.Run("no-proc-driver", func(t *testing.T) {
		h := newNVMLHost(t)
		if err := os.RemoveAll(filepath.Join(h.root, "proc/driver")); err != nil {
			t.Fatal(err)
		}
		h.detect("first", 1, false)
		h.detect("second", 2, false)
	})
	for name, out := range map[string]string{
		"failed":     "stage dlopen\nstage init\nerror init nvmlInit_v2 returned 9\n",
		"no-gpu":     "stage dlopen\nstage init\nstage count\ncount 0\ndone\n",
		"unfinished": "stage dlopen\nstage init\nstage count\ncount 1\ngpu 0 9 0 233010de NVIDIA H100 80GB HBM3\n",
		"no-library": "stage dlopen\nstage init\nstage count\ncount 1\ngpu 0 9 0 233010de NVIDIA H100 80GB HBM3\ndone\n",
	} {
		t.Run(name, func(t *testing.T) {
			h := newNVMLHost(t)
			h.out = out
			for i := 1; i <= 2; i++ {
				d, err := Detect(context.Background(), h.opts)
				if err != nil || h.queries != i || d.Sources[0].KeptFrom != nil {
					t.Errorf("run %d: %d queries, %+v %v", i, h.queries, d.Sources[0], err)
				}
			}
		})
	}
}

// TestNVMLKeptReal: the real python3 query against an NVML with code,
// through the cache: the second run starts no interpreter, and a library
// rebuilt in place is asked again.
func TestNVMLKeptReal(t *testing.T) {
	python, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "no python3")
	dir := buildFakeNVML(t)
	h := newNVMLHost(t)
	h.lib = filepath.Join(dir, "libnvidia-ml.so.1")
	t.Setenv("LD_LIBRARY_PATH", dir)
	run := withEnv()
	h.opts.NVMLCommand = []string{python, "-c", NVMLScript}
	h.opts.Exec = func(ctx context.Context, argv []string) (libprobe.Result, error) {
		h.queries++
		return run(ctx, argv)
	}
	d := h.detect("first", 1, false)
	checkFakeNVML(t, d, dir)
	d = h.detect("second", 1, true)
	checkFakeNVML(t, d, dir)
	// Built again in place: another file, another answer maybe.
	buildFakeNVMLIn(t, dir)
	h.detect("rebuilt", 2, false)
}
