package dotted

import (
	"slices"
	"testing"
)

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"12.10", "12.9", 1}, {"0.10.0", "0.4.0", 1}, {"12.9.1", "12.9", 1}, {"12.9", "12.9", 0},
		{"12.9.0", "12.9", 1}, {"2025.3.0.19", "2025.10", -1}, {"1.a", "1.b", -1}, {"1.10", "1.a", -1},
		{"580.95.05", "580.95.5", 0}, {"580.95.05", "580.9", 1}, {"2.41", "2.5", 1}, {"", "1", -1},
	} {
		if got := Compare(tc.a, tc.b); got != tc.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Compare(tc.b, tc.a); got != -tc.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
		if got := Less(tc.a, tc.b); got != (tc.want < 0) {
			t.Errorf("Less(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
	// A total order: sorting is stable under shuffling.
	want := []string{"1", "1.0", "1.2", "1.10", "1.10.0", "1.a", "2", "10"}
	got := []string{"1.a", "10", "1.10.0", "2", "1", "1.10", "1.0", "1.2"}
	slices.SortFunc(got, Compare)
	if !slices.Equal(got, want) {
		t.Errorf("sorted %q, want %q", got, want)
	}
}

func TestNumeric(t *testing.T) {
	for v, want := range map[string]bool{"2.41": true, "580.95.05": true, "13": true, "": false, "2.": false, "2.x": false, "-1": false} {
		if got := Numeric(v); got != want {
			t.Errorf("Numeric(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestLessGlibcVersions: glibc versions as apply compares a node's with a
// plan's (2.40 is newer than 2.4, a major beats any minor).
func TestLessGlibcVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{{"2.31", "2.36", true}, {"2.36", "2.36", false}, {"2.40", "2.4", false}, {"2.4", "2.40", true}, {"3", "2.99", false}} {
		if got := Less(c.a, c.b); got != c.want {
			t.Errorf("Less(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

func TestMajor(t *testing.T) {
	for v, want := range map[string]string{"13.0.2": "13", "9": "9", "": ""} {
		if got := Major(v); got != want {
			t.Errorf("Major(%q) = %q, want %q", v, got, want)
		}
	}
}
