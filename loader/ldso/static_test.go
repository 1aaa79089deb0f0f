package ldso

import (
	"context"
	"debug/elf"
	"errors"
	"path/filepath"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// TestStartStaticProgram checks that a program without a dynamic segment is
// refused with ErrStaticallyLinked, which callers test for instead of the
// message, and that the real loader, too, finds nothing to load for it.
func TestStartStaticProgram(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "static")
	dynamic := filepath.Join(dir, "dynamic")
	if err := elfwrite.Write(static, elfwrite.Spec{Type: elf.ET_EXEC, Static: true}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.Write(dynamic, elfwrite.Spec{Type: elf.ET_EXEC, Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	env, opts := hostEnv(nil)
	l, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Start(ctx, static, AsExecuted)
	if !errors.Is(err, ErrStaticallyLinked) {
		t.Fatalf("Start(static) = %v, want ErrStaticallyLinked", err)
	}
	if _, err := l.Start(ctx, dynamic, AsExecuted); err != nil {
		t.Fatalf("Start(dynamic) = %v", err)
	}
	if _, err := l.Start(ctx, filepath.Join(dir, "absent"), AsExecuted); err == nil || errors.Is(err, ErrStaticallyLinked) {
		t.Fatalf("Start(absent) = %v, want an error other than ErrStaticallyLinked", err)
	}

	ldsoPath, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	want, err := lddtest.List(ctx, ldsoPath, static, env)
	if err != nil {
		t.Fatal(err)
	}
	if !want.Static || len(want.Lines) != 0 {
		t.Fatalf("the real loader does not call the program statically linked:\n%s", want.Raw)
	}
}
