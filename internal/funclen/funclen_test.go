package funclen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MaxLines is the most lines a function of the packages below may have.
const MaxLines = 80

// limited are the directories whose functions MaxLines holds, relative to
// this one, and the names they are reported by.
var limited = map[string]string{
	"../../activation":     "activation",
	"../../catalog":        "catalog",
	"../../cmd/cudadeps":   "cmd/cudadeps",
	"../../config":         "config",
	"../../fetch":          "fetch",
	"../../mirror":         "mirror",
	"../../plan":           "plan",
	"../../platform":       "platform",
	"../../pyenv":          "pyenv",
	"../../pymeta":         "pymeta",
	"../../pypi":           "pypi",
	"../../resolver":       "resolver",
	"../../runtimeopen":    "runtimeopen",
	"../../elfscan":        "elfscan",
	"../../bind":           "bind",
	"../../scan":           "scan",
	"../../ldso":           "ldso",
	"../../check":          "check",
	"../factcache":         "internal/factcache",
	"../../declared":       "declared",
	"../../doctor":         "doctor",
	"../../fleet/registry": "fleet/registry",
	"../../gpuarch":        "gpuarch",
}

// notYetSplit lists files whose long functions are being split elsewhere;
// their functions are not held to MaxLines. The list is meant to shrink to
// nothing.
var notYetSplit = map[string]bool{}

// TestFunctionLength fails on every function of the limited packages (tests
// excluded) longer than MaxLines, naming it.
func TestFunctionLength(t *testing.T) {
	for dir, name := range limited {
		funcs, err := Dir(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(funcs) == 0 {
			t.Fatalf("no functions in %s", dir)
		}
		for _, f := range funcs {
			rel := name + "/" + filepath.Base(f.File)
			if f.Lines > MaxLines && !notYetSplit[rel] {
				t.Errorf("%s:%d: %s has %d lines, more than %d", rel, f.Line, f.Name, f.Lines, MaxLines)
			}
		}
	}
}

// TestDir measures functions of known lengths written for the test: plain
// functions, methods on values, pointers and generic types, one-liners, and
// test files only when asked.
func TestDir(t *testing.T) {
	dir := t.TempDir()
	body := func(n int) string { return strings.Repeat("\t_ = 0\n", n) }
	src := "package x\n\ntype T[E any] struct{}\ntype U struct{}\n\n" +
		"func a() {\n" + body(81) + "}\n\n" +
		"func (T[E]) b() {\n" + body(3) + "}\n\n" +
		"func (*U) c() {}\n\n" +
		"// d is declared, not defined.\nfunc d()\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package x\n\nfunc e() {\n"+body(1)+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{"a:6:83", "T.b:90:5", "U.c:96:1"}
	check := func(tests bool, want []string) {
		t.Helper()
		funcs, err := Dir(dir, tests)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range funcs {
			got = append(got, fmt.Sprintf("%s:%d:%d", f.Name, f.Line, f.Lines))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Dir(tests=%v) = %v, want %v", tests, got, want)
		}
	}
	check(false, want)
	check(true, append(want, "e:3:3"))
}
