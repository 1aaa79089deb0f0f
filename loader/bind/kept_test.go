package bind

import (
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// keptTree writes libconsumer.so, which needs libprovider.so.1 through its
// RPATH and refers to from_provider and to also, and libprovider.so.1,
// which defines from_provider, and also when provides says so.
func keptTree(t *testing.T, dir string, provides bool) string {
	t.Helper()
	defs := []elfwrite.Def{{Name: "from_provider"}}
	if provides {
		defs = append(defs, elfwrite.Def{Name: "also"})
	}
	origin := "$ORIGIN"
	consumer := filepath.Join(dir, "libconsumer.so")
	for p, spec := range map[string]elfwrite.Linked{
		filepath.Join(dir, "libprovider.so.1"): {Soname: "libprovider.so.1", Defs: defs, GNUHash: true},
		consumer: {Soname: "libconsumer.so", Needed: []string{"libprovider.so.1"}, RPath: &origin,
			Refs: []elfwrite.Ref{{Name: "from_provider"}, {Name: "also"}}, GNUHash: true},
	} {
		if err := elfwrite.WriteLinked(p, spec); err != nil {
			t.Fatal(err)
		}
	}
	return consumer
}

// closureKept binds file's closure with a fresh loader and a Binder
// keeping its answers in k, and says which files' references it read.
func closureKept(t *testing.T, file string, k *Kept) (misses []string, read []string) {
	t.Helper()
	b := New().Keeping(k)
	got, err := b.Closure(context.Background(), listed(t, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range got {
		misses = append(misses, filepath.Base(u.Object.Path)+": "+u.Message())
	}
	for path, f := range b.files {
		if f.refs != nil || f.table != nil {
			read = append(read, filepath.Base(path))
		}
	}
	slices.Sort(read)
	return misses, read
}

// listed is file loaded as `ld.so --list` loads it, by a loader of its
// own (a run of its own).
func listed(tb testing.TB, file string) *ldso.Result {
	tb.Helper()
	ctx := context.Background()
	l, err := ldso.New(ctx, noEnv(""))
	if err != nil {
		tb.Fatal(err)
	}
	p, err := l.Start(ctx, file, ldso.AsListed)
	if err != nil {
		tb.Fatal(err)
	}
	return p.Result()
}

// A check answered once is answered again from what was kept, reading no
// symbol table, while its files are as they were; a file changed since, a
// damaged cache or files changed moments before the run make it computed
// anew, and the answer is the one the files give.
func TestKeptAnswers(t *testing.T) {
	dir := t.TempDir()
	consumer := keptTree(t, dir, false)
	cache := factcache.At(t.TempDir())
	name := LoadKept(cache, time.Now(), "test").name // the file its answers are kept in
	// Files written now are settled for a run that begins later.
	later := time.Now().Add(5 * time.Second)
	want := []string{"libconsumer.so: undefined symbol: also"}

	k := LoadKept(cache, later, "test")
	misses, read := closureKept(t, consumer, k)
	if !slices.Equal(misses, want) || len(read) == 0 {
		t.Fatalf("computed: misses %q, read %q", misses, read)
	}
	if k.Len() != 1 {
		t.Fatalf("%d answers kept, want 1", k.Len())
	}
	if err := k.Save(); err != nil {
		t.Fatal(err)
	}

	k = LoadKept(cache, later, "test")
	misses, read = closureKept(t, consumer, k)
	if !slices.Equal(misses, want) || len(read) != 0 {
		t.Fatalf("kept: misses %q, read %q", misses, read)
	}

	// A kept answer that names no object of the check (a cache written by
	// someone else) is computed again.
	for _, of := range []int32{-1, 1000} {
		for key, m := range k.now {
			k.now[key] = []KeptMiss{{Of: of, Symbol: m[0].Symbol}}
		}
		if misses, read = closureKept(t, consumer, k); !slices.Equal(misses, want) || len(read) == 0 {
			t.Fatalf("an answer of object %d: misses %q, read %q", of, misses, read)
		}
	}

	// The provider now defines the symbol: its stamp changed, and so does
	// the answer.
	time.Sleep(10 * time.Millisecond) // a time stamp of its own on coarse clocks
	keptTree(t, dir, true)
	k = LoadKept(cache, later, "test")
	misses, read = closureKept(t, consumer, k)
	if len(misses) != 0 || len(read) == 0 {
		t.Fatalf("after the change: misses %q, read %q", misses, read)
	}
	if err := k.Save(); err != nil {
		t.Fatal(err)
	}

	// A damaged cache is no cache.
	if err := os.WriteFile(filepath.Join(cache.Path(), name), []byte("not a cache"), 0o644); err != nil {
		t.Fatal(err)
	}
	k = LoadKept(cache, later, "test")
	if misses, read = closureKept(t, consumer, k); len(misses) != 0 || len(read) == 0 {
		t.Fatalf("damaged cache: misses %q, read %q", misses, read)
	}

	// Files changed moments before the run began are not trusted to
	// keep their stamps: nothing is kept.
	k = LoadKept(cache, time.Now(), "test")
	if misses, _ = closureKept(t, consumer, k); len(misses) != 0 || k.Len() != 0 {
		t.Fatalf("fresh files: misses %q, %d answers kept", misses, k.Len())
	}
}

// BenchmarkClosureKept binds a closure of 12,288 references in two
// libraries: computed by a fresh Binder each time, and answered from kept
// answers, as a run over unchanged files is.
func BenchmarkClosureKept(b *testing.B) {
	ctx := context.Background()
	r := listed(b, manyReferences().write(b, b.TempDir(), elf.EM_X86_64, true))
	k := LoadKept(factcache.At(b.TempDir()), time.Now().Add(5*time.Second), "bench")
	want, err := New().Keeping(k).Closure(ctx, r)
	if err != nil || k.Len() != 1 {
		b.Fatalf("%d misses, %d kept, %v", len(want), k.Len(), err)
	}
	for _, mode := range []struct {
		name string
		kept *Kept
	}{{"computed", nil}, {"kept", k}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := New().Keeping(mode.kept).Closure(ctx, r)
				if err != nil || len(got) != len(want) {
					b.Fatalf("%d misses, want %d: %v", len(got), len(want), err)
				}
			}
		})
	}
}

// indexFrom finds an object at or after start, else before it, and says
// -1 for one not there: a kept miss names its object by that index.
func TestIndexFrom(t *testing.T) {
	a, b, c, absent := &ldso.Object{}, &ldso.Object{}, &ldso.Object{}, &ldso.Object{}
	name := map[*ldso.Object]string{a: "a", b: "b", c: "c", absent: "absent"}
	objs := []*ldso.Object{a, b, a, c}
	for _, tc := range []struct {
		o     *ldso.Object
		start int
		want  int
	}{
		{a, 0, 0}, {a, 1, 2}, {b, 3, 1}, {c, 0, 3}, {a, 4, 0}, {absent, 0, -1}, {absent, 2, -1},
	} {
		if got := indexFrom(objs, tc.o, tc.start); got != tc.want {
			t.Errorf("indexFrom(%s, %d) = %d, want %d", name[tc.o], tc.start, got, tc.want)
		}
	}
}
