package shquote

import (
	"os/exec"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// TestQuoteRoundTrip: sh reads each quoted string back as the one word it
// was.
func TestQuoteRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	lddtest.Need(t, err == nil, "no sh")
	for _, s := range []string{"", "/usr/lib", "a b", "it's", "$HOME", "x;y", "a\nb", "'"} {
		out, err := exec.Command(sh, "-c", "printf %s "+Quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("Quote(%q) = %s: sh reads %q (%v)", s, Quote(s), out, err)
		}
	}
	if Quote("/a/b-c_d.e:f+g") != "/a/b-c_d.e:f+g" {
		t.Errorf("a safe word was quoted: %s", Quote("/a/b-c_d.e:f+g"))
	}
}
