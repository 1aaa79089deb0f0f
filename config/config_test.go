package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeConfig(t *testing.T, text string) (home string) {
	t.Helper()
	home = t.TempDir()
	dir := filepath.Join(home, "cudadeps")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return home
}

func TestFileThenEnvironment(t *testing.T) {
	cfg := writeConfig(t, "# site defaults\nmirror = \"https://mirror.example/nvidia/\"  # comment\ncatalog = [\"site.yaml\", '/abs/extra.yaml']\n\nprefix = \"/opt/cudadeps\"\n")
	file := filepath.Join(cfg, "cudadeps", FileName)
	s, err := Load(env(map[string]string{"XDG_CONFIG_HOME": cfg, "XDG_CONFIG_DIRS": t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	if s.File != file || s.Mirror.Value != "https://mirror.example/nvidia/" || s.Mirror.Source != file+":2" {
		t.Fatalf("mirror from the file: %+v", s)
	}
	want := []string{filepath.Join(cfg, "cudadeps", "site.yaml"), "/abs/extra.yaml"}
	if strings.Join(s.Catalog.Values, " ") != strings.Join(want, " ") || s.Catalog.Source != file+":3" {
		t.Fatalf("catalogs: %+v, want %v", s.Catalog, want)
	}
	if s.Prefix.Value != "/opt/cudadeps" || s.Prefix.Source != file+":5" {
		t.Fatalf("prefix: %+v", s.Prefix)
	}

	s, err = Load(env(map[string]string{"XDG_CONFIG_HOME": cfg, "XDG_CONFIG_DIRS": t.TempDir(),
		EnvMirror: "file:///srv/m", EnvCatalog: "/a.yaml:/b.yaml", EnvPrefix: "/p"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Mirror.Value != "file:///srv/m" || s.Mirror.Source != EnvMirror || s.Prefix.Value != "/p" || s.Prefix.Source != EnvPrefix ||
		strings.Join(s.Catalog.Values, " ") != "/a.yaml /b.yaml" || s.Catalog.Source != EnvCatalog {
		t.Fatalf("the environment must win over the file: %+v", s)
	}
	// Set but empty: no catalogs, not the file's.
	s, err = Load(env(map[string]string{"XDG_CONFIG_HOME": cfg, "XDG_CONFIG_DIRS": t.TempDir(), EnvCatalog: ""}))
	if err != nil || len(s.Catalog.Values) != 0 || s.Catalog.Source != EnvCatalog {
		t.Fatalf("empty CUDADEPS_CATALOG: %+v, %v", s, err)
	}
}

func TestSystemDirsAndExplicitFile(t *testing.T) {
	sys := writeConfig(t, "prefix = 'store'\n")
	s, err := Load(env(map[string]string{"HOME": t.TempDir(), "XDG_CONFIG_DIRS": "relative:" + sys}))
	if err != nil || s.Prefix.Value != filepath.Join(sys, "cudadeps", "store") {
		t.Fatalf("XDG_CONFIG_DIRS: %+v, %v", s, err)
	}
	// The user's file hides the system one whole.
	user := writeConfig(t, "mirror = \"http://127.0.0.1:1/\"\n")
	s, err = Load(env(map[string]string{"XDG_CONFIG_HOME": user, "XDG_CONFIG_DIRS": sys}))
	if err != nil || s.Prefix.Set() || s.Mirror.Value != "http://127.0.0.1:1/" {
		t.Fatalf("user file first: %+v, %v", s, err)
	}
	s, err = Load(env(map[string]string{"XDG_CONFIG_HOME": user, EnvConfig: filepath.Join(sys, "cudadeps", FileName)}))
	if err != nil || s.Mirror.Set() || !s.Prefix.Set() {
		t.Fatalf("CUDADEPS_CONFIG: %+v, %v", s, err)
	}
	if _, err := Load(env(map[string]string{EnvConfig: filepath.Join(sys, "nonesuch.toml")})); err == nil || !strings.Contains(err.Error(), EnvConfig) {
		t.Fatalf("a missing CUDADEPS_CONFIG file: %v", err)
	}
	if s, err := Load(env(map[string]string{"XDG_CONFIG_HOME": t.TempDir(), "XDG_CONFIG_DIRS": t.TempDir()})); err != nil || s.File != "" || s.Mirror.Set() {
		t.Fatalf("no file: %+v, %v", s, err)
	}
}

func TestBadFiles(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"mirrors = \"x\"\n", `:1: unknown key "mirrors" (known: catalog, mirror, prefix)`},
		{"# ok\n[cudadeps]\n", ":2: tables"},
		{"mirror = https://x/\n", `:1: mirror: https://x/ is not quoted: write "https://x/"`},
		{"mirror = ,\n", ":1: mirror: no value"},
		{"catalog = [a.yaml, \"b\"]\n", `:1: catalog: a.yaml is not quoted: write "a.yaml"`},
		{"mirror = file:///srv/m # the mirror\n", `:1: mirror: file:///srv/m is not quoted: write "file:///srv/m"`},
		{"prefix = \"/a\"\nprefix = \"/b\"\n", ":2: prefix is set again (first on line 1)"},
		{"mirror = [\"a\"]\n", ":1: mirror takes one string, not a list"},
		{"catalog = [\"a\" \"b\"]\n", ":1: catalog: a list is"},
		{"prefix = \"~/x\"\n", "~ is not expanded"},
		{"mirror = \"a\" b\n", `unexpected "b"`},
		{"mirror = \"a\n", "unterminated"},
		{"mirror = \"\\q\"\n", `unknown escape \q`},
		{"just words\n", ":1: want key = value"},
		{"\xff = 1\n", "not UTF-8"},
	} {
		cfg := writeConfig(t, c.text)
		_, err := Load(env(map[string]string{"XDG_CONFIG_HOME": cfg, "XDG_CONFIG_DIRS": t.TempDir()}))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), filepath.Join(cfg, "cudadeps", FileName)) {
			t.Errorf("%q: got %v, want the file name and %q", c.text, err, c.want)
		}
	}
}

func TestEscapes(t *testing.T) {
	es, err := parse([]byte("mirror = \"a\\\"b\\\\c\\u00e9\"\ncatalog = []\n"))
	if err != nil || es[0].Values[0] != "a\"b\\cé" || !es[1].Array || len(es[1].Values) != 0 {
		t.Fatalf("%+v %v", es, err)
	}
}
