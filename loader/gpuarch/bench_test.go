package gpuarch

import (
	"bytes"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	fb "github.com/cudadeps/cudadeps/internal/testkit/fatbintest"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

type countingReader struct {
	r     *bytes.Reader
	bytes atomic.Int64
	reads atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.bytes.Add(int64(len(p)))
	c.reads.Add(1)
	return c.r.ReadAt(p, off)
}

// BenchmarkReadManyContainers reads a library shaped like libtorch_cuda.so
// (thousands of containers of six cubins each) and reports what was read:
// headers only, whatever the payloads weigh.
func BenchmarkReadManyContainers(b *testing.B) {
	payload := make([]byte, 8<<10)
	var cs []fb.Container
	for i := 0; i < 3000; i++ {
		c := fb.Container{}
		for _, a := range []uint32{75, 80, 86, 90, 100, 120} {
			c.Entries = append(c.Entries, fb.Entry{Kind: fb.ELF, Arch: a, Payload: payload, Zstd: true})
		}
		cs = append(cs, c)
	}
	obj, err := elfwrite.Build(elfwrite.Spec{Soname: "libbig.so", Sections: []elfwrite.Section{{Name: SectionName, Data: fb.Build(cs...)}}})
	if err != nil {
		b.Fatal(err)
	}
	cr := &countingReader{r: bytes.NewReader(obj)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := Read(cr, int64(len(obj)), "libbig.so")
		if err != nil || c.Containers != 3000 {
			b.Fatal(c, err)
		}
	}
	b.ReportMetric(float64(cr.bytes.Load())/float64(b.N), "read-B/op")
	b.ReportMetric(float64(cr.reads.Load())/float64(b.N), "reads/op")
	b.ReportMetric(float64(len(obj)), "file-B")
}

// BenchmarkDetectNVML: the device found with NVML's answer kept in the
// cache (the reads of the key and a stat of its files), against the query
// itself run by python3's ctypes (an interpreter started each time), what
// every doctor run cost before.
func BenchmarkDetectNVML(b *testing.B) {
	b.Run("kept", func(b *testing.B) {
		h := newNVMLHost(b)
		h.detect("first", 1, false)
		b.ResetTimer()
		for range b.N {
			if d, err := Detect(b.Context(), h.opts); err != nil || d.Sources[0].KeptFrom == nil {
				b.Fatal(d, err)
			}
		}
	})
	b.Run("python3", func(b *testing.B) {
		python, err := exec.LookPath("python3")
		lddtest.Need(b, err == nil, "no python3")
		dir := buildFakeNVML(b)
		opts := DetectOptions{Root: b.TempDir(), NVMLCommand: []string{python, "-c", NVMLScript}, Exec: withEnv("LD_LIBRARY_PATH=" + dir)}
		b.ResetTimer()
		for range b.N {
			if d, err := Detect(b.Context(), opts); err != nil || d.Sources[0].Error != "" {
				b.Fatal(d, err)
			}
		}
	})
}
