package pymeta

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cudadeps/cudadeps/internal/memo"
)

// Environment holds the values of PEP 508 marker variables
// ("sys_platform": "linux", "python_version": "3.12", "extra": "cublas").
type Environment map[string]string

// Marker is a parsed PEP 508 environment marker.
type Marker struct {
	text string
	root *markerNode
}

// markerNode is an "and"/"or" of its children, or a comparison (a leaf).
type markerNode struct {
	op       string // "and", "or", or "" for a comparison
	children []*markerNode
	// A comparison: variable op literal, or literal op variable.
	variable    string
	literal     string
	cmp         string // == != <= >= < > ~= === in "not in"
	literalLeft bool
	// spec is "cmp literal" parsed, when the variable is compared as a
	// version against a literal on the right that makes a specifier.
	spec *Specifier
}

// ErrUndefined is wrapped by Evaluate's error when the environment lacks a
// variable the marker reads.
var ErrUndefined = errors.New("undefined marker variable")

// markerVariables are the variable names PEP 508 defines, with the older
// spellings packaging still accepts mapped to them.
var markerVariables = map[string]string{
	"python_version":                 "python_version",
	"python_full_version":            "python_full_version",
	"os_name":                        "os_name",
	"os.name":                        "os_name",
	"sys_platform":                   "sys_platform",
	"sys.platform":                   "sys_platform",
	"platform_release":               "platform_release",
	"platform_system":                "platform_system",
	"platform_version":               "platform_version",
	"platform.version":               "platform_version",
	"platform_machine":               "platform_machine",
	"platform.machine":               "platform_machine",
	"platform_python_implementation": "platform_python_implementation",
	"platform.python_implementation": "platform_python_implementation",
	"python_implementation":          "platform_python_implementation",
	"implementation_name":            "implementation_name",
	"implementation_version":         "implementation_version",
	"extra":                          "extra",
}

// versionVariables are compared as versions when both sides allow it.
var versionVariables = map[string]bool{
	"implementation_version": true,
	"platform_release":       true,
	"python_full_version":    true,
	"python_version":         true,
}

// SharedMarkers parses each marker text once for every requirement that
// has it: a Marker is never changed once parsed, so requirements share
// it. The zero value is ready to use; it is safe for concurrent use and
// must not be copied after first use.
type SharedMarkers struct {
	parsed memo.Map[string, parsedMarker]
}

type parsedMarker struct {
	m   *Marker
	err error
}

// parse is ParseMarker(text), shared; a nil s parses text alone.
func (s *SharedMarkers) parse(text string) (*Marker, error) {
	if s == nil {
		return ParseMarker(text)
	}
	p := s.parsed.Get(text, func() parsedMarker {
		m, err := ParseMarker(text)
		return parsedMarker{m, err}
	})
	return p.m, p.err
}

// ParseMarker parses the text after ';' of a requirement.
func ParseMarker(s string) (*Marker, error) {
	toks, err := lexMarker(s)
	if err != nil {
		return nil, fmt.Errorf("marker %q: %w", s, err)
	}
	p := &markerParser{toks: toks}
	root, err := p.or(0)
	if err != nil {
		return nil, fmt.Errorf("marker %q: %w", s, err)
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("marker %q: unexpected %q", s, p.toks[p.pos].text)
	}
	return &Marker{text: strings.TrimSpace(s), root: root}, nil
}

// String is the marker as written.
func (m *Marker) String() string { return m.text }

// Evaluate says whether the marker holds in env, as packaging evaluates
// METADATA markers: "extra" is "" unless env gives one, and extra names are
// compared normalized. A variable env lacks, or a comparison PEP 508 leaves
// undefined ("~=" between strings), is an error.
func (m *Marker) Evaluate(env Environment) (bool, error) {
	v, err := m.root.eval(newMarkerEnv(env, env["extra"]))
	if err != nil {
		return false, fmt.Errorf("marker %q: %w", m.text, err)
	}
	return v == triTrue, nil
}

// EvaluatePartial evaluates with what env knows: a comparison that reads a
// variable env lacks is unknown, and unknowns combine as in three-valued
// logic (false and unknown is false). known is false when the result
// depends on an unknown.
func (m *Marker) EvaluatePartial(env Environment) (value, known bool) {
	return m.evaluatePartial(newMarkerEnv(env, env["extra"]))
}

func (m *Marker) evaluatePartial(env markerEnv) (value, known bool) {
	v, _ := m.root.evalPartial(env)
	return v == triTrue, v != triUnknown
}

// markerEnv is an Environment as markers read it, with "extra" given
// apart: markers are evaluated for every requirement of every
// distribution, once per extra, and the map is not copied for each.
type markerEnv struct {
	env   Environment
	extra string // normalized; "" when none
}

func newMarkerEnv(env Environment, extra string) markerEnv {
	return markerEnv{env: env, extra: NormalizeName(extra)}
}

func (e markerEnv) get(name string) (string, bool) {
	if name == "extra" {
		return e.extra, true
	}
	v, ok := e.env[name]
	if ok && name == "python_full_version" && strings.HasSuffix(v, "+") {
		// An interpreter built from an untagged checkout reports "3.12.3+",
		// which is no version; packaging reads it as a local version.
		v += "local"
	}
	return v, ok
}

type tri int

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

func (n *markerNode) eval(env markerEnv) (tri, error) {
	v, err := n.evalPartial(env)
	if err != nil {
		return triFalse, err
	}
	return v, nil
}

// evalPartial returns the value and, for an unknown, why.
func (n *markerNode) evalPartial(env markerEnv) (tri, error) {
	switch n.op {
	case "and", "or":
		// decisive is the value that settles the chain whatever else it
		// holds; every comparison is still evaluated, as packaging does,
		// so that Evaluate reports an error anywhere in the marker.
		decisive, result := triFalse, triTrue
		if n.op == "or" {
			decisive, result = triTrue, triFalse
		}
		var firstErr error
		for _, c := range n.children {
			v, err := c.evalPartial(env)
			if err != nil && firstErr == nil {
				firstErr = err
			}
			switch {
			case v == decisive:
				result = decisive
			case v == triUnknown && result != decisive:
				result = triUnknown
			}
		}
		return result, firstErr
	}
	val, ok := env.get(n.variable)
	if !ok {
		return triUnknown, fmt.Errorf("%w %s", ErrUndefined, n.variable)
	}
	if n.spec != nil {
		if n.spec.containsText(val) {
			return triTrue, nil
		}
		return triFalse, nil
	}
	lit := n.literal
	lhs, rhs := val, lit
	if n.literalLeft {
		lhs, rhs = lit, val
	}
	r, err := compareMarker(lhs, n.cmp, rhs, n.variable)
	if err != nil {
		return triUnknown, err
	}
	if r {
		return triTrue, nil
	}
	return triFalse, nil
}

// compareMarker compares as packaging does: for version variables, as a
// version specifier "op rhs" applied to lhs when rhs makes a valid
// specifier; otherwise as strings, where only equality, inequality and
// (not) in are defined ("<=" and ">=" mean equal, "<" and ">" never hold).
func compareMarker(lhs, op, rhs, variable string) (bool, error) {
	if versionVariables[variable] && op != "in" && op != "not in" {
		if sp, ok := parseMarkerSpecifier(op, rhs); ok {
			return sp.containsText(lhs), nil
		}
	}
	switch op {
	case "in":
		return strings.Contains(rhs, lhs), nil
	case "not in":
		return !strings.Contains(rhs, lhs), nil
	case "==", "<=", ">=":
		return lhs == rhs, nil
	case "!=":
		return lhs != rhs, nil
	case "<", ">":
		return false, nil
	}
	return false, fmt.Errorf("%s is undefined between %q and %q", op, lhs, rhs)
}

// parseMarkerSpecifier is "op rhs" as a version specifier, when it makes
// one.
func parseMarkerSpecifier(op, rhs string) (Specifier, bool) {
	sp, err := ParseSpecifier(op + rhs)
	return sp, err == nil
}

type markerToken struct {
	kind byte // 'v' variable, 's' string, 'o' comparison, 'b' and/or, '(' ')'
	text string
}

func lexMarker(s string) ([]markerToken, error) {
	var out []markerToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '(' || c == ')':
			out = append(out, markerToken{c, string(c)})
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated string")
			}
			out = append(out, markerToken{'s', s[i+1 : i+1+j]})
			i += j + 2
		case strings.IndexByte("=!<>~", c) >= 0:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("bad operator at %q", s[i:])
			}
			out = append(out, markerToken{'o', op})
			i += len(op)
		case isWordByte(c):
			j := i
			for j < len(s) && (isWordByte(s[j]) || s[j] == '.') {
				j++
			}
			w := s[i:j]
			switch w {
			case "and", "or":
				out = append(out, markerToken{'b', w})
			case "in":
				out = append(out, markerToken{'o', "in"})
			case "not":
				// "not" only begins "not in".
				k := j
				for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
					k++
				}
				if k == j || !strings.HasPrefix(s[k:], "in") || (k+2 < len(s) && isWordByte(s[k+2])) {
					return nil, fmt.Errorf("expected 'not in'")
				}
				out = append(out, markerToken{'o', "not in"})
				j = k + 2
			default:
				name, ok := markerVariables[w]
				if !ok {
					return nil, fmt.Errorf("unknown variable %q", w)
				}
				out = append(out, markerToken{'v', name})
			}
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q", c)
		}
	}
	return out, nil
}

func isWordByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

type markerParser struct {
	toks []markerToken
	pos  int
}

// maxMarkerDepth bounds nesting so that hostile input cannot exhaust the
// stack.
const maxMarkerDepth = 64

func (p *markerParser) peek() *markerToken {
	if p.pos < len(p.toks) {
		return &p.toks[p.pos]
	}
	return nil
}

func (p *markerParser) or(depth int) (*markerNode, error) {
	return p.boolOp("or", depth)
}

// boolOp parses a chain of "or" (whose items are "and" chains) or of "and"
// (whose items are atoms): "and" binds tighter.
func (p *markerParser) boolOp(op string, depth int) (*markerNode, error) {
	item := func() (*markerNode, error) {
		if op == "or" {
			return p.boolOp("and", depth)
		}
		return p.atom(depth)
	}
	first, err := item()
	if err != nil {
		return nil, err
	}
	n := &markerNode{op: op, children: []*markerNode{first}}
	for t := p.peek(); t != nil && t.kind == 'b' && t.text == op; t = p.peek() {
		p.pos++
		next, err := item()
		if err != nil {
			return nil, err
		}
		n.children = append(n.children, next)
	}
	if len(n.children) == 1 {
		return first, nil
	}
	return n, nil
}

func (p *markerParser) atom(depth int) (*markerNode, error) {
	if depth > maxMarkerDepth {
		return nil, fmt.Errorf("nested too deeply")
	}
	t := p.peek()
	if t == nil {
		return nil, fmt.Errorf("expression ends early")
	}
	if t.kind == '(' {
		p.pos++
		n, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.peek(); c == nil || c.kind != ')' {
			return nil, fmt.Errorf("missing )")
		}
		p.pos++
		return n, nil
	}
	if len(p.toks)-p.pos < 3 {
		return nil, fmt.Errorf("expression ends early")
	}
	l, o, r := p.toks[p.pos], p.toks[p.pos+1], p.toks[p.pos+2]
	if o.kind != 'o' {
		return nil, fmt.Errorf("expected a comparison after %q", l.text)
	}
	n := &markerNode{cmp: o.text}
	switch {
	case l.kind == 'v' && r.kind == 's':
		n.variable, n.literal = l.text, r.text
	case l.kind == 's' && r.kind == 'v':
		n.variable, n.literal, n.literalLeft = r.text, l.text, true
	default:
		return nil, fmt.Errorf("a comparison needs a variable and a quoted string: %s %s %s", l.text, o.text, r.text)
	}
	if n.variable == "extra" {
		// Extra names compare normalized (PEP 685).
		n.literal = NormalizeName(n.literal)
	}
	if versionVariables[n.variable] && !n.literalLeft && n.cmp != "in" && n.cmp != "not in" {
		// As compareMarker would, once, not at every evaluation.
		if sp, ok := parseMarkerSpecifier(n.cmp, n.literal); ok {
			n.spec = &sp
		}
	}
	p.pos += 3
	return n, nil
}
