package scan

import (
	"context"
	"os"
	"testing"

	"github.com/cudadeps/cudadeps/internal/procstat"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/torchenv"
	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// benchmarkScan runs what `cudadeps scan DIR` runs: a new loader model (its
// ld.so.cache read, its calibration) and a scan of the whole tree, each
// iteration from scratch. It reports the objects scanned and the bytes read
// per ELF file examined (the reading of /proc/self/io itself included, a
// few hundred bytes), and the processor time per scan.
func benchmarkScan(b *testing.B, dir string) { benchmarkScanWith(b, dir, Options{}) }

func benchmarkScanWith(b *testing.B, dir string, opts Options) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var roots, files int
	var read int64
	cpu := procstat.CPUTime(b)
	for i := 0; i < b.N; i++ {
		before := procstat.BytesRead(b)
		l, err := ldso.New(ctx, ldso.Options{})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := Run(ctx, l, []string{dir}, opts)
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
		read += procstat.BytesRead(b) - before
		roots = len(rep.Roots)
		files = len(rep.Roots) + len(rep.Skipped) + len(rep.Errors)
	}
	if files == 0 {
		b.Fatalf("no ELF files under %s", dir)
	}
	b.ReportMetric(float64(procstat.CPUTime(b)-cpu)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(roots), "objects")
	b.ReportMetric(float64(read)/float64(b.N)/float64(files), "bytes_read/file")
}

// BenchmarkScanTorchSkeleton scans the skeleton of the recorded PyTorch
// environment (859 ELF files), padded to its real 6.5 GB as sparse files.
func BenchmarkScanTorchSkeleton(b *testing.B) {
	dir, _ := torchtree.Tree(b, torchtree.Options{Pad: true})
	benchmarkScan(b, dir)
}

// BenchmarkScanTorchEnvironment scans the padded skeleton with as many
// other (non-ELF) files and directories as the real environment has:
// 68,849 files in 7,811 directories, which a scan opens to find the ELF
// ones.
func BenchmarkScanTorchEnvironment(b *testing.B) {
	dir, _ := torchtree.Tree(b, torchtree.Options{Pad: true, Files: torchtree.RealFiles, Dirs: torchtree.RealDirs})
	benchmarkScan(b, dir)
}

// BenchmarkScanHostLibraries scans the host's multiarch library directory.
func BenchmarkScanHostLibraries(b *testing.B) {
	const dir = "/usr/lib/x86_64-linux-gnu"
	if _, err := os.Stat(dir); err != nil {
		lddtest.Need(b, false, "%s is absent", dir)
	}
	benchmarkScan(b, dir)
}

// BenchmarkScanTorchImported scans the skeleton with the environment's
// real dist-info folders: every object is loaded twice, on its own and as
// its package's import loads it (docs/python-imports.md); compare with
// BenchmarkScanTorchSkeleton for what the import model costs.
func BenchmarkScanTorchImported(b *testing.B) {
	dir := torchenv.Build(b, torchenv.Options{ELF: true})
	benchmarkScan(b, dir)
}
