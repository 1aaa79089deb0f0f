package bind

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// opener dlopens argv[1] (RTLD_GLOBAL when argv[2] is "global", else
// RTLD_LOCAL), then argv[3] with RTLD_NOW, and prints what dlerror says.
const opener = `#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
	if (argc != 4) return 2;
	int mode = RTLD_NOW | (strcmp(argv[2], "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL);
	if (!dlopen(argv[1], mode)) { printf("first: %s\n", dlerror()); return 2; }
	if (!dlopen(argv[3], RTLD_NOW)) { printf("%s\n", dlerror()); return 1; }
	printf("loaded\n");
	return 0;
}
`

// TestRTLDGlobalJoinsTheGlobalScope checks that a symbol defined only by an
// object opened earlier with RTLD_GLOBAL binds, and that opened with
// RTLD_LOCAL it does not, against a real program that dlopens both.
func TestRTLDGlobalJoinsTheGlobalScope(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	lddtest.Need(t, err == nil, "gcc is not installed")
	dir := t.TempDir()
	src := filepath.Join(dir, "opener.c")
	prog := filepath.Join(dir, "opener")
	if err := os.WriteFile(src, []byte(opener), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-o", prog, src).CombinedOutput(); err != nil {
		lddtest.Need(t, false, "gcc cannot build a program: %v: %s", err, out)
	}
	provider := filepath.Join(dir, "libprovider.so.1")
	consumer := filepath.Join(dir, "libconsumer.so")
	for p, spec := range map[string]elfwrite.Linked{
		provider: {Soname: "libprovider.so.1", Defs: []elfwrite.Def{{Name: "from_provider"}}, GNUHash: true},
		// The consumer does not need the provider: only the global scope
		// can hold the symbol.
		consumer: {Soname: "libconsumer.so", Refs: []elfwrite.Ref{{Name: "from_provider"}}, GNUHash: true},
	} {
		if err := elfwrite.WriteLinked(p, spec); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for _, mode := range []string{"global", "local"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(prog, provider, mode, consumer)
			cmd.Env = []string{"LC_ALL=C"}
			out, _ := cmd.Output()
			want := strings.TrimSpace(string(out))
			if strings.HasPrefix(want, "first:") || want == "" {
				t.Fatalf("the oracle program failed: %q", want)
			}
			// The fixture must show the rule either way.
			if (mode == "global") != (want == "loaded") {
				t.Fatalf("dlopen with RTLD_%s: %q", strings.ToUpper(mode), want)
			}
			l, err := ldso.New(ctx, noEnv(""))
			if err != nil {
				t.Fatal(err)
			}
			p, err := l.Start(ctx, prog, ldso.AsExecuted)
			if err != nil {
				t.Fatal(err)
			}
			a, err := p.Dlopen(ctx, provider)
			if err != nil {
				t.Fatal(err)
			}
			o, err := p.Dlopen(ctx, consumer)
			if err != nil {
				t.Fatal(err)
			}
			var globals []*ldso.Object
			if mode == "global" {
				globals = append(globals, a)
			}
			misses, err := New().Dlopened(ctx, p, o, globals...)
			if err != nil {
				t.Fatal(err)
			}
			got := "loaded"
			if len(misses) > 0 {
				got = misses[0].Object.Path + ": " + misses[0].Message()
			}
			if got != want || len(misses) > 1 {
				t.Errorf("model: %q (%d misses), dlopen: %q", got, len(misses), want)
			}
		})
	}
}
