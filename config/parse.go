package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Entry is one `key = value` line of a config file.
type Entry struct {
	Key  string
	Line int
	// Values holds the string, or the strings of an array.
	Values []string
	// Array is set for `key = [...]`.
	Array bool
}

func (e Entry) one() (string, error) {
	if e.Array || len(e.Values) != 1 {
		return "", fmt.Errorf("%s takes one string, not a list", e.Key)
	}
	if e.Values[0] == "" {
		return "", fmt.Errorf("%s is empty", e.Key)
	}
	return e.Values[0], nil
}

// parse reads the TOML subset of a config file: blank lines, # comments,
// and `key = "string"`, `key = 'literal'` or `key = ["string", ...]` on one
// line. Anything else — a table, a number, a repeated key — is an error
// whose text begins with the line number and a colon.
func parse(data []byte) ([]Entry, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("1: not UTF-8 text")
	}
	text := strings.TrimPrefix(string(data), "\ufeff")
	seen := map[string]int{}
	var out []Entry
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			return nil, fmt.Errorf("%d: tables (%s) are not used: write key = value lines at the top level", n, line)
		}
		key, rest, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%d: want key = value, got %q", n, line)
		}
		key = strings.TrimSpace(key)
		if !bareKey(key) {
			return nil, fmt.Errorf("%d: %q is not a key (letters, digits, _ and -)", n, key)
		}
		if prev, dup := seen[key]; dup {
			return nil, fmt.Errorf("%d: %s is set again (first on line %d)", n, key, prev)
		}
		seen[key] = n
		e := Entry{Key: key, Line: n}
		p := &valueParser{s: strings.TrimSpace(rest)}
		var err error
		if strings.HasPrefix(p.s, "[") {
			e.Array = true
			e.Values, err = p.array()
		} else {
			var v string
			v, err = p.str()
			e.Values = []string{v}
		}
		if err == nil {
			err = p.end()
		}
		if err != nil {
			return nil, fmt.Errorf("%d: %s: %w", n, key, err)
		}
		out = append(out, e)
	}
	return out, nil
}

func bareKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

type valueParser struct{ s string }

func (p *valueParser) skipSpace() { p.s = strings.TrimLeft(p.s, " \t") }

// end accepts what may follow a value: nothing, or a comment.
func (p *valueParser) end() error {
	p.skipSpace()
	if p.s == "" || p.s[0] == '#' {
		return nil
	}
	return fmt.Errorf("unexpected %q after the value", p.s)
}

func (p *valueParser) array() ([]string, error) {
	p.s = p.s[1:]
	out := []string{}
	for {
		p.skipSpace()
		if strings.HasPrefix(p.s, "]") {
			p.s = p.s[1:]
			return out, nil
		}
		v, err := p.str()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.skipSpace()
		switch {
		case strings.HasPrefix(p.s, ","):
			p.s = p.s[1:]
		case strings.HasPrefix(p.s, "]"):
		default:
			return nil, errors.New("a list is [\"a\", \"b\"] on one line")
		}
	}
}

// str reads a basic "string" (escapes \" \\ \t \n \uXXXX) or a 'literal'.
func (p *valueParser) str() (string, error) {
	p.skipSpace()
	if p.s == "" {
		return "", errors.New("no value: write a quoted string")
	}
	switch p.s[0] {
	case '\'':
		end := strings.IndexByte(p.s[1:], '\'')
		if end < 0 {
			return "", errors.New("unterminated 'string'")
		}
		v := p.s[1 : 1+end]
		p.s = p.s[2+end:]
		return v, nil
	case '"':
	default:
		// The bare word as written, up to a comment or the next item.
		word := p.s
		if i := strings.IndexAny(word, "#,]"); i >= 0 {
			word = word[:i]
		}
		if word = strings.TrimSpace(word); word == "" {
			return "", errors.New("no value: write a quoted string")
		}
		return "", fmt.Errorf("%s is not quoted: write %s", word, strconv.Quote(word))
	}
	var b strings.Builder
	for i := 1; i < len(p.s); i++ {
		c := p.s[i]
		switch c {
		case '"':
			p.s = p.s[i+1:]
			return b.String(), nil
		case '\\':
			if i+1 >= len(p.s) {
				return "", errors.New("unterminated \"string\"")
			}
			i++
			switch p.s[i] {
			case '"', '\\':
				b.WriteByte(p.s[i])
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			case 'u':
				if i+4 >= len(p.s) {
					return "", errors.New(`\u needs 4 hex digits`)
				}
				var r rune
				if _, err := fmt.Sscanf(p.s[i+1:i+5], "%04x", &r); err != nil {
					return "", fmt.Errorf(`\u%s: %w`, p.s[i+1:i+5], err)
				}
				b.WriteRune(r)
				i += 4
			default:
				return "", fmt.Errorf(`unknown escape \%c`, p.s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated \"string\"")
}
