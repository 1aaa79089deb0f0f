package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type configDoc struct {
	Schema string `json:"schema"`
	File   string `json:"file"`
	Mirror struct {
		Value, Source string
	} `json:"mirror"`
	Catalogs []struct {
		File, Source string
	} `json:"catalogs"`
	Prefix struct {
		Value, Source string
	} `json:"prefix"`
}

// TestSettingsPrecedence: a flag beats the environment, which beats the
// config file, which beats the default; what config shows is what resolve
// uses.
func TestSettingsPrecedence(t *testing.T) {
	home := t.TempDir()
	file := filepath.Join(home, "cudadeps", "config.toml")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	text := "# the site's defaults\nmirror = \"https://mirror.example/nvidia/\"\ncatalog = [\"site.yaml\"]\nprefix = \"/srv/cudadeps\"\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	show := func(env []string, args ...string) configDoc {
		t.Helper()
		r := runBinary(t, env, "", append([]string{"config", "--json"}, args...)...)
		var doc configDoc
		if err := json.Unmarshal([]byte(r.stdout), &doc); r.code != exitOK || err != nil || doc.Schema != schemaConfig {
			t.Fatalf("config %v: exit %d, %v\n%s%s", args, r.code, err, r.stdout, r.stderr)
		}
		return doc
	}
	base := nodeEnv(t)
	withFile := append(append([]string(nil), base...), "XDG_CONFIG_HOME="+home)

	d := show(base)
	if d.File != "" || d.Mirror.Value != "" || len(d.Catalogs) != 0 || d.Prefix.Source != "default" {
		t.Fatalf("defaults: %+v", d)
	}
	d = show(withFile)
	if d.File != file || d.Mirror.Value != "https://mirror.example/nvidia/" || d.Mirror.Source != file+":2" ||
		len(d.Catalogs) != 1 || d.Catalogs[0].File != filepath.Join(home, "cudadeps", "site.yaml") || d.Catalogs[0].Source != file+":3" ||
		d.Prefix.Value != "/srv/cudadeps" || d.Prefix.Source != file+":4" {
		t.Fatalf("from the file: %+v", d)
	}
	withEnv := append(append([]string(nil), withFile...), "CUDADEPS_MIRROR=file:///env/mirror", "CUDADEPS_CATALOG=/env/a.yaml:/env/b.yaml", "CUDADEPS_PREFIX=/env/prefix")
	d = show(withEnv)
	if d.Mirror.Value != "file:///env/mirror" || d.Mirror.Source != "CUDADEPS_MIRROR" || d.Prefix.Value != "/env/prefix" || d.Prefix.Source != "CUDADEPS_PREFIX" ||
		len(d.Catalogs) != 2 || d.Catalogs[1].File != "/env/b.yaml" || d.Catalogs[1].Source != "CUDADEPS_CATALOG" {
		t.Fatalf("the environment over the file: %+v", d)
	}
	d = show(withEnv, "--mirror", "http://127.0.0.1:9/", "--prefix", "/flag/prefix", "--catalog", "/flag.yaml")
	if d.Mirror.Value != "http://127.0.0.1:9/" || d.Mirror.Source != "--mirror" || d.Prefix.Value != "/flag/prefix" || d.Prefix.Source != "--prefix" ||
		len(d.Catalogs) != 3 || d.Catalogs[2].File != "/flag.yaml" || d.Catalogs[2].Source != "--catalog" {
		t.Fatalf("flags over the environment (catalogs layered on top): %+v", d)
	}

	// A bad setting is refused, named by where it is.
	r := runBinary(t, append(append([]string(nil), withFile...), "CUDADEPS_MIRROR=ftp://x/"), "", "catalog", "list")
	if r.code != exitUsage || !strings.Contains(r.stderr, "CUDADEPS_MIRROR: mirror \"ftp://x/\"") {
		t.Fatalf("bad CUDADEPS_MIRROR: exit %d\n%s", r.code, r.stderr)
	}
	if err := os.WriteFile(file, []byte(text+"mirorr = \"typo\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runBinary(t, withFile, "", "store", "list")
	if r.code != exitUsage || !strings.Contains(r.stderr, file+":5: unknown key \"mirorr\"") {
		t.Fatalf("unknown key: exit %d\n%s", r.code, r.stderr)
	}
	// Commands without these settings do not read the file.
	if r := runBinary(t, withFile, "", "scan", appTree(t), "--ld-library-path", ""); r.code != exitMissing || strings.Contains(r.stderr, "mirorr") {
		t.Fatalf("scan with a bad config file: exit %d\n%s", r.code, r.stderr)
	}
}

// TestResolveTakesSettingsWithoutFlags: the catalog, mirror and prefix of a
// resolve come from the environment alone.
func TestResolveTakesSettingsWithoutFlags(t *testing.T) {
	nv := nvidiaStandIn(t)
	node := appTree(t)
	prefix := filepath.Join(t.TempDir(), "prefix")
	env := nodeEnv(t, "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR="+nv.URL, "CUDADEPS_PREFIX="+prefix)
	r := runBinary(t, env, "", "resolve", node, "--yes", "--ld-library-path", "", "--quiet")
	if r.code != exitOK || nv.Total() < 2 {
		t.Fatalf("resolve from the settings: exit %d, %d requests to the mirror\n%s%s", r.code, nv.Total(), r.stdout, r.stderr)
	}
	r = runBinary(t, env, "", "store", "list")
	if r.code != exitOK || !strings.Contains(r.stdout, "libcudss") || !strings.Contains(r.stdout, "libcutensor") {
		t.Fatalf("store list in CUDADEPS_PREFIX: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
