package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// maxREADMELines keeps the README a page: what cudadeps does, the two
// commands, the few a user needs, and where to read more; the reference
// lives in docs/.
const maxREADMELines = 250

// TestREADMEIsAPage: the README fits its length, and its first fenced
// block is the two commands a newcomer runs, the demonstration first.
func TestREADMEIsAPage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxREADMELines {
		t.Errorf("README.md has %d lines, more than %d: move reference text into docs/", n, maxREADMELines)
	}
	if got, want := strings.Join(readmeCommands(t), "\n"), "go run ./examples/demo\ngo test ./..."; got != want {
		t.Errorf("the README's first fenced block is\n%s\nwant\n%s", got, want)
	}
}

// mdLink is an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// inlineCode is a code span, whose brackets are no link.
var inlineCode = regexp.MustCompile("`[^`]*`")

// pageText is a page without its fenced code blocks and code spans.
func pageText(data []byte) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(inlineCode.ReplaceAllString(line, "``"))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// anchors are the fragments GitHub gives a page's headings: lower case,
// spaces as hyphens, other punctuation dropped, repeats numbered.
func anchors(data []byte) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if fenced || level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(line[level:])) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		for i := 1; out[slug]; i++ {
			slug = fmt.Sprintf("%s-%d", b.String(), i)
		}
		out[slug] = true
	}
	return out
}

// TestDocsLinksResolve: every relative link of the README and of the pages
// under docs/ names a file of the repository, and a #fragment names a
// heading of its page.
func TestDocsLinksResolve(t *testing.T) {
	top := filepath.Join("..", "..")
	pages := []string{filepath.Join(top, "README.md")}
	err := filepath.WalkDir(filepath.Join(top, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 2 {
		t.Fatal("no page under docs/")
	}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(top, page)
		for _, m := range mdLink.FindAllStringSubmatch(pageText(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
				if strings.HasPrefix(file, "/") {
					t.Errorf("%s: link %q is absolute; links are relative to the page", rel, target)
					continue
				}
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %q names no file of the repository", rel, target)
				continue
			}
			if fragment == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			d, err := os.ReadFile(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(d)[fragment] {
				t.Errorf("%s: link %q: %s has no heading whose anchor is #%s", rel, target, filepath.Base(dest), fragment)
			}
		}
	}
}

// TestAnchors pins the heading anchors GitHub makes.
func TestAnchors(t *testing.T) {
	got := anchors([]byte("# Command reference\n## `scan PATH...`\n```\n# not a heading\n```\n## `why SONAME --from FILE`\n## Notes\n## Notes\n#nospace\n"))
	for _, want := range []string{"command-reference", "scan-path", "why-soname---from-file", "notes", "notes-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("anchors %v, want 5", got)
	}
}
