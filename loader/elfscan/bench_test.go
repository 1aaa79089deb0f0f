package elfscan

import (
	"debug/elf"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
)

// hostLibDir is the multiarch library directory of an x86_64 Debian host.
const hostLibDir = "/usr/lib/x86_64-linux-gnu"

// largestHostLibrary is the largest shared object of the host's library
// directory (libLLVM on most systems: 100 MB, a 3 MB dynamic string table).
func largestHostLibrary(tb testing.TB) string {
	tb.Helper()
	matches, _ := filepath.Glob(filepath.Join(hostLibDir, "*.so*"))
	best, bestSize := "", int64(0)
	for _, m := range matches {
		st, err := os.Lstat(m)
		if err == nil && st.Mode().IsRegular() && st.Size() > bestSize {
			best, bestSize = m, st.Size()
		}
	}
	if best == "" {
		// Not an oracle: a benchmark's input; nothing is judged.
		tb.Skipf("no shared objects in %s", hostLibDir)
	}
	return best
}

// benchmarkRead opens and reads one file per iteration, as a scan does, and
// reports what each read cost in bytes and page reads.
func benchmarkRead(b *testing.B, path string) {
	b.ReportAllocs()
	b.ResetTimer()
	var st Stats
	for i := 0; i < b.N; i++ {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil {
			b.Fatal(err)
		}
		ef := NewFile(f, fi.Size(), path)
		in, err := ef.Info()
		s := ef.Stats()
		f.Close()
		if err != nil || !in.Dynamic {
			b.Fatalf("%s: %v (dynamic %v)", path, err, in != nil && in.Dynamic)
		}
		st = s
	}
	b.ReportMetric(float64(st.BytesRead), "bytes_read/file")
	b.ReportMetric(float64(st.Reads), "reads/file")
}

func BenchmarkReadHostLibrary(b *testing.B) {
	p := largestHostLibrary(b)
	b.Logf("%s", p)
	benchmarkRead(b, p)
}

// BenchmarkReadSkeleton reads the skeleton of libtorch_cuda.so padded to its
// real size (a sparse file): the cost must not depend on the size.
func BenchmarkReadSkeleton(b *testing.B) {
	const rel = "torch/lib/libtorch_cuda.so"
	dir, files := torchtree.Tree(b, torchtree.Options{Pad: true, Keep: func(r *torchtree.Record) bool { return r.Path == rel }})
	if len(files) != 1 {
		b.Fatalf("%s: %d files in the corpus", rel, len(files))
	}
	b.Logf("%s", dir)
	benchmarkRead(b, files[0])
}

// TestReadCostIsBounded reads every ELF file of the host's library directory
// and checks that none costs more than 256 KiB, or, when its dynamic string
// table alone is larger, more than that table: the reader reads headers,
// the dynamic segment and the pages that hold the strings and version
// records it needs, never a whole file.
func TestReadCostIsBounded(t *testing.T) {
	if _, err := os.Stat(hostLibDir); err != nil {
		lddtest.Need(t, false, "%s is absent", hostLibDir)
	}
	type cost struct {
		path  string
		bytes int64
	}
	var costs []cost
	var total int64
	_ = filepath.WalkDir(hostLibDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return nil
		}
		ef := NewFile(f, st.Size(), p)
		in, err := ef.Info()
		s := ef.Stats()
		if err != nil || !in.Dynamic {
			return nil
		}
		limit := int64(256 << 10)
		if ef, err := elf.NewFile(f); err == nil {
			if v, _ := ef.DynValue(elf.DT_STRSZ); len(v) > 0 && int64(v[0]) > limit {
				limit = int64(v[0])
			}
		}
		if s.BytesRead > limit {
			t.Errorf("%s: read %d bytes (%d reads), limit %d", p, s.BytesRead, s.Reads, limit)
		}
		costs = append(costs, cost{p, s.BytesRead})
		total += s.BytesRead
		return nil
	})
	if len(costs) == 0 {
		lddtest.Need(t, false, "no dynamic ELF objects under %s", hostLibDir)
	}
	sort.Slice(costs, func(i, j int) bool { return costs[i].bytes > costs[j].bytes })
	t.Logf("%d dynamic objects: %d bytes read per file on average, at most %d (%s)", len(costs), total/int64(len(costs)), costs[0].bytes, costs[0].path)
}

// BenchmarkReferencesHostLibrary reads the references of the host's
// largest library, as binding does for every object of a closure.
func BenchmarkReferencesHostLibrary(b *testing.B) {
	p := largestHostLibrary(b)
	b.Logf("%s", p)
	b.ReportAllocs()
	var pages Pages
	var refs int
	for range b.N {
		f, err := Open(p)
		if err != nil {
			b.Fatal(err)
		}
		f.UsePages(&pages)
		r, err := f.References()
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		refs = len(r)
	}
	b.ReportMetric(float64(refs), "references")
}
