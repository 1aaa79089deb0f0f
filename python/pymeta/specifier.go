package pymeta

import (
	"fmt"
	"strings"

	"github.com/cudadeps/cudadeps/internal/dotted"
)

// Specifier is one PEP 440 version clause: ">=13.0.3", "==13.1.0.3.*".
type Specifier struct {
	Op       string // ~= == != <= >= < > ===
	Version  string // as written, trimmed ("13.1.0.3.*")
	v        Version
	wildcard bool // "==X.*" or "!=X.*"
}

// SpecifierSet is a comma-separated conjunction of specifiers; empty matches
// every final release.
type SpecifierSet []Specifier

// operators, longest first so that "===" is not read as "==".
var operators = []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"}

// ParseSpecifier parses one clause.
func ParseSpecifier(s string) (Specifier, error) {
	s = strings.TrimSpace(s)
	var op string
	for _, o := range operators {
		if strings.HasPrefix(s, o) {
			op = o
			break
		}
	}
	if op == "" {
		return Specifier{}, fmt.Errorf("invalid specifier %s: no operator", clipped(s))
	}
	text := strings.TrimSpace(s[len(op):])
	sp := Specifier{Op: op, Version: text}
	if text == "" {
		return Specifier{}, fmt.Errorf("invalid specifier %s: no version", clipped(s))
	}
	if len(text) > dotted.MaxLen {
		return Specifier{}, fmt.Errorf("invalid specifier %s: a version of %d characters (at most %d)", clipped(s), len(text), dotted.MaxLen)
	}
	if op == "===" {
		// Arbitrary equality compares strings; anything without spaces,
		// ';' or ')' is allowed.
		if strings.ContainsAny(text, " \t;)") {
			return Specifier{}, fmt.Errorf("invalid specifier %s", clipped(s))
		}
		sp.v, _ = parseVersion(text)
		return sp, nil
	}
	vtext := text
	if (op == "==" || op == "!=") && strings.HasSuffix(text, ".*") {
		sp.wildcard = true
		vtext = strings.TrimSuffix(text, ".*")
	}
	v, ok := parseVersion(vtext)
	if !ok || vtext != strings.TrimSpace(vtext) {
		return Specifier{}, fmt.Errorf("invalid specifier %s: bad version", clipped(s))
	}
	sp.v = v
	switch {
	case sp.wildcard && (v.pre.kind != 0 || v.hasPost || v.hasDev || len(v.local) > 0):
		return Specifier{}, fmt.Errorf("invalid specifier %s: a prefix match takes a release only", clipped(s))
	case op != "==" && op != "!=" && len(v.local) > 0:
		return Specifier{}, fmt.Errorf("invalid specifier %s: a local version only with == or !=", clipped(s))
	case op == "~=" && len(v.release) < 2:
		return Specifier{}, fmt.Errorf("invalid specifier %s: ~= needs at least two release numbers", clipped(s))
	}
	return sp, nil
}

// ParseSpecifierSet parses ">=13.0.3,<14" (empty clauses between commas are
// ignored, as packaging does).
func ParseSpecifierSet(s string) (SpecifierSet, error) {
	var set SpecifierSet
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		sp, err := ParseSpecifier(part)
		if err != nil {
			return nil, err
		}
		set = append(set, sp)
	}
	return set, nil
}

// String is the clause as written, without spaces ("==9.19.0.56").
func (s Specifier) String() string { return s.Op + s.Version }

// String joins the clauses with commas.
func (s SpecifierSet) String() string {
	parts := make([]string, len(s))
	for i, sp := range s {
		parts[i] = sp.String()
	}
	return strings.Join(parts, ",")
}

// namesPrerelease says whether the clause itself names a pre-release, which
// admits pre-releases when none are asked for ("!=" and prefix matches never
// do).
func (s Specifier) namesPrerelease() bool {
	if s.Op == "!=" || s.wildcard || s.v.IsZero() {
		return false
	}
	return s.v.IsPrerelease()
}

// Contains says whether v satisfies every clause. With prereleases false,
// pre-releases and development releases match only when a clause names one
// (PEP 440's default when choosing among versions: >=3.12 does not admit
// 3.13.0rc1, >=3.13.0rc1 does); with true they match like any version, as
// when checking what is installed.
func (s SpecifierSet) Contains(v Version, prereleases bool) bool {
	if v.IsPrerelease() && !prereleases && !s.namesPrerelease() {
		return false
	}
	for _, sp := range s {
		if !sp.match(v, v.text) {
			return false
		}
	}
	return true
}

func (s SpecifierSet) namesPrerelease() bool {
	for _, sp := range s {
		if sp.namesPrerelease() {
			return true
		}
	}
	return false
}

// containsText is a marker comparison: text as a version, pre-releases
// admitted; text that is no version matches only "===".
func (s Specifier) containsText(text string) bool {
	if s.Op == "===" {
		return strings.EqualFold(strings.TrimSpace(text), s.Version)
	}
	v, ok := parseVersion(text)
	if !ok {
		return false
	}
	return s.match(v, text)
}

// match applies the clause to v, pre-releases admitted; text is v as given,
// for "===".
func (s Specifier) match(v Version, text string) bool {
	spec := s.v
	switch s.Op {
	case "===":
		return strings.EqualFold(strings.TrimSpace(text), s.Version)
	case "==":
		return s.equal(v)
	case "!=":
		return !s.equal(v)
	case "~=":
		// ~=X.Y.Z is >=X.Y.Z together with ==X.Y.*.
		prefix := spec.release[:len(spec.release)-1]
		return v.public().Compare(spec) >= 0 && prefixMatch(v, spec.epoch, prefix)
	case "<=":
		return v.public().Compare(spec) <= 0
	case ">=":
		return v.public().Compare(spec) >= 0
	case "<":
		if v.Compare(spec) >= 0 {
			return false
		}
		// <V never admits a pre-release of V itself unless V is one.
		if !spec.IsPrerelease() && v.IsPrerelease() && v.base().Compare(spec.base()) == 0 {
			return false
		}
		return true
	case ">":
		if v.Compare(spec) <= 0 {
			return false
		}
		// >V never admits a post-release or a local build of V itself
		// unless V is a post-release.
		if !spec.IsPostrelease() && v.IsPostrelease() && v.base().Compare(spec.base()) == 0 {
			return false
		}
		if len(v.local) > 0 && v.base().Compare(spec.base()) == 0 {
			return false
		}
		return true
	}
	return false
}

// equal is "==" without negation: a prefix match for "X.*"; otherwise the
// candidate's local label counts only when the clause has one.
func (s Specifier) equal(v Version) bool {
	if s.wildcard {
		return prefixMatch(v, s.v.epoch, s.v.release)
	}
	if len(s.v.local) == 0 {
		return v.public().Compare(s.v) == 0
	}
	return v.Compare(s.v) == 0
}

// prefixMatch says whether v's release, padded with zeros, starts with
// prefix, in the same epoch.
func prefixMatch(v Version, epoch uint64, prefix []uint64) bool {
	if v.epoch != epoch {
		return false
	}
	for i, want := range prefix {
		var got uint64
		if i < len(v.release) {
			got = v.release[i]
		}
		if got != want {
			return false
		}
	}
	return true
}

// ContainsString is Contains for a version given as text; text that is no
// PEP 440 version can match only "===" clauses.
func (s SpecifierSet) ContainsString(text string, prereleases bool) bool {
	if v, ok := parseVersion(text); ok {
		return s.Contains(v, prereleases)
	}
	for _, sp := range s {
		if sp.Op != "===" || !sp.containsText(text) {
			return false
		}
	}
	return true
}
