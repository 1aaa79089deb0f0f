package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// Point 6: usage mistakes are exit 2 everywhere, and messages say what is wrong.
func TestCLIExitCodesAndMessages(t *testing.T) {
	env := userEnv(t)
	prefix := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"resolve", "torch", "--mirror", "ftp://x/"}, exitUsage, "--mirror: "},
		{[]string{"fetch", "libcudss", "--mirror", "ftp://x/"}, exitUsage, "--mirror: "},
		{[]string{"catalog", "list", "--mirror", "ftp://x/"}, exitUsage, "--mirror: "},
		{[]string{"catalog", "lst"}, exitUsage, `unknown command "lst"`},
		{[]string{"store", "remove", "libcudss", "--platform", "bogus", "--prefix", prefix}, exitUsage, "--platform: "},
		{[]string{"fetch", "libcudss", "--cuda", "abc"}, exitUsage, `--cuda: "abc" is not a CUDA major (e.g. 12, 13)`},
		{[]string{"fetch", "libcudss@9.9", "--platform", "linux-x86_64", "--cuda", "13", "--prefix", prefix}, exitMissing, "libcudss has no release 9.9 (it has: "},
		{[]string{"fetch", "libcudss", "--platform", "linux-x86_64", "--cuda", "11", "--prefix", prefix}, exitMissing, "libcudss has no archive for linux-x86_64 and CUDA 11"},
		{[]string{"fetch", "libcudss", "--platform", "linux-x86_64", "--cuda", "13", "--prefix", prefix, "--mirror", "http://mirror.example.invalid/", "-q"}, exitError, "--allow-http"},
		{[]string{"resolve", "torch", "--python", "/bin/false", "--dry-run"}, exitError, "/bin/false"},
	} {
		r := runBinary(t, env, "", c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || strings.HasSuffix(strings.TrimSpace(r.stderr), ":") {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q in one line)", c.args, r.code, c.code, r.stderr, c.want)
		}
	}
	r := runBinary(t, env, "", "catalog", "which", "libcudss.so.0", "--platform", "linux-x86_64")
	if r.code != exitUsage || !strings.Contains(r.stdout, "ambiguous") || !regexp.MustCompile(`--cuda \d+ or --cuda \d+`).MatchString(r.stdout) {
		t.Errorf("which without --cuda: exit %d: %s", r.code, r.stdout)
	}
}

// Point 7: one size unit; every JSON document has a schema; lists are [].
func TestCLIOneVocabulary(t *testing.T) {
	env := userEnv(t)
	r := runBinary(t, env, "", "catalog", "show", "libcudss", "--platform", "linux-x86_64")
	if !regexp.MustCompile(`\d+\.\d MiB`).MatchString(r.stdout) || regexp.MustCompile(`\d (kB|MB|GB)\b`).MatchString(r.stdout) {
		t.Errorf("catalog show sizes: %s", r.stdout)
	}

	ok := t.TempDir()
	lib := filepath.Join(ok, "libok.so")
	if err := elfwrite.Write(lib, elfwrite.Spec{Soname: "libok.so"}); err != nil {
		t.Fatal(err)
	}
	prefix := t.TempDir()
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("format: 1\ncomponents: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	worse := filepath.Join(t.TempDir(), "worse.yaml")
	if err := os.WriteFile(worse, []byte("format: 99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	docs := map[string][]string{
		schemaScan:           {"scan", lib, "--json", "--ld-library-path", ""},
		schemaResolve:        {"resolve", ok, "--dry-run", "--json", "--ld-library-path", ""},
		schemaStoreList:      {"store", "list", "--json", "--prefix", prefix},
		schemaCheck:          {"check", lib, "--json", "--ld-library-path", "", "--prefix", prefix},
		schemaUndo:           {"undo", "--yes", "--json", "--prefix", prefix},
		schemaCatalogList:    {"catalog", "list", "--json"},
		schemaCatalogWhich:   {"catalog", "which", "libcudss.so.0", "--platform", "linux-sbsa", "--cuda", "13", "--json"},
		schemaCatalogShow:    {"catalog", "show", "libcudss", "--json"},
		schemaCatalogCheck:   {"catalog", "validate", bad, worse, "--json"},
		schemaCatalogUnknown: {"catalog", "which", "libnothing.so.1", "--platform", "linux-sbsa", "--json"},
	}
	for schema, args := range docs {
		r := runBinary(t, env, "", args...)
		var doc map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc["schema"] != schema {
			t.Errorf("%v: schema %v, %v\n%s%s", args, doc["schema"], err, r.stdout, r.stderr)
		}
	}
	r = runBinary(t, env, "", docs[schemaResolve]...)
	for _, list := range []string{`"missing": []`, `"in_place": []`} {
		if !strings.Contains(r.stdout, list) {
			t.Errorf("resolve --json: want %s:\n%s", list, r.stdout)
		}
	}
	r = runBinary(t, env, "", docs[schemaUndo]...)
	if !strings.Contains(r.stdout, `"undone": []`) {
		t.Errorf("undo --json of nothing: %s", r.stdout)
	}
	// validate reports every file's problems in one run.
	r = runBinary(t, env, "", "catalog", "validate", bad, worse)
	if r.code != exitError || !strings.Contains(r.stdout, bad+": FAIL") || !strings.Contains(r.stdout, worse+": FAIL") {
		t.Errorf("validate two bad files: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}

// Point 8: completions complete, every command has examples, the version
// comes from the build, colour only on a terminal, undo-all asks.
func TestCLIConventions(t *testing.T) {
	env := userEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "fetch", "libcu"}, "libcudss"},
		{[]string{"__complete", "catalog", "show", ""}, "libcublas"},
		{[]string{"__complete", "catalog", "which", "libcuds"}, "libcudss.so.0"},
		{[]string{"__complete", "catalog", "which", "x", "--platform", ""}, "linux-sbsa"},
		{[]string{"__complete", "store", "remove", "x", "--platform", ""}, "linux-aarch64"},
	} {
		if r := runBinary(t, env, "", c.args...); !strings.Contains(r.stdout, c.want) {
			t.Errorf("%v: want %s among:\n%s", c.args, c.want, r.stdout)
		}
	}

	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			args := append(strings.Fields(sub.CommandPath())[1:], "--help")
			if r := runBinary(t, env, "", args...); !strings.Contains(r.stdout, "Examples:\n  cudadeps ") {
				t.Errorf("%s --help has no Examples section", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(newApp(nil, nil, nil).rootCommand())

	r := runBinary(t, env, "", "--version")
	meta, err := exec.Command("go", "version", "-m", binary(t)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`vcs\.revision=([0-9a-f]{12})`).FindSubmatch(meta); m != nil {
		if !strings.Contains(r.stdout, string(m[1])) {
			t.Errorf("--version %q does not name the revision %s", r.stdout, m[1])
		}
	} else if !bytes.Contains(meta, []byte("vcs.")) && !strings.Contains(r.stdout, "version dev") {
		t.Errorf("--version %q without build metadata", r.stdout)
	}

	missing := filepath.Join(t.TempDir(), "libneeds.so")
	if err := elfwrite.Write(missing, elfwrite.Spec{Soname: "libneeds.so", Needed: []string{"libnowhere.so.3"}}); err != nil {
		t.Fatal(err)
	}
	red := "\x1b[1;31mNOT FOUND"
	if _, screen := runTerminal(t, env, "", "scan", missing, "--ld-library-path", ""); !strings.Contains(screen, red) {
		t.Errorf("terminal: NOT FOUND is not red:\n%q", screen)
	}
	if _, screen := runTerminal(t, append(env, "NO_COLOR=1"), "", "scan", missing, "--ld-library-path", ""); strings.Contains(screen, "\x1b[") {
		t.Errorf("NO_COLOR: colour anyway:\n%q", screen)
	}
	if r := runBinary(t, env, "", "scan", missing, "--ld-library-path", ""); strings.Contains(r.stdout, "\x1b[") || !strings.Contains(r.stdout, "NOT FOUND") {
		t.Errorf("pipe: %q", r.stdout)
	}
}

// Point 8: undo without a target asks, and refuses when nobody can answer.
func TestCLIUndoAllAsks(t *testing.T) {
	dir, m := missingCudss(t)
	env := userEnv(t)
	prefix := t.TempDir()
	if r := runBinary(t, env, "", "resolve", dir, "--yes", "-q", "--catalog", m.Catalog, "--mirror", m.URL, "--prefix", prefix, "--ld-library-path", ""); r.code != exitOK {
		t.Fatalf("resolve: %d %s", r.code, r.stderr)
	}
	r := runBinary(t, env, "", "undo", "--prefix", prefix)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--yes") || !placed(dir) {
		t.Errorf("undo without a target off a terminal: exit %d, placed=%v: %s", r.code, placed(dir), r.stderr)
	}
	code, screen := runTerminal(t, env, "n\n", "undo", "--prefix", prefix)
	if code != exitError || !strings.Contains(screen, "[y/N]") || !placed(dir) {
		t.Errorf("answered n: exit %d, placed=%v\n%s", code, placed(dir), screen)
	}
	code, screen = runTerminal(t, env, "y\n", "undo", "--prefix", prefix)
	if code != exitOK || placed(dir) {
		t.Errorf("answered y: exit %d, placed=%v\n%s", code, placed(dir), screen)
	}
}

func TestVersionOf(t *testing.T) {
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{debug.BuildInfo{}, "dev"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}},
			"(devel), rev 0123456789ab, 2026-01-02T03:04:05Z, modified"},
	} {
		if got := versionOf(&c.bi); got != c.want {
			t.Errorf("versionOf(%+v) = %q, want %q", c.bi.Main, got, c.want)
		}
	}
}
