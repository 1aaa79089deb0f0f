package scan

import (
	"context"
	"debug/elf"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
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
