package lddtest

import (
	"regexp"
	"sort"
	"strings"
)

// BindEnv is what `ldd -r` adds to the trace: warn instead of failing, and
// bind every symbol at load time, so that every reference that does not
// bind is printed.
var BindEnv = []string{"LD_WARN=yes", "LD_BIND_NOW=yes"}

// Undefined is one "undefined symbol" line of a trace run with BindEnv.
type Undefined struct {
	Object  string // the object whose reference did not bind, as printed
	Symbol  string
	Version string
}

func (u Undefined) String() string {
	s := u.Object + ": " + u.Symbol
	if u.Version != "" {
		s += ", version " + u.Version
	}
	return s
}

var reUndefined = regexp.MustCompile(`^undefined symbol: (.+?)(?:, version (\S+))?\t\((.+)\)$`)

// UndefinedSymbols returns the distinct undefined symbols the loader
// printed (it prints one per failed relocation), sorted.
func (o *Output) UndefinedSymbols() []Undefined {
	seen := map[Undefined]bool{}
	var out []Undefined
	for _, line := range strings.Split(o.Raw, "\n") {
		m := reUndefined.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		u := Undefined{Object: m[3], Symbol: m[1], Version: m[2]}
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	SortUndefined(out)
	return out
}

// SortUndefined sorts by object, symbol and version.
func SortUndefined(list []Undefined) {
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Object != b.Object {
			return a.Object < b.Object
		}
		if a.Symbol != b.Symbol {
			return a.Symbol < b.Symbol
		}
		return a.Version < b.Version
	})
}
