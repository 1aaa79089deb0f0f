package main

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
)

// A library nothing provides is explained once: its reason and advice do
// not repeat each other, and a later round does not say it all again.
func TestCLIAdviceSaidOnce(t *testing.T) {
	dir := t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libapp.so"), elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libcudss.so.0", "libcuda.so.1", "libnosuch.so.7", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")}); err != nil {
		t.Fatal(err)
	}
	m := mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}}, Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}}})
	r := runBinary(t, userEnv(t), "", "resolve", dir, "--yes", "--quiet", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", t.TempDir(), "--ld-library-path", "", "--cuda", "13")
	if r.code != exitMissing || !strings.Contains(r.stdout, "Round 2") {
		t.Fatalf("exit %d, want 3 after two rounds\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, said := range []string{"comes with the NVIDIA driver", "no catalog knows libnosuch.so.7", "install the library that provides it"} {
		if n := strings.Count(r.stdout, said); n != 1 {
			t.Errorf("%q said %d times, want once:\n%s", said, n, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "libcuda.so.1, libnosuch.so.7: still missing (see round 1)") {
		t.Errorf("round 2 should name what is still missing and point back:\n%s", r.stdout)
	}
}

// When the libraries reach the loader only through the activation script
// (the object searches no directory one may write), resolve does not say
// the loader finds everything before the script is sourced: it says what to
// source, and how to undo.
func TestCLIDoneSaysWhatToSource(t *testing.T) {
	dir := t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "libapp.so"), elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libcudss.so.0", "libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	m := mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}}, Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}}})
	prefix := t.TempDir()
	r := runBinary(t, userEnv(t), "", "resolve", dir, "--yes", "--quiet", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", "", "--cuda", "13")
	script := filepath.Join(prefix, "env.sh")
	if r.code != exitOK || strings.Contains(r.stdout, "the loader now finds everything.") {
		t.Errorf("exit %d; before the script is sourced the loader finds nothing new:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "run '. "+script+"'") || !strings.Contains(r.stdout, "Undo with: cudadeps undo "+dir) {
		t.Errorf("the report should say what to source and how to undo:\n%s", r.stdout)
	}
}

// A HOME nobody can write under (here a file, which even root cannot make
// directories in) leaves the default store and cache unusable: the error
// says so and names --prefix (and --cache), instead of a bare mkdir error.
// Reading what is optional there (the config file, the user catalog layer,
// pip's configuration) treats it as absent.
func TestCLIUnwritableHomeSuggestsPrefix(t *testing.T) {
	dir, m := missingCudss(t)
	home := filepath.Join(t.TempDir(), "home")
	if err := os.WriteFile(home, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range userEnv(t) {
		if !strings.HasPrefix(kv, "XDG_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PIP_") {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home)
	for _, args := range [][]string{
		{"fetch", "libcudss", "--platform", "linux-x86_64", "--cuda", "13"},
		{"resolve", dir, "--yes", "--ld-library-path", ""},
	} {
		r := runBinary(t, env, "", append(args, "--catalog", m.Catalog, "--mirror", m.URL)...)
		if r.code != exitError || !strings.Contains(r.stderr, "--prefix") || strings.Contains(r.stderr, "config file") || strings.Contains(r.stderr, "pip configuration") {
			t.Errorf("%s with HOME a file: exit %d; want a hint naming --prefix\n%s%s", args[0], r.code, r.stdout, r.stderr)
		}
	}
	// With --prefix and --cache elsewhere, the same command works.
	r := runBinary(t, env, "", "resolve", dir, "--yes", "--ld-library-path", "", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", t.TempDir(), "--cache", t.TempDir())
	if r.code != exitOK {
		t.Errorf("resolve with --prefix and --cache: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// An archive already in the download cache is not counted as a download:
// the plan says it comes from the cache, the question counts only what
// will be fetched, and nothing is.
func TestCLIPlanCountsCachedArchivesAsCached(t *testing.T) {
	env := userEnv(t) // one download cache for both runs
	dir, m := missingCudss(t)
	if r := runBinary(t, env, "", "resolve", dir, "--yes", "--quiet", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", t.TempDir(), "--ld-library-path", ""); r.code != exitOK {
		t.Fatalf("first resolve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	dir2, m2 := missingCudss(t) // the same archive, another store
	prefix := t.TempDir()
	r := runBinary(t, env, "", "resolve", dir2, "--catalog", m2.Catalog, "--mirror", m2.URL, "--prefix", prefix, "--ld-library-path", "")
	if !strings.Contains(r.stderr, "in the download cache") || !strings.Contains(r.stderr, "Total: 0 archive(s) to download") {
		t.Errorf("the plan should count the cached archive as cached:\n%s", r.stderr)
	}
	if r.code != exitUsage || !strings.Contains(r.stderr, `"Place the libraries`) {
		t.Errorf("the question should not speak of a download: exit %d\n%s", r.code, r.stderr)
	}
	r = runBinary(t, env, "", "resolve", dir2, "--yes", "--catalog", m2.Catalog, "--mirror", m2.URL, "--prefix", prefix, "--ld-library-path", "")
	if r.code != exitOK || m2.Total() != 0 {
		t.Errorf("resolve from the cache: exit %d, %d requests to the mirror\n%s%s", r.code, m2.Total(), r.stdout, r.stderr)
	}
	// The report after it does not count the cached archive either.
	if strings.Contains(r.stdout, "total download") || !strings.Contains(r.stdout, "in the download cache") {
		t.Errorf("the report counts the cached archive as a download:\n%s", r.stdout)
	}
}

// why tells a symbolic link loop, and a link to nothing, from a missing
// file: the loader skips all three (its open fails), but the fix differs.
func TestCLIWhyNamesSymlinkLoops(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "app", "libapp.so")
	if err := elfwrite.Write(lib, elfwrite.Spec{Soname: "libapp.so", Needed: []string{"libloop.so.1", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN:$ORIGIN/../dangling")}); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("libloop.so.1", filepath.Join(dir, "app", "libloop.so.1")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "dangling"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("gone.so", filepath.Join(dir, "dangling", "libloop.so.1")); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, userEnv(t), "", "why", "libloop.so.1", "--from", lib, "--ld-library-path", "")
	for _, line := range strings.Split(r.stdout, "\n") {
		switch {
		case strings.Contains(line, filepath.Join(dir, "app", "libloop.so.1")):
			if !strings.Contains(line, "symbolic link loop") || strings.Contains(line, "no such file") {
				t.Errorf("the loop is not named: %q", line)
			}
		case strings.Contains(line, "dangling/libloop.so.1"):
			if !strings.Contains(line, "symbolic link to nothing") {
				t.Errorf("the dangling link is not named: %q", line)
			}
		}
	}
	if r.code != exitMissing || !strings.Contains(r.stdout, "symbolic link loop") || !strings.Contains(r.stdout, "symbolic link to nothing") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
