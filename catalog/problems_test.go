package catalog

import (
	"errors"
	"strings"
	"testing"
)

// TestParseReportsEveryProblem checks that a catalog file's problems are
// all reported, in line order, each as a ParseError naming file and line,
// behind a one-line message; and that no catalog is returned beside them.
func TestParseReportsEveryProblem(t *testing.T) {
	const text = `format: 2
products:
  p:
    base_url: ftp://example.com/
drivers:
  libcuda.so.1:
    advice: ""
components:
  a:
    product: p
    releases:
      - version: "1"
        archives:
          - platform: linux-x86_64
            path: ../a.tar.xz
            sha256: 0ac5dbc538d04e9983bc493b410cce4b459e1ee9f5f6654b6464ef7b3e14a8b5
            size: 1
            sonames: [liba.so.1, liba.so.1]
  b:
    product: nowhere
    wrong: 1
`
	c, err := Parse([]byte(text), "x.yaml")
	if c != nil {
		t.Error("a catalog with problems is returned")
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %v is not a Problems", err)
	}
	want := []string{
		"x.yaml:1: format must be 1",
		"x.yaml:4: product p: base_url",
		"x.yaml:6: driver libcuda.so.1: advice is missing",
		"x.yaml:15: a 1: path",
		"x.yaml:18: a 1 linux-x86_64: liba.so.1 is listed twice",
		`x.yaml:19: component b: product "nowhere" is not defined`,
		`x.yaml:21: unknown key "wrong"`,
	}
	if len(ps) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(ps), len(want), strings.Join(problemTexts(ps), "\n"))
	}
	for i, w := range want {
		var pe *ParseError
		if !errors.As(ps[i], &pe) || !strings.HasPrefix(ps[i].Error(), w) {
			t.Errorf("problem %d: %q, want a ParseError starting %q", i, ps[i], w)
		}
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasPrefix(msg, want[0]) || !strings.HasSuffix(msg, "(and 6 more problems)") {
		t.Errorf("message %q, want the first problem and the count of the others on one line", msg)
	}
}

func problemTexts(ps Problems) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Error())
	}
	return out
}
