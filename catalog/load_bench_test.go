package catalog

import (
	"fmt"
	"strings"
	"testing"
)

// bigCatalog writes a catalog of n components, each with one release of
// one archive, in the layout `catalog import` writes.
func bigCatalog(n int) []byte {
	var b strings.Builder
	b.WriteString("format: 1\nproducts:\n  p:\n    base_url: https://example.com/p/\ncomponents:\n")
	for i := range n {
		fmt.Fprintf(&b, "  c%d:\n    product: p\n    releases:\n      - version: 1.0.%d\n        archives:\n          - platform: linux-x86_64\n            path: c%d/linux-x86_64/c%d-1.0-archive.tar.xz\n            sha256: %064x\n            size: %d\n            sonames: [libc%d.so.1]\n", i, i, i, i, i, i+1, i)
	}
	return []byte(b.String())
}

// BenchmarkParse100k parses a catalog of 100,000 components (about 36 MB).
func BenchmarkParse100k(b *testing.B) {
	data := bigCatalog(100_000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, "big.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseScaling reports how much eight times the components cost
// (a linear parse is about 8x; with a quadratic step, as the YAML
// library's duplicate-key check on a whole mapping, it was 30x). A ratio of
// two measurements belongs to a benchmark run, not to a unit test on a
// shared machine.
func BenchmarkParseScaling(b *testing.B) {
	cost := func(n int) float64 {
		data := bigCatalog(n)
		r := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse(data, "big.yaml"); err != nil {
					b.Fatal(err)
				}
			}
		})
		return float64(r.NsPerOp())
	}
	for b.Loop() {
		b.ReportMetric(cost(40_000)/cost(5_000), "x-for-8x-components")
	}
}
