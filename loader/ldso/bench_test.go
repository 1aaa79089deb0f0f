package ldso

import (
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"testing"

	"github.com/cudadeps/cudadeps/internal/procstat"
	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
)

// benchmarkClosure computes the closure of file. Cold: a new loader model
// each time (nothing cached but the calibration, which a scan does once), so
// every object is read and every search made; it reports the bytes read per
// object. Warm: one model for all iterations, as the closures of a scan
// share it, so what is left is the model's own work.
func benchmarkClosure(b *testing.B, file string) {
	ctx := context.Background()
	opts := Options{PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }}
	l, err := New(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	r, err := l.Closure(ctx, file)
	if err != nil {
		b.Fatal(err)
	}
	opts.Arch = r.Arch
	objects := len(r.Objects)
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		var read int64
		for i := 0; i < b.N; i++ {
			before := procstat.BytesRead(b)
			l, err := New(ctx, opts)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.Closure(ctx, file); err != nil {
				b.Fatal(err)
			}
			read += procstat.BytesRead(b) - before
		}
		b.ReportMetric(float64(objects), "objects")
		b.ReportMetric(float64(read)/float64(b.N)/float64(objects), "bytes_read/object")
	})
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := l.Closure(ctx, file); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(objects), "objects")
	})
}

// BenchmarkClosureTorchCUDA loads libtorch_cuda.so of the torch skeleton
// (padded to its real size): 30-odd libraries through RPATH $ORIGIN/../..
// entries into the nvidia wheels, and the system's.
func BenchmarkClosureTorchCUDA(b *testing.B) {
	dir, _ := torchtree.Tree(b, torchtree.Options{Pad: true})
	benchmarkClosure(b, filepath.Join(dir, "torch", "lib", "libtorch_cuda.so"))
}

// BenchmarkClosureHostLibrary loads a host library with many dependencies.
func BenchmarkClosureHostLibrary(b *testing.B) {
	if hostMachine() != elf.EM_X86_64 {
		// Not an oracle: a benchmark's input; nothing is judged.
		b.Skip("x86_64 hosts only")
	}
	for _, name := range []string{"libgtk-3.so.0", "libappstream.so.4", "libgd.so.3", "libcurl.so.4", "libkrb5.so.3"} {
		p := filepath.Join("/usr/lib/x86_64-linux-gnu", name)
		if _, err := os.Stat(p); err == nil {
			b.Logf("%s", p)
			benchmarkClosure(b, p)
			return
		}
	}
	// Not an oracle: a benchmark's input; nothing is judged.
	b.Skip("none of the usual many-dependency libraries is installed")
}

// BenchmarkForkTorchCUDA forks a process holding libtorch_cuda.so's
// closure and loads another of torch's libraries into the fork, then
// detaches that library's answer: what the import model does for each
// file of a distribution after the first.
func BenchmarkForkTorchCUDA(b *testing.B) {
	dir, _ := torchtree.Tree(b, torchtree.Options{})
	ctx := context.Background()
	l, err := New(ctx, Options{PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		b.Fatal(err)
	}
	base, err := l.Start(ctx, filepath.Join(dir, "torch", "lib", "libtorch_cuda.so"), AsListed)
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(dir, "torch", "lib", "libtorch_python.so")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := base.Fork()
		o, err := p.Dlopen(ctx, file)
		if err != nil {
			b.Fatal(err)
		}
		p.Reach(o).Detached()
	}
	b.ReportMetric(float64(len(base.Objects())), "objects")
}
