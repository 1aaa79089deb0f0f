package scan

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// TestExtensionModulesBindInTheirInterpreter scans an environment whose
// interpreter defines the C API: its extension module's references to the
// API bind, as at import, and only what nothing defines is reported; the
// library next to it, a program's own main object, is bound as `ldd -r`
// binds it.
func TestExtensionModulesBindInTheirInterpreter(t *testing.T) {
	prefix := t.TempDir()
	site := filepath.Join(prefix, "lib/python3.12/site-packages")
	write := func(p string, spec elfwrite.Linked) {
		t.Helper()
		if err := elfwrite.WriteLinked(p, spec); err != nil {
			t.Fatal(err)
		}
	}
	python := filepath.Join(prefix, "bin/python3.12")
	write(python, elfwrite.Linked{Defs: []elfwrite.Def{{Name: "PyObject_Call", Type: elf.STT_FUNC}, {Name: "PyLong_FromLong", Type: elf.STT_FUNC}}})
	ext := filepath.Join(site, "pkg/_ext.cpython-312-x86_64-linux-gnu.so")
	write(ext, elfwrite.Linked{Soname: "_ext.so", Needed: []string{"libhelper.so"}, RunPath: elfwrite.Str("$ORIGIN"),
		Defs: []elfwrite.Def{{Name: "PyInit__ext", Type: elf.STT_FUNC}},
		Refs: []elfwrite.Ref{{Name: "PyObject_Call"}, {Name: "helper"}, {Name: "PyNew_InAFutureVersion"}}})
	helper := filepath.Join(site, "pkg/libhelper.so")
	write(helper, elfwrite.Linked{Soname: "libhelper.so", Defs: []elfwrite.Def{{Name: "helper"}}, Refs: []elfwrite.Ref{{Name: "PyLong_FromLong"}}})

	ctx := context.Background()
	for _, symbols := range []bool{true, false} {
		l, err := ldso.New(ctx, ldso.Options{PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(ctx, l, []string{site}, Options{Symbols: symbols})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range rep.Roots {
			got[filepath.Base(r.Path)] = fmt.Sprintf("bound_in=%q ok=%v %v", r.BoundIn, r.OK, r.UndefinedSymbols)
		}
		want := map[string]string{
			// In the interpreter's process, the helper's reference binds too.
			filepath.Base(ext): fmt.Sprintf("bound_in=%q ok=false [{%s PyNew_InAFutureVersion  }]", python, ext),
			// Loaded alone, as ld.so --list loads it.
			filepath.Base(helper): fmt.Sprintf("bound_in=\"\" ok=false [{%s PyLong_FromLong  }]", helper),
		}
		if !symbols {
			want = map[string]string{filepath.Base(ext): `bound_in="" ok=true []`, filepath.Base(helper): `bound_in="" ok=true []`}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("symbols=%v:\n got %v\nwant %v", symbols, got, want)
		}
	}
}

// bindingEnv writes an environment whose interpreter defines the C API,
// an extension module that refers to it and to its helper library, and
// the helper, which refers to the API and, when helperRefers, to
// missing_in_helper. It returns the site directory.
func bindingEnv(t *testing.T, prefix string, helperRefers bool) string {
	t.Helper()
	site := filepath.Join(prefix, "lib/python3.12/site-packages")
	write := func(p string, spec elfwrite.Linked) {
		t.Helper()
		if err := elfwrite.WriteLinked(p, spec); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(prefix, "bin/python3.12"), elfwrite.Linked{Defs: []elfwrite.Def{{Name: "PyObject_Call", Type: elf.STT_FUNC}}})
	write(filepath.Join(site, "pkg/_ext.cpython-312-x86_64-linux-gnu.so"), elfwrite.Linked{Soname: "_ext.so", Needed: []string{"libhelper.so"}, RunPath: elfwrite.Str("$ORIGIN"),
		Defs: []elfwrite.Def{{Name: "PyInit__ext", Type: elf.STT_FUNC}},
		Refs: []elfwrite.Ref{{Name: "PyObject_Call"}, {Name: "helper"}, {Name: "missing_in_ext"}}})
	refs := []elfwrite.Ref{{Name: "PyObject_Call"}}
	if helperRefers {
		refs = append(refs, elfwrite.Ref{Name: "missing_in_helper"})
	}
	write(filepath.Join(site, "pkg/libhelper.so"), elfwrite.Linked{Soname: "libhelper.so", Defs: []elfwrite.Def{{Name: "helper"}}, Refs: refs})
	return site
}

// A scan with a cache keeps what binding answered: the next scan of the
// same files answers every check from it, with the same report; a file
// changed since is bound again and its new answer reported; a damaged
// cache, or none, computes every answer.
func TestScanKeepsBindingAnswers(t *testing.T) {
	prefix := t.TempDir()
	site := bindingEnv(t, prefix, true)
	cache := factcache.At(t.TempDir())
	scanned := func(opts Options) (report string, recalled, computed int) {
		t.Helper()
		return scanCounted(t, ldso.Options{PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }}, site, opts)
	}

	want, _, _ := scanned(Options{})
	for _, missing := range []string{"missing_in_ext", "missing_in_helper"} {
		if !bytes.Contains([]byte(want), []byte(missing)) {
			t.Fatalf("the computed report lacks %s: %s", missing, want)
		}
	}
	if got, recalled, computed := scanned(Options{Cache: cache}); got != want || recalled != 0 || computed != 2 {
		t.Fatalf("first scan: %d kept, %d computed; report\n%s\nwant\n%s", recalled, computed, got, want)
	}
	if got, recalled, computed := scanned(Options{Cache: cache}); got != want || recalled != 2 || computed != 0 {
		t.Fatalf("second scan: %d kept, %d computed; report\n%s\nwant\n%s", recalled, computed, got, want)
	}

	// The helper changes: every check that reads it is computed again.
	time.Sleep(10 * time.Millisecond) // a time stamp of its own on coarse clocks
	bindingEnv(t, prefix, false)
	changed, _, _ := scanned(Options{})
	if changed == want || bytes.Contains([]byte(changed), []byte("missing_in_helper")) {
		t.Fatalf("the helper's change is not in the computed report: %s", changed)
	}
	if got, recalled, computed := scanned(Options{Cache: cache}); got != changed || recalled != 0 || computed != 2 {
		t.Fatalf("after the change: %d kept, %d computed; report\n%s\nwant\n%s", recalled, computed, got, changed)
	}

	// A damaged cache is no cache.
	damage(t, cache.Path())
	if got, recalled, computed := scanned(Options{Cache: cache}); got != changed || recalled != 0 || computed != 2 {
		t.Fatalf("damaged cache: %d kept, %d computed", recalled, computed)
	}

	// Files changed moments before the scan began are not trusted to
	// keep their stamps: every check is computed, none kept.
	fresh := Options{Cache: factcache.At(t.TempDir()), began: time.Now()}
	for range 2 {
		if got, recalled, computed := scanned(fresh); got != changed || recalled != 0 || computed != 2 {
			t.Fatalf("files just written: %d kept, %d computed", recalled, computed)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(fresh.Cache.Path(), "bind-*")); len(names) != 0 {
		t.Fatalf("answers of files just written were kept: %q", names)
	}

	// A cache that cannot be written (its directory would be under a
	// file) costs the next scan the binding, and fails nothing.
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got, recalled, computed := scanned(Options{Cache: factcache.At(filepath.Join(blocked, "facts"))}); got != changed || recalled != 0 || computed != 2 {
			t.Fatalf("unwritable cache: %d kept, %d computed; report\n%s\nwant\n%s", recalled, computed, got, changed)
		}
	}
}

// scanCounted scans target with symbols bound and says the report's roots
// as JSON, and how many checks binding answered from what was kept and how
// many it computed (from the scan's debug log).
func scanCounted(t *testing.T, lopts ldso.Options, target string, opts Options) (report string, recalled, computed int) {
	t.Helper()
	ctx := context.Background()
	var log bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Symbols = true
	if opts.began.IsZero() {
		// The files written now are settled for a scan that begins later.
		opts.began = time.Now().Add(5 * time.Second)
	}
	l, err := ldso.New(ctx, lopts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep, err := Run(ctx, l, []string{target}, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep.Roots)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg="binding answers" kept=(\d+) computed=(\d+)`).FindStringSubmatch(log.String())
	if m != nil {
		fmt.Sscan(m[1], &recalled)
		fmt.Sscan(m[2], &computed)
	}
	return string(b), recalled, computed
}

// On the host's libraries, a scan answered from kept answers reports what
// one that computes them does, root for root, and computes none.
func TestKeptAnswersMatchComputedOnHostLibraries(t *testing.T) {
	const dir = "/usr/lib/x86_64-linux-gnu"
	if _, err := os.Stat(dir); err != nil {
		lddtest.Need(t, false, "%s is absent", dir)
	}
	cache := factcache.At(t.TempDir())
	want, _, _ := scanCounted(t, ldso.Options{}, dir, Options{})
	first, _, computed := scanCounted(t, ldso.Options{}, dir, Options{Cache: cache})
	kept, recalled, again := scanCounted(t, ldso.Options{}, dir, Options{Cache: cache})
	if first != want || kept != want {
		t.Fatalf("reports differ: computed %d bytes, first with a cache %d, from kept answers %d", len(want), len(first), len(kept))
	}
	if computed == 0 || again != 0 || recalled < computed {
		t.Fatalf("first scan computed %d; the next computed %d and took %d from the cache", computed, again, recalled)
	}
	t.Logf("%d checks computed, then %d answered from the cache", computed, recalled)
}

// damage overwrites every file of dir with bytes no cache file holds.
func damage(t *testing.T, dir string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("nothing to damage in %s (%v)", dir, err)
	}
	for _, n := range names {
		if err := os.WriteFile(n, []byte("not a cache"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
