package scan

import (
	"context"
	"debug/elf"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// TestImportStaticInterpreter checks that a statically linked interpreter
// (python-build-standalone) is replaced by an empty program, while an
// interpreter that cannot be read is an error naming it.
func TestImportStaticInterpreter(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "ext.so")
	static := filepath.Join(dir, "python-static")
	dynamic := filepath.Join(dir, "python-dynamic")
	for path, spec := range map[string]elfwrite.Spec{
		root:    {Soname: "ext.so"},
		static:  {Type: elf.ET_EXEC, Static: true},
		dynamic: {Type: elf.ET_EXEC, Soname: "python-dynamic"},
	} {
		if err := elfwrite.Write(path, spec); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	l, err := ldso.New(ctx, ldso.Options{PreloadSet: true, NoPreloadFile: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	importer := func(exe string) *Importer {
		return NewImporter(l, &pyenv.Env{FromPython: true, Executable: exe}, ImportOptions{Python: exe})
	}

	p, _, err := importer(static).process(ctx, root)
	if err != nil {
		t.Fatalf("static interpreter: %v", err)
	}
	if got := p.Result().Main.Name; got != "(program)" {
		t.Errorf("static interpreter: main program %q, want the empty program", got)
	}

	p, _, err = importer(dynamic).process(ctx, root)
	if err != nil {
		t.Fatalf("dynamic interpreter: %v", err)
	}
	if got := p.Result().Main.Path; got != dynamic {
		t.Errorf("dynamic interpreter: main program %q, want %s", got, dynamic)
	}

	absent := filepath.Join(dir, "absent")
	if _, _, err := importer(absent).process(ctx, root); err == nil || !strings.Contains(err.Error(), absent) {
		t.Errorf("an interpreter that does not exist: %v, want an error naming it", err)
	}
}

// moduleName accepts exactly the names the pattern of CPython's extension
// module file names matches, and gives the same module name: on names
// made of the bytes that matter, at random, and on real ones.
func TestModuleNameAgreesWithPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z0-9_-]+)?\.so$`)
	check := func(base string) {
		t.Helper()
		var want string
		m := pattern.FindStringSubmatch(base)
		if m != nil {
			want = m[1]
		}
		got, ok := moduleName(base)
		if ok != (m != nil) || got != want {
			t.Errorf("moduleName(%q) = %q, %v; the pattern says %q, %v", base, got, ok, want, m != nil)
		}
	}
	for _, base := range []string{"_C.so", "_C.cpython-312-x86_64-linux-gnu.so", "x.abi3.so", "libtorch.so", "libcudart.so.13",
		"9x.so", ".so", "a..so", "a.b.c.so", "a-b.so", "a.b-c.so", "a.so.so", "_.so", "a.", "a.SO", "é.so"} {
		check(base)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "a_Z9.-so/é"
	for range 200000 {
		b := make([]byte, rng.IntN(9))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
		check(string(b) + ".so")
	}
}
