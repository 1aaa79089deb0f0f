package shellquote

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/lddtest"
)

// TestShellReadsBack is judged by a real shell: each quoted word comes back
// as it was, one word, whatever it holds.
func TestShellReadsBack(t *testing.T) {
	sh, err := exec.LookPath("sh")
	lddtest.Need(t, err == nil, "no sh")
	words := []string{"", "plain", "/a/b.c", "two words", "it's", `"q"`, "$HOME", "a;b", "*", "~", "tab\there", "new\nline", "--prefix=/x y", "ü", "a\\b", "!", "#x", "{a,b}"}
	line := "for w in " + Join(words) + "; do printf '%s\\0' \"$w\"; done"
	out, err := exec.Command(sh, "-c", line).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if strings.Join(got, "|") != strings.Join(words, "|") {
		t.Errorf("the shell read back %q, want %q", got, words)
	}
	for _, w := range []string{"plain", "/a/b.c", "--cuda=13", "user@host:path,x"} {
		if Word(w) != w {
			t.Errorf("Word(%q) = %q: quoted what needs no quotes", w, Word(w))
		}
	}
}
