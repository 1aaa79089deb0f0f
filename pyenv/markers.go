package pyenv

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// EvalMarker evaluates a PEP 508 environment marker (the part of a
// Requires-Dist after ';') against an environment's marker variables. An
// "extra" is never requested: requirements of extras do not apply.
func EvalMarker(expr string, vars Markers) (bool, error) {
	toks, err := lexMarker(expr)
	if err != nil {
		return false, err
	}
	p := &markerParser{toks: toks, vars: vars}
	v, err := p.or()
	if err != nil {
		return false, fmt.Errorf("marker %q: %w", expr, err)
	}
	if p.pos != len(p.toks) {
		return false, fmt.Errorf("marker %q: unexpected %q", expr, p.toks[p.pos].s)
	}
	return v, nil
}

type token struct {
	kind byte // 'w' word, 's' string, 'o' operator, '(' ')'
	s    string
}

func lexMarker(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '(' || c == ')':
			out = append(out, token{c, string(c)})
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated string in %q", s)
			}
			out = append(out, token{'s', s[i+1 : i+1+j]})
			i += j + 2
		case strings.ContainsRune("=!<>~", rune(c)):
			j := i + 1
			for j < len(s) && strings.ContainsRune("=!<>~", rune(s[j])) {
				j++
			}
			out = append(out, token{'o', s[i:j]})
			i = j
		case unicode.IsLetter(rune(c)) || c == '_':
			j := i
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_' || s[j] == '.') {
				j++
			}
			out = append(out, token{'w', s[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q in %q", c, s)
		}
	}
	return out, nil
}

type markerParser struct {
	toks []token
	pos  int
	vars Markers
}

func (p *markerParser) peek() *token {
	if p.pos < len(p.toks) {
		return &p.toks[p.pos]
	}
	return nil
}

func (p *markerParser) or() (bool, error) {
	v, err := p.and()
	if err != nil {
		return false, err
	}
	for t := p.peek(); t != nil && t.kind == 'w' && t.s == "or"; t = p.peek() {
		p.pos++
		r, err := p.and()
		if err != nil {
			return false, err
		}
		v = v || r
	}
	return v, nil
}

func (p *markerParser) and() (bool, error) {
	v, err := p.atom()
	if err != nil {
		return false, err
	}
	for t := p.peek(); t != nil && t.kind == 'w' && t.s == "and"; t = p.peek() {
		p.pos++
		r, err := p.atom()
		if err != nil {
			return false, err
		}
		v = v && r
	}
	return v, nil
}

func (p *markerParser) atom() (bool, error) {
	t := p.peek()
	if t == nil {
		return false, fmt.Errorf("expression ends early")
	}
	if t.kind == '(' {
		p.pos++
		v, err := p.or()
		if err != nil {
			return false, err
		}
		if c := p.peek(); c == nil || c.kind != ')' {
			return false, fmt.Errorf("missing )")
		}
		p.pos++
		return v, nil
	}
	left, lvar, err := p.value()
	if err != nil {
		return false, err
	}
	op := p.peek()
	if op == nil {
		return false, fmt.Errorf("missing operator")
	}
	p.pos++
	opStr := op.s
	if op.kind == 'w' && op.s == "not" {
		if n := p.peek(); n != nil && n.kind == 'w' && n.s == "in" {
			p.pos++
			opStr = "not in"
		}
	} else if op.kind == 'w' && op.s != "in" {
		return false, fmt.Errorf("unexpected %q", op.s)
	}
	right, rvar, err := p.value()
	if err != nil {
		return false, err
	}
	if lvar == "extra" || rvar == "extra" {
		// No extra is ever requested.
		return false, nil
	}
	version := isVersionVar(lvar) || isVersionVar(rvar)
	return compareMarker(left, opStr, right, version)
}

func (p *markerParser) value() (string, string, error) {
	t := p.peek()
	if t == nil {
		return "", "", fmt.Errorf("missing value")
	}
	p.pos++
	switch t.kind {
	case 's':
		return t.s, "", nil
	case 'w':
		v, ok := p.vars[t.s]
		if !ok && t.s != "extra" {
			return "", t.s, fmt.Errorf("unknown marker variable %s", t.s)
		}
		return v, t.s, nil
	}
	return "", "", fmt.Errorf("unexpected %q", t.s)
}

func isVersionVar(v string) bool {
	return v == "python_version" || v == "python_full_version" || v == "implementation_version"
}

func compareMarker(l, op, r string, version bool) (bool, error) {
	switch op {
	case "in":
		return strings.Contains(r, l), nil
	case "not in":
		return !strings.Contains(r, l), nil
	}
	if version {
		c := compareVersions(l, r)
		switch op {
		case "==", "===":
			return c == 0, nil
		case "!=":
			return c != 0, nil
		case "<":
			return c < 0, nil
		case "<=":
			return c <= 0, nil
		case ">":
			return c > 0, nil
		case ">=":
			return c >= 0, nil
		case "~=":
			return c >= 0, nil
		}
	}
	switch op {
	case "==", "===":
		return l == r, nil
	case "!=":
		return l != r, nil
	}
	return false, fmt.Errorf("operator %s on strings", op)
}

func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(strings.TrimFunc(pa[i], func(r rune) bool { return !unicode.IsDigit(r) }))
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(strings.TrimFunc(pb[i], func(r rune) bool { return !unicode.IsDigit(r) }))
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
