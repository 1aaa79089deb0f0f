package uniq

import (
	"slices"
	"testing"
)

func TestAppend(t *testing.T) {
	var got []string
	for _, s := range []string{"b", "a", "b", "c", "a"} {
		got = Append(got, s)
	}
	if !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Errorf("got %q, want the first of each, in order", got)
	}
}
