package main

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/shquote"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
)

// stallingMirror serves half of each archive, then stalls until the client
// goes away; started is closed when the first half has been sent.
func stallingMirror(t *testing.T) (catalogPath, url string, started chan struct{}) {
	t.Helper()
	dir := t.TempDir()
	catalogPath = mirrortest.Build(t, dir, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs: map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}}, Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}}})
	started = make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(r.URL.Path)))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data[:len(data)/2])
		w.(http.Flusher).Flush()
		once.Do(func() { close(started) })
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return catalogPath, srv.URL + "/", started
}

// Point 2: Ctrl-C during a download: the archive is named as failed, the
// bar does not jump to 100 %, exit 130 with a word on resuming.
func TestCLIInterruptedDownload(t *testing.T) {
	dir, _ := missingCudss(t)
	t.Run("pipe", func(t *testing.T) {
		cat, url, started := stallingMirror(t)
		cmd := exec.Command(binary(t), "resolve", dir, "--yes", "--catalog", cat, "--mirror", url, "--prefix", t.TempDir(), "--ld-library-path", "")
		cmd.Env = userEnv(t)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(60 * time.Second):
			t.Fatal("the download never started")
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
			t.Errorf("exit %d, want 130\n%s", code, errb.String())
		}
		if !strings.Contains(errb.String(), "interrupted; rerun resumes") || !strings.Contains(errb.String(), "libcudss 0.9.9.9 (linux-x86_64, cuda13): failed") {
			t.Errorf("stderr should name the failed archive and say a rerun resumes:\n%s", errb.String())
		}
	})
	t.Run("terminal", func(t *testing.T) {
		script, err := exec.LookPath("script")
		if err != nil {
			needScript(t)
		}
		cat, url, started := stallingMirror(t)
		line := strings.Join([]string{shquote.Quote(binary(t)), "resolve", shquote.Quote(dir), "--yes", "--catalog", shquote.Quote(cat), "--mirror", url, "--prefix", shquote.Quote(t.TempDir()), "--ld-library-path", "''"}, " ")
		cmd := exec.Command(script, "-qec", line, "/dev/null")
		cmd.Env = userEnv(t)
		cache := envValue(cmd.Env, "XDG_CACHE_HOME")
		in, typing := io.Pipe()
		cmd.Stdin = in
		var screen strings.Builder
		cmd.Stdout = &screen
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(60 * time.Second):
			t.Fatal("the download never started")
		}
		time.Sleep(300 * time.Millisecond) // let the bar draw
		_, _ = typing.Write([]byte{3})     // Ctrl-C, through the terminal
		_ = typing.Close()
		_ = cmd.Wait()
		s := screen.String()
		if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
			t.Errorf("exit %d, want 130\n%s", code, s)
		}
		if strings.Contains(s, "100%") || !strings.Contains(s, "failed") || !strings.Contains(s, "interrupted; rerun resumes") {
			t.Errorf("the bar must stay where the bytes stopped and the failure be named:\n%q", s)
		}
		// Ctrl-C reaches the terminal's whole foreground group; the partial
		// file must survive it whichever process hears it first.
		if parts, _ := filepath.Glob(filepath.Join(cache, "cudadeps", "archives", "*.part")); len(parts) != 1 {
			t.Errorf("partial downloads after Ctrl-C: %v, want one, for the rerun to resume", parts)
		}
	})
}

// Point 3: printed commands work as printed, with a store elsewhere.
func TestCLIHintsCanBePasted(t *testing.T) {
	dir, m := missingCudss(t)
	env := userEnv(t)
	prefix := filepath.Join(t.TempDir(), "my store") // a space: must be quoted
	r := runBinary(t, env, "", "resolve", dir, "--yes", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", "", "-q")
	if r.code != exitOK {
		t.Fatalf("resolve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The store refuses to remove what is in use, and says what to run.
	r = runBinary(t, env, "", "store", "remove", "libcudss", "--prefix", prefix)
	_, hint, ok := strings.Cut(r.stderr, "run '")
	hint, _, _ = strings.Cut(hint, "' first")
	if r.code == exitOK || !ok || !strings.Contains(hint, "--prefix") {
		t.Fatalf("store remove of an entry in use: exit %d, hint %q\n%s", r.code, hint, r.stderr)
	}

	sh := exec.Command("sh", "-c", hint)
	sh.Env = append(env, "PATH="+filepath.Dir(binary(t))+":"+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed") || placed(dir) {
		t.Errorf("%s: %v, placed=%v\n%s", hint, err, placed(dir), out)
	}
}

// Point 3, the resolve side: "Undo with:" works as printed.
func TestCLIUndoHint(t *testing.T) {
	dir, m := missingCudss(t)
	env := userEnv(t)
	prefix := filepath.Join(t.TempDir(), "it's here")
	r := runBinary(t, env, "", "resolve", dir, "--yes", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", "", "-q")
	_, hint, ok := strings.Cut(r.stdout, "Undo with: ")
	hint, _, _ = strings.Cut(hint, "\n")
	if r.code != exitOK || !ok {
		t.Fatalf("resolve: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	sh := exec.Command("sh", "-c", hint)
	sh.Env = append(env, "PATH="+filepath.Dir(binary(t))+":"+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	if err != nil || placed(dir) {
		t.Errorf("%s: %v, placed=%v\n%s", hint, err, placed(dir), out)
	}
	r = runBinary(t, env, "", "undo", "nothing-here", "--prefix", prefix)
	if r.code == exitOK || strings.Contains(r.stderr, "[") {
		t.Errorf("undo of an unknown target: exit %d: %s", r.code, r.stderr)
	}
}

// Point 4: warnings are short lines by default, key=value with -v, and -v
// walks the rounds.
func TestCLIHumanLogs(t *testing.T) {
	env := userEnv(t)
	// A sysroot whose ld.so.cache is garbage: the loader ignores it, with
	// a warning.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "ld.so.cache"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(t.TempDir(), "libok.so")
	if err := elfwrite.Write(lib, elfwrite.Spec{Soname: "libok.so"}); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, env, "", "scan", lib, "--root", root)
	if !strings.Contains(r.stderr, "warning: ignoring unreadable loader cache") || strings.Contains(r.stderr, "level=") {
		t.Errorf("default: want a short warning line:\n%s", r.stderr)
	}
	r = runBinary(t, env, "", "scan", lib, "--root", root, "--log-format", "json")
	if !strings.Contains(r.stderr, `"level":"WARN"`) {
		t.Errorf("--log-format json:\n%s", r.stderr)
	}
	ok := t.TempDir()
	if err := elfwrite.Write(filepath.Join(ok, "libok.so"), elfwrite.Spec{Soname: "libok.so", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	r = runBinary(t, env, "", "resolve", ok, "-v", "--dry-run", "--ld-library-path", "")
	if !strings.Contains(r.stderr, "level=DEBUG") || !strings.Contains(r.stderr, "msg=round") {
		t.Errorf("resolve -v should walk the rounds as key=value lines:\n%s", r.stderr)
	}
}

// Point 5: nothing to check is not success; a linker script is noted.
func TestCLINothingIsNotSuccess(t *testing.T) {
	env := userEnv(t)
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "README"), []byte("text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"scan", empty}, {"resolve", empty, "--dry-run"}} {
		r := runBinary(t, env, "", append(args, "--ld-library-path", "")...)
		if r.code != exitError || !strings.Contains(r.stderr, "warning: ") || !strings.Contains(r.stderr, empty) {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	r := runBinary(t, env, "", "why", "libx.so.1", "--from", empty)
	if r.code != exitUsage || !strings.Contains(r.stderr, empty) {
		t.Errorf("why --from DIR: exit %d: %s", r.code, r.stderr)
	}

	dir := t.TempDir()
	lib := filepath.Join(dir, "libok.so")
	if err := elfwrite.Write(lib, elfwrite.Spec{Soname: "libok.so", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "libc.so")
	if err := os.WriteFile(script, []byte("/* GNU ld script\n   Use the shared library. */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( /lib/x86_64-linux-gnu/libc.so.6 )\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runBinary(t, env, "", "scan", script, lib, "--json", "--ld-library-path", "")
	var rep struct {
		Roots []json.RawMessage `json:"roots"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Roots) != 1 {
		t.Errorf("scan with a linker script: %v\n%s", err, r.stdout)
	}
	if r.code != exitOK || !strings.Contains(r.stderr, script) || !strings.Contains(r.stderr, "linker script") {
		t.Errorf("scan with a linker script: exit %d, stderr %s", r.code, r.stderr)
	}
}

// TestCLIReportsRecovery: a resolve killed (SIGKILL) mid-download leaves
// its journal; the next resolve says on stderr that it recovered it, and
// an undo after another such kill says so in its report.
func TestCLIReportsRecovery(t *testing.T) {
	dir, m := missingCudss(t)
	env := userEnv(t)
	prefix := t.TempDir()
	kill := func() {
		t.Helper()
		cat, url, started := stallingMirror(t)
		cmd := exec.Command(binary(t), "resolve", dir, "--yes", "--catalog", cat, "--mirror", url, "--prefix", prefix, "--ld-library-path", "")
		cmd.Env = userEnv(t) // a cache of its own: the download must stall
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
		case <-time.After(60 * time.Second):
			t.Fatal("the download never started")
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	kill()
	r := runBinary(t, env, "", "resolve", dir, "--yes", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", "")
	if r.code != exitOK || !strings.Contains(r.stderr, "recovered an interrupted run") {
		t.Fatalf("resolve after a kill: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = runBinary(t, env, "", "undo", dir, "--prefix", prefix)
	if r.code != exitOK || strings.Contains(r.stdout, "recovered") {
		t.Fatalf("undo: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	kill()
	r = runBinary(t, env, "", "undo", dir, "--prefix", prefix)
	if r.code != exitOK || !strings.Contains(r.stdout, "an interrupted resolve was recovered first") {
		t.Errorf("undo after a kill: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(prefix, "activations")); len(entries) != 0 {
		t.Errorf("records or journals left: %v", entries)
	}
}

// A file named like a library that is not ELF at all is said to be not
// ELF; it is not counted among ELF files skipped as static or unloadable.
func TestCLITextFileNamedSoIsNotCountedAsELF(t *testing.T) {
	env := userEnv(t)
	text := filepath.Join(t.TempDir(), "notes.so")
	if err := os.WriteFile(text, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, env, "", "scan", text, "--ld-library-path", "")
	if strings.Contains(r.stdout, "ELF file(s) skipped") || !strings.Contains(r.stdout, "1 file skipped: not ELF") {
		t.Errorf("scan of a text file named .so: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep struct {
		Skipped []struct {
			Path   string `json:"path"`
			NotELF bool   `json:"not_elf"`
		} `json:"skipped"`
	}
	r = runBinary(t, env, "", "scan", text, "--ld-library-path", "", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Skipped) != 1 || !rep.Skipped[0].NotELF {
		t.Errorf("--json: %v\n%s", err, r.stdout)
	}
}

// A file outside --root DIR is scanned from this machine against DIR's
// loader model; when DIR has no loader for the file's machine (an x86_64
// library against an aarch64 sysroot) the result describes no system the
// file runs on, and the scan says so. A file of DIR's machine gets no word.
func TestCLIRootMachineMismatch(t *testing.T) {
	env := userEnv(t)
	root := t.TempDir()
	for p, spec := range map[string]elfwrite.Spec{
		"lib/ld-linux-aarch64.so.1":       {Machine: elf.EM_AARCH64, Soname: "ld-linux-aarch64.so.1"},
		"lib/aarch64-linux-gnu/libc.so.6": {Machine: elf.EM_AARCH64, Soname: "libc.so.6"},
	} {
		if err := elfwrite.Write(filepath.Join(root, p), spec); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	x86 := filepath.Join(dir, "libx86.so")
	arm := filepath.Join(dir, "libarm.so")
	if err := elfwrite.Write(x86, elfwrite.Spec{Soname: "libx86.so", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.Write(arm, elfwrite.Spec{Machine: elf.EM_AARCH64, Soname: "libarm.so", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, env, "", "scan", x86, "--root", root, "--ld-library-path", "")
	if out := r.stdout + r.stderr; !strings.Contains(out, "warning: "+x86+" is an x86_64 object") || !strings.Contains(out, "no x86_64 loader") {
		t.Errorf("an x86_64 file against an aarch64 root: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runBinary(t, env, "", "scan", arm, "--root", root, "--ld-library-path", "")
	if strings.Contains(r.stdout+r.stderr, "loader") || r.code != exitOK {
		t.Errorf("an aarch64 file against an aarch64 root: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// One missing library does not flood the report with every symbol its
// users take from it: those symbols are grouped under the missing library
// (versioned ones by the file their version names, unversioned ones of an
// object that needs a missing library by that object), a few named, the
// count given; --json keeps every one, with the file its version is
// needed from. A symbol of an object that lacks no library is listed as
// ld.so lists it.
func TestCLIUndefinedSymbolsGroupedUnderMissingLibrary(t *testing.T) {
	env := userEnv(t)
	dir := t.TempDir()
	var refs []elfwrite.Ref
	for i := 0; i < 130; i++ {
		refs = append(refs, elfwrite.Ref{Name: fmt.Sprintf("cublasLtFn%03d", i), Version: "libcublasLt.so.13"})
	}
	for i := 0; i < 40; i++ {
		refs = append(refs, elfwrite.Ref{Name: fmt.Sprintf("cudssFn%02d", i)})
	}
	lib := filepath.Join(dir, "libapp.so")
	if err := elfwrite.WriteLinked(lib, elfwrite.Linked{Soname: "libapp.so", Needed: []string{"libcublasLt.so.13", "libcudss.so.0", "libc.so.6"},
		VersionNeeds: []elfwrite.VersionNeed{{File: "libcublasLt.so.13", Versions: []string{"libcublasLt.so.13"}}}, Refs: refs}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "libother.so")
	if err := elfwrite.WriteLinked(other, elfwrite.Linked{Soname: "libother.so", Needed: []string{"libc.so.6"}, Refs: []elfwrite.Ref{{Name: "plainMissing"}}}); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, env, "", "scan", dir, "--ld-library-path", "")
	if n := strings.Count(r.stdout, "undefined symbol: cublasLtFn") + strings.Count(r.stdout, "undefined symbol: cudssFn"); n > 0 {
		t.Errorf("%d lines for the symbols of missing libraries:\n%s", n, r.stdout)
	}
	for _, want := range []string{
		"130 undefined symbols needed from libcublasLt.so.13, which is missing: cublasLtFn000, cublasLtFn001, cublasLtFn002 and 127 more",
		"40 undefined symbols of " + lib + ", which needs libcublasLt.so.13, libcudss.so.0 (missing): cudssFn00, cudssFn01, cudssFn02 and 37 more",
		other + ": undefined symbol: plainMissing",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the report should say %q:\n%s", want, r.stdout)
		}
	}
	var rep struct {
		Roots []struct {
			UndefinedSymbols []struct {
				Symbol string `json:"symbol"`
				File   string `json:"file"`
			} `json:"undefined_symbols"`
		} `json:"roots"`
	}
	r = runBinary(t, env, "", "scan", lib, "--ld-library-path", "", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Roots) != 1 || len(rep.Roots[0].UndefinedSymbols) != 170 || rep.Roots[0].UndefinedSymbols[0].File != "libcublasLt.so.13" {
		t.Errorf("--json should keep every symbol with its file (%v):\n%.2000s", err, r.stdout)
	}
}

// envValue is the value of key in env, "" when unset.
func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// --verbose prints every tree, as --all does: a scan of a directory whose
// objects all load prints each of them, and the summary.
func TestCLIScanVerbosePrintsEveryTree(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"liba.so", "libb.so"} {
		if err := elfwrite.Write(filepath.Join(dir, name), elfwrite.Spec{Soname: name, Needed: []string{"libc.so.6"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, flag := range []string{"--all", "-v"} {
		r := runBinary(t, userEnv(t), "", "scan", dir, flag, "--ld-library-path", "")
		if r.code != exitOK || !strings.Contains(r.stdout, "liba.so") || !strings.Contains(r.stdout, "libb.so") || strings.Contains(r.stderr, "panic") {
			t.Errorf("scan %s: exit %d\nstdout:\n%s\nstderr:\n%s", flag, r.code, r.stdout, r.stderr)
		}
	}
}
