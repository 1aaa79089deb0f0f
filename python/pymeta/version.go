// Package pymeta reads Python packaging metadata the way pypa/packaging does: PEP 440 versions and specifiers, PEP 508 requirements and markers, METADATA and RECORD.
//
// It is written here rather than taken from a library because the Go
// libraries available disagree with pypa/packaging on cases that decide
// whether an installed CUDA wheel satisfies its pins: pre-releases admitted
// by specifiers that name none, "<V" admitting V's own pre-releases, local
// version labels left unnormalized, empty specifier sets refused, and no
// PEP 508 markers or requirements at all. The reference behaviour is
// packaging 26; testdata/cases.json holds the cases, checked against an
// installed packaging by the tests.
package pymeta

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/internal/dotted"
)

// Version is a PEP 440 version.
type Version struct {
	text    string // as given, trimmed: what "===" compares
	epoch   uint64
	release []uint64
	pre     preRelease
	post    uint64
	hasPost bool
	dev     uint64
	hasDev  bool
	local   []localPart
}

type preRelease struct {
	kind byte // 0 none, 'a', 'b', 'c' (rc)
	n    uint64
}

// localPart is one dot-separated segment of a local version label: a number
// or a lower-case word.
type localPart struct {
	num   uint64
	word  string
	isNum bool
}

// ParseVersion parses a PEP 440 version, accepting the spellings that
// normalize to one ("1.0.0-alpha.1" is 1.0.0a1).
func ParseVersion(s string) (Version, error) {
	if n := len(strings.TrimSpace(s)); n > dotted.MaxLen {
		return Version{}, fmt.Errorf("invalid version %s: a version of %d characters (at most %d)", clipped(s), n, dotted.MaxLen)
	}
	v, ok := parseVersion(s)
	if !ok {
		return Version{}, fmt.Errorf("invalid version %s", clipped(s))
	}
	return v, nil
}

// clipped quotes s for an error message, its first 60 bytes when longer.
func clipped(s string) string {
	if len(s) <= 60 {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:60], len(s))
}

// versionScanner walks a lower-cased version string.
type versionScanner struct {
	s string
	i int
}

func (p *versionScanner) more() bool { return p.i < len(p.s) }

func (p *versionScanner) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isSep(c byte) bool { return c == '.' || c == '-' || c == '_' }

// number reads decimal digits; ok is false when there are none or the value
// does not fit in 64 bits.
func (p *versionScanner) number() (uint64, bool) {
	start := p.i
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		p.i++
	}
	if p.i == start {
		return 0, false
	}
	n, err := strconv.ParseUint(p.s[start:p.i], 10, 64)
	return n, err == nil
}

// word reads one of the given words at the current position, longest first
// as listed by the caller.
func (p *versionScanner) word(words ...string) string {
	for _, w := range words {
		if strings.HasPrefix(p.s[p.i:], w) {
			p.i += len(w)
			return w
		}
	}
	return ""
}

// optNumber reads an optional separator and number after a pre, post or dev
// label; a missing number is 0.
func (p *versionScanner) optNumber() (uint64, bool) {
	save := p.i
	if p.more() && isSep(p.peek()) {
		p.i++
	}
	if p.more() && isDigit(p.peek()) {
		return p.number()
	}
	p.i = save
	return 0, true
}

// parseVersion reads a PEP 440 version in its steps, each optional but the
// release: [v] [N!] N(.N)* [pre] [post] [dev] [+local].
func parseVersion(s string) (Version, bool) {
	text := strings.TrimSpace(s)
	if len(text) > dotted.MaxLen {
		return Version{}, false
	}
	p := &versionScanner{s: strings.ToLower(text)}
	v := Version{text: text}
	ok := p.epochAndRelease(&v) && p.preRelease(&v) && p.postRelease(&v) && p.devRelease(&v) && p.localLabel(&v)
	if !ok || p.more() {
		return Version{}, false
	}
	return v, true
}

// epochAndRelease reads [v] [N!] N(.N)*.
func (p *versionScanner) epochAndRelease(v *Version) bool {
	if p.peek() == 'v' {
		p.i++
	}
	n, ok := p.number()
	if !ok {
		return false
	}
	if p.peek() == '!' {
		p.i++
		v.epoch = n
		if n, ok = p.number(); !ok {
			return false
		}
	}
	v.release = append(v.release, n)
	for p.peek() == '.' && p.i+1 < len(p.s) && isDigit(p.s[p.i+1]) {
		p.i++
		if n, ok = p.number(); !ok {
			return false
		}
		v.release = append(v.release, n)
	}
	return true
}

// preRelease reads [sep] (alpha|a|beta|b|preview|pre|c|rc) [sep] [N].
func (p *versionScanner) preRelease(v *Version) bool {
	save := p.i
	if isSep(p.peek()) {
		p.i++
	}
	switch p.word("alpha", "a", "beta", "b", "preview", "pre", "rc", "c") {
	case "alpha", "a":
		v.pre.kind = 'a'
	case "beta", "b":
		v.pre.kind = 'b'
	case "preview", "pre", "rc", "c":
		v.pre.kind = 'c'
	default:
		p.i = save
		return true
	}
	var ok bool
	v.pre.n, ok = p.optNumber()
	return ok
}

// postRelease reads -N, or [sep] (post|rev|r) [sep] [N].
func (p *versionScanner) postRelease(v *Version) bool {
	save := p.i
	var ok bool
	if p.peek() == '-' && p.i+1 < len(p.s) && isDigit(p.s[p.i+1]) {
		p.i++
		v.post, ok = p.number()
		v.hasPost = true
		return ok
	}
	if isSep(p.peek()) {
		p.i++
	}
	if p.word("post", "rev", "r") == "" {
		p.i = save
		return true
	}
	v.hasPost = true
	v.post, ok = p.optNumber()
	return ok
}

// devRelease reads [sep] dev [sep] [N].
func (p *versionScanner) devRelease(v *Version) bool {
	save := p.i
	if isSep(p.peek()) {
		p.i++
	}
	if p.word("dev") == "" {
		p.i = save
		return true
	}
	v.hasDev = true
	var ok bool
	v.dev, ok = p.optNumber()
	return ok
}

// localLabel reads + alnum ([sep] alnum)*.
func (p *versionScanner) localLabel(v *Version) bool {
	if p.peek() != '+' {
		return true
	}
	p.i++
	for {
		start := p.i
		for p.more() && (isDigit(p.peek()) || (p.peek() >= 'a' && p.peek() <= 'z')) {
			p.i++
		}
		if p.i == start {
			return false
		}
		seg := p.s[start:p.i]
		if n, err := strconv.ParseUint(seg, 10, 64); err == nil {
			v.local = append(v.local, localPart{num: n, isNum: true})
		} else if isAllDigits(seg) {
			return false // a number beyond 64 bits
		} else {
			v.local = append(v.local, localPart{word: seg})
		}
		if !isSep(p.peek()) {
			return true
		}
		p.i++
	}
}

func isAllDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// String is the normalized form ("1.0.0-alpha.1" gives "1.0.0a1").
func (v Version) String() string {
	if len(v.local) > 0 {
		return v.Public() + "+" + v.Local()
	}
	return v.Public()
}

// Public is the normalized version without its local label.
func (v Version) Public() string {
	var b strings.Builder
	if v.epoch != 0 {
		fmt.Fprintf(&b, "%d!", v.epoch)
	}
	for i, n := range v.release {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.FormatUint(n, 10))
	}
	switch v.pre.kind {
	case 'a', 'b':
		fmt.Fprintf(&b, "%c%d", v.pre.kind, v.pre.n)
	case 'c':
		fmt.Fprintf(&b, "rc%d", v.pre.n)
	}
	if v.hasPost {
		fmt.Fprintf(&b, ".post%d", v.post)
	}
	if v.hasDev {
		fmt.Fprintf(&b, ".dev%d", v.dev)
	}
	return b.String()
}

// Local is the normalized local label ("cu130" of 2.11.0+cu130), or "".
func (v Version) Local() string {
	parts := make([]string, len(v.local))
	for i, l := range v.local {
		if l.isNum {
			parts[i] = strconv.FormatUint(l.num, 10)
		} else {
			parts[i] = l.word
		}
	}
	return strings.Join(parts, ".")
}

// IsPrerelease says whether v is a pre-release or a development release.
func (v Version) IsPrerelease() bool { return v.pre.kind != 0 || v.hasDev }

// IsPostrelease says whether v is a post-release.
func (v Version) IsPostrelease() bool { return v.hasPost }

// IsZero says whether v is the zero Version (never parsed).
func (v Version) IsZero() bool { return len(v.release) == 0 }

// base is v without pre, post, dev and local parts (epoch kept).
func (v Version) base() Version {
	return Version{epoch: v.epoch, release: v.release}
}

// public is v without its local label.
func (v Version) public() Version {
	w := v
	w.local = nil
	return w
}

// Compare orders versions as PEP 440 does: -1, 0 or +1.
func (v Version) Compare(w Version) int {
	if c := cmp.Compare(v.epoch, w.epoch); c != 0 {
		return c
	}
	// Trailing zeros do not count: 1.0 == 1.0.0.
	a, b := trimZeros(v.release), trimZeros(w.release)
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y uint64
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(v.preKey(), w.preKey()); c != 0 {
		return c
	}
	if v.pre.kind != 0 && w.pre.kind != 0 {
		if c := cmp.Compare(v.pre.n, w.pre.n); c != 0 {
			return c
		}
	}
	// No post-release sorts before any.
	if c := cmpBoolThen(v.hasPost, v.post, w.hasPost, w.post, false); c != 0 {
		return c
	}
	// No dev release sorts after any.
	if c := cmpBoolThen(v.hasDev, v.dev, w.hasDev, w.dev, true); c != 0 {
		return c
	}
	return compareLocal(v.local, w.local)
}

// preKey ranks the pre-release part: a dev release of a final version
// (1.0.dev0) sorts before its alphas; no pre-release sorts after all.
func (v Version) preKey() int {
	switch {
	case v.pre.kind == 'a':
		return 1
	case v.pre.kind == 'b':
		return 2
	case v.pre.kind == 'c':
		return 3
	case !v.hasPost && v.hasDev:
		return math.MinInt
	default:
		return math.MaxInt
	}
}

// cmpBoolThen compares optional numbers; absentLast says whether an absent
// value sorts after every present one.
func cmpBoolThen(hasA bool, a uint64, hasB bool, b uint64, absentLast bool) int {
	switch {
	case hasA && hasB:
		return cmp.Compare(a, b)
	case hasA == hasB:
		return 0
	case hasA == absentLast:
		return -1
	default:
		return 1
	}
}

// compareLocal orders local labels: none sorts first; segment by segment,
// numbers above words, words alphabetically; a longer label that extends a
// shorter one sorts after it.
func compareLocal(a, b []localPart) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		switch {
		case x.isNum && y.isNum:
			if c := cmp.Compare(x.num, y.num); c != 0 {
				return c
			}
		case x.isNum:
			return 1
		case y.isNum:
			return -1
		default:
			if c := strings.Compare(x.word, y.word); c != 0 {
				return c
			}
		}
	}
	return cmp.Compare(len(a), len(b))
}

func trimZeros(r []uint64) []uint64 {
	n := len(r)
	for n > 0 && r[n-1] == 0 {
		n--
	}
	return r[:n]
}
