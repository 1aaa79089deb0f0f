package pymeta

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// A RECORD without quotes is read line by line, split at commas: it must
// give what encoding/csv gives, on every RECORD of the real torch
// environment (71 distributions, torch's 11,847 lines among them) and on
// the odd lines a writer may leave.
func TestRecordPlainReadsAsCSV(t *testing.T) {
	texts := map[string]string{
		"crlf, blank lines, no final newline": "a/b.py,sha256=LCa0a2j_xo_5m0U8HTBBNBNCLXBkg7-g-YpeiGJm564,1\r\n\r\nc.py,,\n\nd.py,,7",
		"fewer and more fields":               "a.py\nb.py,\nc.py,,,extra,fields\n",
		"empty":                               "",
	}
	for name, b := range corpusDistInfo(t, "/RECORD") {
		texts[name] = string(b)
	}
	read := 0
	for name, text := range texts {
		if strings.Contains(text, `"`) {
			continue // read by CSV's rules anyway
		}
		want, werr := recordCSV(text)
		got, gerr := recordPlain(text)
		if (werr == nil) != (gerr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read as %d entries (%v), CSV reads %d (%v)", name, len(got), gerr, len(want), werr)
		}
		read += len(got)
		// EachRecordPath gives the entries' paths, in order.
		paths, err := recordPaths(text)
		var wantPaths []string
		for _, e := range want {
			wantPaths = append(wantPaths, e.Path)
		}
		if err != nil || !slices.Equal(paths, wantPaths) {
			t.Errorf("%s: EachRecordPath gives %d paths (%v), CSV reads %d", name, len(paths), err, len(wantPaths))
		}
	}
	// A quoted path is read by CSV's rules by both.
	quoted := "\"a,b.py\",sha256=LCa0a2j_xo_5m0U8HTBBNBNCLXBkg7-g-YpeiGJm564,1\nc.py,,\n"
	if paths, err := recordPaths(quoted); err != nil || !slices.Equal(paths, []string{"a,b.py", "c.py"}) {
		t.Errorf("EachRecordPath of a quoted path = %q, %v", paths, err)
	}
	// Quoting that starts past the first line, spans a line break, and a
	// line longer than a read: each path as CSV reads it.
	long := strings.Repeat("d", 3*recordChunk) + ".so"
	mixed := "a.py,,\n\"b\nc.py\",,\n" + long + ",sha256=x,1\ne.py,,\n"
	want := []string{"a.py", "b\nc.py", long, "e.py"}
	if paths, err := recordPaths(mixed); err != nil || !slices.Equal(paths, want) {
		t.Errorf("EachRecordPath of a RECORD quoted past its start = %d paths %v, want %d", len(paths), err, len(want))
	}
	if paths, err := recordPaths("x.py,,\n" + long + ",,\ny.py,,\n"); err != nil || !slices.Equal(paths, []string{"x.py", long, "y.py"}) {
		t.Errorf("EachRecordPath with a line longer than a read = %d paths %v", len(paths), err)
	}
	if read < 20000 {
		t.Errorf("only %d entries read from %d RECORDs", read, len(texts))
	}
}

// recordPaths collects what EachRecordPath gives.
func recordPaths(text string) ([]string, error) {
	var out []string
	err := EachRecordPath(strings.NewReader(text), func(p []byte) { out = append(out, string(p)) })
	return out, err
}
