package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docSection is one heading of a page under docs/ and the text up to the
// next heading of the same or a higher level.
type docSection struct {
	file, heading string
	// names are the command paths the heading's code spans name: `resolve
	// TARGET` names "resolve", `cudadeps catalog which` "catalog which",
	// `cudadeps` alone the root ("").
	names []string
	body  string
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// commandPath is the command a code span names: its leading lower-case
// words, without "cudadeps"; ok is false when it names none.
func commandPath(span string) (string, bool) {
	words := strings.Fields(span)
	if len(words) == 0 {
		return "", false
	}
	root := words[0] == "cudadeps"
	if root {
		words = words[1:]
	}
	var path []string
	for _, w := range words {
		if w == "" || w[0] == '-' || w[0] == '[' || strings.ToLower(w) != w {
			break
		}
		path = append(path, w)
	}
	if len(path) == 0 && !root {
		return "", false
	}
	return strings.Join(path, " "), true
}

// readSections splits every Markdown page under dir into its sections,
// ignoring lines of fenced code blocks.
func readSections(t *testing.T, dir string) []docSection {
	t.Helper()
	var out []docSection
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		type open struct {
			level int
			index int
		}
		var stack []open
		fenced := false
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
			}
			level := len(line) - len(strings.TrimLeft(line, "#"))
			if fenced || level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
				for _, o := range stack {
					out[o.index].body += line + "\n"
				}
				continue
			}
			for len(stack) > 0 && stack[len(stack)-1].level >= level {
				stack = stack[:len(stack)-1]
			}
			s := docSection{file: path, heading: line}
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				if p, ok := commandPath(m[1]); ok {
					s.names = append(s.names, p)
				}
			}
			out = append(out, s)
			stack = append(stack, open{level, len(out) - 1})
			for _, o := range stack {
				out[o.index].body += line + "\n"
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mentions says whether text names the flag as a user types it (--json,
// not --json-lines).
func mentions(text, flag string) bool {
	for rest := text; ; {
		i := strings.Index(rest, "--"+flag)
		if i < 0 {
			return false
		}
		rest = rest[i+2+len(flag):]
		if rest == "" || !strings.ContainsAny(rest[:1], "abcdefghijklmnopqrstuvwxyz0123456789-") {
			return true
		}
	}
}

// TestDocsHaveEveryCommand walks the command tree as --help shows it and
// wants, for every command, a section in docs/ whose heading names it in
// a code span (`cudadeps resolve`, `catalog which SONAME`), and in one such
// section every flag the command itself defines: a command or a flag added
// without its reference fails here.
func TestDocsHaveEveryCommand(t *testing.T) {
	sections := readSections(t, filepath.Join("..", "..", "docs"))
	root := newApp(nil, io.Discard, io.Discard).rootCommand()
	root.InitDefaultVersionFlag()

	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), root.Name()), " ")
		var flags []string
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				flags = append(flags, f.Name)
			}
		})
		var best []string
		var where string
		found := false
		for _, s := range sections {
			named := false
			for _, n := range s.names {
				named = named || n == path
			}
			if !named {
				continue
			}
			var missing []string
			for _, f := range flags {
				if !mentions(s.body, f) {
					missing = append(missing, "--"+f)
				}
			}
			if !found || len(missing) < len(best) {
				best, where = missing, s.file+": "+s.heading
			}
			found = true
		}
		switch {
		case !found:
			t.Errorf("%s: no section of docs/ has a heading naming it in a code span (e.g. \"## `%s`\")", c.CommandPath(), c.CommandPath())
		case len(best) > 0:
			t.Errorf("%s: its reference (%s) does not mention %s", c.CommandPath(), where, strings.Join(best, ", "))
		}
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && sub.Name() != "help" {
				walk(sub)
			}
		}
	}
	walk(root)
}

// TestCommandPath pins how a heading's code span names a command.
func TestCommandPath(t *testing.T) {
	for span, want := range map[string]string{
		"resolve TARGET":                "resolve",
		"cudadeps catalog which SONAME": "catalog which",
		"cudadeps":                      "",
		"store list":                    "store list",
		"undo [TARGET...]":              "undo",
		"cudadeps completion bash":      "completion bash",
		"fetch COMPONENT[@VERSION]...":  "fetch",
		"cudadeps doctor --probe":       "doctor",
	} {
		if got, ok := commandPath(span); !ok || got != want {
			t.Errorf("commandPath(%q) = %q, %v; want %q", span, got, ok, want)
		}
	}
	for _, span := range []string{"--json", "TARGET", "PREFIX/env.sh"} {
		if got, ok := commandPath(span); ok {
			t.Errorf("commandPath(%q) = %q, names a command", span, got)
		}
	}
	if !mentions("use --json.", "json") || mentions("use --json-lines", "json") || mentions("no flag", "json") {
		t.Error("mentions does not tell --json from --json-lines")
	}
}
