// Package dotted orders dotted version numbers (NVIDIA's release and driver versions, glibc's versions) field by field, numerically.
//
// Python package versions follow PEP 440 instead; pymeta orders those.
package dotted

import (
	"cmp"
	"strconv"
	"strings"
)

// Compare orders dotted versions field by field, numerically where both
// fields are numbers ("12.10" > "12.9", "580.95.05" > "580.9"), as text
// where either is not ("1.a" < "1.b"). Of two versions equal as far as the
// shorter goes, the longer is the later ("12.9.1" > "12.9" and
// "12.9.0" > "12.9"). It returns -1, 0 or +1.
func Compare(a, b string) int {
	fa, fb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(fa) && i < len(fb); i++ {
		na, ea := strconv.ParseUint(fa[i], 10, 64)
		nb, eb := strconv.ParseUint(fb[i], 10, 64)
		var c int
		if ea == nil && eb == nil {
			c = cmp.Compare(na, nb)
		} else {
			c = strings.Compare(fa[i], fb[i])
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(fa), len(fb))
}

// Less reports whether a orders before b.
func Less(a, b string) bool { return Compare(a, b) < 0 }

// Numeric reports whether v is one or more dot-separated decimal numbers.
func Numeric(v string) bool {
	for _, f := range strings.Split(v, ".") {
		if _, err := strconv.ParseUint(f, 10, 64); err != nil {
			return false
		}
	}
	return true
}

// Major is a version's first component ("13" of "13.0.2").
func Major(v string) string {
	major, _, _ := strings.Cut(v, ".")
	return major
}

// MaxLen is the longest version string cudadeps accepts from any input (a
// catalog, a manifest, METADATA, a wheel's file name). Real ones are under
// 40 characters; the bound keeps hostile input from costing time and
// memory (a 100,000-character version would parse into 50,000 fields).
const MaxLen = 128
