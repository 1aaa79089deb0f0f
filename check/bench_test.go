package check

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
)

// BenchmarkCheckCached is the prologue's case: libtorch_cuda.so of the
// torch skeleton checked again with nothing changed, the answer given
// from cache after one stat per input. It reports the inputs stat'ed.
func BenchmarkCheckCached(b *testing.B) {
	const rel = "torch/lib/libtorch_cuda.so"
	dir, _ := torchtree.Tree(b, torchtree.Options{})
	opts := Options{Target: filepath.Join(dir, rel), Loader: noEnv(), Catalog: embedded, Cache: factcache.At(b.TempDir())}
	ctx := context.Background()
	if _, err := runWithin(ctx, opts, 0); err != nil {
		b.Fatal(err)
	}
	var v verdict[json.RawMessage]
	key := factcache.Key("check", joinKey(context.Background(), opts, ""))
	if !opts.Cache.Load(key, &v) {
		b.Fatal("no answer kept")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r, err := runWithin(ctx, opts, 0)
		if err != nil || !r.Cached {
			b.Fatalf("%+v, %v", r, err)
		}
	}
	b.ReportMetric(float64(len(v.Inputs.Paths)), "inputs")
}

// BenchmarkCheckFile is a check computed anew (no cache) of one library.
func BenchmarkCheckFile(b *testing.B) {
	lib := filepath.Join(b.TempDir(), "libroot.so")
	if err := elfwrite.Write(lib, elfwrite.Spec{Soname: "libroot.so", Needed: []string{"libc.so.6", "libm.so.6"}}); err != nil {
		b.Fatal(err)
	}
	opts := Options{Target: lib, Loader: noEnv(), Catalog: embedded}
	b.ReportAllocs()
	for range b.N {
		if _, err := runWithin(context.Background(), opts, 0); err != nil {
			b.Fatal(err)
		}
	}
}
