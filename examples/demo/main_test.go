package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeCommands are the lines of the README's first fenced sh block,
// without their comments.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("README.md has no fenced sh block")
	}
	var out []string
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// readmeOutput is the README's excerpt of the demonstration's output: the
// first fenced block without a language after the block of commands.
func readmeOutput(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(readme), "```sh\n")
	_, rest, _ = strings.Cut(rest, "```")
	_, block, ok := strings.Cut(rest, "\n```\n")
	block, _, ok2 := strings.Cut(block, "\n```")
	if !ok || !ok2 || strings.TrimSpace(block) == "" {
		t.Fatal("README.md quotes no output of the demonstration after its commands")
	}
	return block
}

// varying are the output's lines that name this run's directory and port.
var varying = regexp.MustCompile(`(?m)^  (DEMO|SERVER)=.*$`)

// TestREADMEDemo runs the README's first command as a newcomer would, from
// the repository root, and checks what it promises: the package is
// missing two libraries, resolve brings both and the loader then finds
// everything, undo takes it all back. A second run, in-process with the
// binary the first one built, prints the same output but for the two lines
// that name its directory and port.
func TestREADMEDemo(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) == 0 || cmds[0] != "go run ./examples/demo" {
		t.Fatalf("the README's first command is %q, want go run ./examples/demo", cmds)
	}
	dir := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command("go", "run", "./examples/demo", "-dir", dir, "-keep")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=/nonexistent", "PIP_INDEX_URL=http://127.0.0.1:1/simple/")
	first, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./examples/demo: %v\n%s", err, first)
	}
	for _, want := range []string{
		"1 object(s) scanned: 0 load, 1 would fail (2 missing libraries).",
		"pinned 13.1.0.3 (by nvidia-cublas==13.1.0.3 (required by demo 0.1)): the index has this wheel",
		"create and link into $DEMO/site-packages/nvidia/cudss/lib",
		"Done: the loader now finds everything.",
		"1 object(s) scanned: 1 load, 0 would fail.",
		"demo: removed 2 file(s), 2 directories, 2 store entries",
	} {
		if !bytes.Contains(first, []byte(want)) {
			t.Errorf("the demonstration does not say %q:\n%s", want, first)
		}
	}
	stable := varying.ReplaceAllString(string(first), "")
	if strings.Contains(stable, dir) || strings.Contains(stable, "127.0.0.1") {
		t.Errorf("the output names this run's directory or port beyond the DEMO= and SERVER= lines:\n%s", first)
	}
	if quoted := readmeOutput(t); !strings.Contains(stable, quoted) {
		t.Errorf("the README quotes output the demonstration does not print:\n%s\n--- it prints\n%s", quoted, stable)
	}

	var second bytes.Buffer
	if err := run(context.Background(), &second, filepath.Join(t.TempDir(), "again"), true, filepath.Join(dir, "bin", "cudadeps")); err != nil {
		t.Fatalf("second run: %v\n%s", err, second.String())
	}
	if again := varying.ReplaceAllString(second.String(), ""); again != stable {
		t.Errorf("two runs print different output:\n--- first\n%s\n--- second\n%s", stable, again)
	}
}
