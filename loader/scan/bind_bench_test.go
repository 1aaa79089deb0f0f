package scan

import (
	"context"
	"os"
	"testing"

	"github.com/cudadeps/cudadeps/internal/procstat"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// BenchmarkScanHostLibrariesWithSymbols is BenchmarkScanHostLibraries with
// every symbol bound: what `cudadeps scan` costs by default. It reports the
// undefined symbols found, and the processor time per scan.
func BenchmarkScanHostLibrariesWithSymbols(b *testing.B) {
	const dir = "/usr/lib/x86_64-linux-gnu"
	if _, err := os.Stat(dir); err != nil {
		lddtest.Need(b, false, "%s is absent", dir)
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu := procstat.CPUTime(b)
	var roots, undefined int
	for i := 0; i < b.N; i++ {
		l, err := ldso.New(ctx, ldso.Options{})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := Run(ctx, l, []string{dir}, Options{Symbols: true})
		if err != nil {
			b.Fatal(err)
		}
		l.Close()
		roots, undefined = len(rep.Roots), 0
		for _, r := range rep.Roots {
			undefined += len(r.UndefinedSymbols)
		}
	}
	b.ReportMetric(float64(procstat.CPUTime(b)-cpu)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(roots), "objects")
	b.ReportMetric(float64(undefined), "undefined")
}
