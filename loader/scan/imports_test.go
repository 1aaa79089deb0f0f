package scan

import (
	"context"
	"debug/elf"
	"path/filepath"
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
