package plural

import "testing"

func TestPlural(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{"librar" + Of(1, "y", "ies"), "library"},
		{"librar" + Of(0, "y", "ies"), "libraries"},
		{"librar" + Of(2, "y", "ies"), "libraries"},
		{Count(1, "failure"), "1 failure"},
		{Count(3, "warning"), "3 warnings"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
