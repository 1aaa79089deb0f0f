package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatalogValidateEveryProblem checks that validate reports, in one run
// of the built binary, every problem of every file: those a file has alone
// (an unknown key, a bad platform, sha256 and size in one archive) and
// those it has layered over the built-in catalog (products nowhere
// defined), in text and in --json, while the built-in catalog is valid.
func TestCatalogValidateEveryProblem(t *testing.T) {
	env := userEnv(t)
	dir := t.TempDir()
	const sha = "0ac5dbc538d04e9983bc493b410cce4b459e1ee9f5f6654b6464ef7b3e14a8b5"
	first := filepath.Join(dir, "first.yaml")
	second := filepath.Join(dir, "second.yaml")
	for path, text := range map[string]string{
		first: `format: 1
components:
  foo:
    product: nosuchproduct
    bogus_key: 1
    releases:
      - version: "1.0"
        archives:
          - platform: linux-mips
            path: foo/foo-1.0.tar.xz
            sha256: abc
            size: -5
            sonames: [libfoo.so.1]
  bar:
    product: cuda
    releases:
      - version: "2.0"
        archives:
          - platform: linux-x86_64
            path: bar/bar.tar.xz
            sha256: ` + sha + `
            size: 10
            sonames: [not a soname]
`,
		second: `format: 1
components:
  baz:
    product: missing
    releases:
      - version: "1.0"
        archives:
          - platform: linux-x86_64
            path: baz/baz.tar.xz
            sha256: ` + sha + `
            size: 10
            sonames: [libbaz.so.1]
`,
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][]string{
		first: {
			`:3: component foo: product "nosuchproduct" is not defined`,
			`:5: unknown key "bogus_key"`,
			`:9: foo 1.0: unknown platform "linux-mips"`,
			`:11: foo 1.0: sha256 "abc"`,
			`:12: foo 1.0: size -5`,
			`:23: bar 2.0 linux-x86_64: "not a soname" is not a soname`,
		},
		second: {`:3: component baz: product "missing" is not defined`},
	}

	r := runBinary(t, env, "", "catalog", "validate", first, second)
	if r.code != exitError {
		t.Errorf("exit %d, want %d", r.code, exitError)
	}
	for file, problems := range want {
		for _, p := range problems {
			if !strings.Contains(r.stdout, file+": FAIL: "+file+p) {
				t.Errorf("text output lacks %s%s:\n%s", file, p, r.stdout)
			}
		}
	}

	r = runBinary(t, env, "", "catalog", "validate", first, second, "--json")
	var doc struct {
		OK    bool `json:"ok"`
		Files []struct {
			File     string   `json:"file"`
			OK       bool     `json:"ok"`
			Problems []string `json:"problems"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if doc.OK || len(doc.Files) != 2 || r.code != exitError {
		t.Fatalf("--json: exit %d, %+v", r.code, doc)
	}
	for _, f := range doc.Files {
		if f.OK || len(f.Problems) != len(want[f.File]) {
			t.Errorf("--json %s: ok %v, %d problems, want %d: %q", f.File, f.OK, len(f.Problems), len(want[f.File]), f.Problems)
			continue
		}
		for i, p := range want[f.File] {
			if !strings.Contains(f.Problems[i], p) {
				t.Errorf("--json %s: problem %d is %q, want one with %q", f.File, i, f.Problems[i], p)
			}
		}
	}

	// Loading such a file for use says its first problem and that there are
	// more, on one line.
	r = runBinary(t, env, "", "catalog", "list", "--catalog", first)
	if r.code == exitOK || !strings.Contains(r.stderr, `:5: unknown key "bogus_key" (and 4 more problems)`) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("catalog list --catalog with a bad file: exit %d, stderr %q", r.code, r.stderr)
	}
}
