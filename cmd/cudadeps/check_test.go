package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// TestCheckCommand drives check through the command line: exit 0 and one
// "ok" line for a whole object, 3 and one line per problem for a broken
// one, the same in JSON, 124 when the budget is gone, 2 for a bad flag.
func TestCheckCommand(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	good := filepath.Join(dir, "libgood.so")
	bad := filepath.Join(dir, "libbad.so")
	for p, spec := range map[string]elfwrite.Spec{
		good: {Soname: "libgood.so", Needed: []string{"libc.so.6"}},
		bad:  {Soname: "libbad.so", Needed: []string{"libnothere.so.7", "libgone.so.1", "libc.so.6"}},
	} {
		if err := elfwrite.Write(p, spec); err != nil {
			t.Fatal(err)
		}
	}
	flags := []string{"--ld-library-path", "", "--prefix", filepath.Join(dir, "prefix")}
	code, out, errOut := runCLI(t, append([]string{"check", good}, flags...)...)
	if code != exitOK || out != "ok: "+good+" loads whole\n" {
		t.Fatalf("whole: exit %d, %q %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, append([]string{"check", bad}, flags...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitMissing || len(lines) != 2 || !strings.HasPrefix(lines[0], "missing libgone.so.1: needed by ") || !strings.HasPrefix(lines[1], "missing libnothere.so.7: ") {
		t.Fatalf("broken: exit %d, %q %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, append([]string{"check", bad, "--json"}, flags...)...)
	var doc struct {
		Schema   string `json:"schema"`
		OK       bool   `json:"ok"`
		Problems []struct{ Kind, Subject, Detail string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitMissing || doc.OK || len(doc.Problems) != 2 || doc.Problems[0].Kind != "missing" || doc.Schema != schemaCheck {
		t.Fatalf("JSON: exit %d, %v, %s", code, err, out)
	}
	if code, _, errOut := runCLI(t, append([]string{"check", bad, "--timeout", "1ns", "--no-cache"}, flags...)...); code != exitTimeout || !strings.Contains(errOut, "did not finish") {
		t.Fatalf("timeout: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI(t, "check", good, "--timeout", "-1s"); code != exitUsage {
		t.Fatalf("negative timeout: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "prefix")); err == nil {
		t.Error("check wrote the prefix")
	}
}
