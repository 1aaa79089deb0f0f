package bind

import (
	"context"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// noEnv is a loader model that sees no LD_LIBRARY_PATH or preload, like the
// oracle run with exactly the environment given.
func noEnv(root string) ldso.Options {
	return ldso.Options{Root: root, PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }}
}

// asOracle renders the model's misses as ld.so prints them; hostPath maps
// the model's paths to the oracle's.
func asOracle(list []Undefined, name func(*ldso.Object) string) []lddtest.Undefined {
	var out []lddtest.Undefined
	seen := map[lddtest.Undefined]bool{}
	for _, u := range list {
		x := lddtest.Undefined{Object: name(u.Object), Symbol: u.Symbol, Version: u.Version}
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	lddtest.SortUndefined(out)
	return out
}

func joinUndefined(list []lddtest.Undefined) string {
	var b strings.Builder
	for _, u := range list {
		b.WriteString("\n\t" + u.String())
	}
	return b.String()
}

// agreement counts what an oracle comparison covered.
type agreement struct {
	mu                      sync.Mutex
	objects, files, symbols int
	matched, extra, lacking int
	disagreeing             int
	oracleRefused           int
}

func (a *agreement) add(t *testing.T, file string, got, want []lddtest.Undefined, objects int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files++
	a.objects += objects
	a.symbols += len(want)
	w := map[lddtest.Undefined]bool{}
	for _, u := range want {
		w[u] = true
	}
	g := map[lddtest.Undefined]bool{}
	for _, u := range got {
		g[u] = true
		if w[u] {
			a.matched++
		} else {
			a.extra++
		}
	}
	for _, u := range want {
		if !g[u] {
			a.lacking++
		}
	}
	if joinUndefined(got) != joinUndefined(want) {
		a.disagreeing++
		t.Errorf("%s: undefined symbols differ from ld.so's\nmodel:%s\nld.so:%s", file, joinUndefined(got), joinUndefined(want))
	}
}

func (a *agreement) report(t *testing.T, what string) {
	t.Logf("%s: %d roots (%d objects relocated), ld.so reports %d undefined symbols, the model matches %d, adds %d, lacks %d; %d roots disagree; %d refused by ld.so",
		what, a.files, a.objects, a.symbols, a.matched, a.extra, a.lacking, a.disagreeing, a.oracleRefused)
}

// sample keeps every shared object when CUDADEPS_BIND_ALL=1, else a fixed
// sample of n (the objects with undefined symbols are few, and found by
// the seed as well as by the whole run).
func sample(files []string, n int) []string {
	if os.Getenv("CUDADEPS_BIND_ALL") == "1" || len(files) <= n {
		return files
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	return files[:n]
}

// TestHostLibrariesBindAsLoader compares the undefined symbols of shared
// objects of the host's multiarch directory, each loaded as `ldd -r` loads
// it, with the real loader's. CI checks a sample; CUDADEPS_BIND_ALL=1
// checks every one.
func TestHostLibrariesBindAsLoader(t *testing.T) {
	ldsoPath, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	dir := "/usr/lib/x86_64-linux-gnu"
	files := lddtest.SharedObjects(dir)
	if len(files) < 50 {
		lddtest.Need(t, false, "only %d shared objects under %s", len(files), dir)
	}
	files = sample(files, 120)
	ctx := context.Background()
	l, err := ldso.New(ctx, noEnv(""))
	if err != nil {
		t.Fatal(err)
	}
	b := New()
	env := append([]string{"LC_ALL=C"}, lddtest.BindEnv...)
	var agree agreement
	lddtest.Parallel(files, 4, func(f string) {
		want, err := lddtest.List(ctx, ldsoPath, f, env)
		if err != nil || want.Fatal != "" {
			agree.mu.Lock()
			agree.oracleRefused++
			agree.mu.Unlock()
			return
		}
		r, err := l.Closure(ctx, f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			return
		}
		got, err := b.Closure(ctx, r)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			return
		}
		agree.add(t, f, asOracle(got, func(o *ldso.Object) string { return o.Path }), want.UndefinedSymbols(), len(r.Objects))
	})
	agree.report(t, dir)
	if agree.files < 50 {
		t.Fatalf("only %d objects compared", agree.files)
	}
}

// TestArmSysrootBindsAsLoader compares the undefined symbols of every
// shared object of the arm64 sysroot, read from this host through Root,
// with the arm64 ld.so's under qemu.
func TestArmSysrootBindsAsLoader(t *testing.T) {
	sr := lddtest.ArmSysroot(t)
	ctx := context.Background()
	l, err := ldso.New(ctx, noEnv(sr.Root))
	if err != nil {
		t.Fatal(err)
	}
	b := New()
	var agree agreement
	for _, p := range lddtest.SharedObjects(sr.Root) {
		// Named by its path inside the root, the file has the same $ORIGIN
		// for qemu's loader as for the model.
		want, err := sr.List(ctx, strings.TrimPrefix(p, sr.Root), lddtest.BindEnv)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if want.Fatal != "" {
			agree.oracleRefused++
			continue
		}
		r, err := l.Closure(ctx, p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		got, err := b.Closure(ctx, r)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		// qemu prints the root's files as the guest sees them and the
		// scanned file by the name it was given.
		name := func(o *ldso.Object) string {
			if o == r.Main {
				return strings.TrimPrefix(p, sr.Root)
			}
			return o.Path
		}
		agree.add(t, p, asOracle(got, name), want.UndefinedSymbols(), len(r.Objects))
	}
	agree.report(t, "arm64 sysroot")
	if agree.files < 20 {
		t.Fatalf("only %d objects compared", agree.files)
	}
}
