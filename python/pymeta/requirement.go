package pymeta

import (
	"fmt"
	"strings"
)

// Requirement is a PEP 508 dependency specifier, as in Requires-Dist:
// "cuda-toolkit[cublas,cudart]==13.0.2; platform_system == \"Linux\"".
type Requirement struct {
	Name      string       // as written
	Extras    []string     // as written, in order
	Specifier SpecifierSet // empty for any version or a URL
	URL       string       // "name @ URL"
	Marker    *Marker      // nil when none
}

// ParseRequirement parses one PEP 508 requirement.
func ParseRequirement(s string) (Requirement, error) { return parseRequirementSharing(s, nil) }

// parseRequirementSharing is ParseRequirement with its marker from shared
// (nil: parsed for it alone).
func parseRequirementSharing(s string, shared *SharedMarkers) (Requirement, error) {
	r, err := parseRequirement(s, shared)
	if err != nil {
		return Requirement{}, fmt.Errorf("requirement %s: %w", clipped(s), err)
	}
	return r, nil
}

func parseRequirement(s string, shared *SharedMarkers) (Requirement, error) {
	var r Requirement
	rest := strings.TrimLeft(s, " \t")
	n := nameLen(rest)
	if n == 0 {
		return r, fmt.Errorf("no project name")
	}
	r.Name, rest = rest[:n], skipWS(rest[n:])
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return r, fmt.Errorf("missing ]")
		}
		if inner := strings.TrimSpace(rest[1:end]); inner != "" {
			for _, e := range strings.Split(inner, ",") {
				e = strings.Trim(e, " \t")
				if !validName(e) {
					return r, fmt.Errorf("bad extra name %q", e)
				}
				r.Extras = append(r.Extras, e)
			}
		}
		rest = skipWS(rest[end+1:])
	}
	// Marker text starts at the first ';' outside a URL.
	if strings.HasPrefix(rest, "@") {
		rest = skipWS(rest[1:])
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		r.URL, rest = rest[:end], skipWS(rest[end:])
		if r.URL == "" {
			return r, fmt.Errorf("no URL after @")
		}
		if rest != "" && !strings.HasPrefix(rest, ";") {
			return r, fmt.Errorf("unexpected %s after the URL", clipped(rest))
		}
	} else {
		spec := rest
		if i := strings.IndexByte(rest, ';'); i >= 0 {
			spec, rest = rest[:i], rest[i:]
		} else {
			rest = ""
		}
		spec = strings.TrimSpace(spec)
		if strings.HasPrefix(spec, "(") {
			if !strings.HasSuffix(spec, ")") {
				return r, fmt.Errorf("missing )")
			}
			spec = strings.TrimSpace(spec[1 : len(spec)-1])
		}
		if spec != "" {
			for _, part := range strings.Split(spec, ",") {
				sp, err := ParseSpecifier(part)
				if err != nil {
					return r, err
				}
				if sp.Op == "===" && strings.ContainsAny(sp.Version, "(,") {
					return r, fmt.Errorf("bad version %s", clipped(sp.Version))
				}
				r.Specifier = append(r.Specifier, sp)
			}
		}
	}
	if strings.HasPrefix(rest, ";") {
		m := strings.TrimSpace(rest[1:])
		if m == "" {
			return r, fmt.Errorf("empty marker after ;")
		}
		mk, err := shared.parse(m)
		if err != nil {
			return r, err
		}
		r.Marker = mk
	} else if rest != "" {
		return r, fmt.Errorf("unexpected %s", clipped(rest))
	}
	return r, nil
}

// nameLen is the length of the PEP 508 name that s starts with, 0 if none.
func nameLen(s string) int {
	n := 0
	for n < len(s) && (isWordByte(s[n]) || s[n] == '.' || s[n] == '-') {
		n++
	}
	// A name ends with a letter or digit.
	for n > 0 && !isWordByte(s[n-1]) || n > 0 && s[n-1] == '_' {
		n--
	}
	if n == 0 || !validName(s[:n]) {
		return 0
	}
	return n
}

func skipWS(s string) string { return strings.TrimLeft(s, " \t") }

// String is the requirement in canonical spelling.
func (r Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Name)
	if len(r.Extras) > 0 {
		b.WriteString("[" + strings.Join(r.Extras, ",") + "]")
	}
	if r.URL != "" {
		b.WriteString(" @ " + r.URL)
		if r.Marker != nil {
			b.WriteString(" ")
		}
	}
	b.WriteString(r.Specifier.String())
	if r.Marker != nil {
		b.WriteString("; " + r.Marker.String())
	}
	return b.String()
}

// Applies says whether the requirement holds in env when the given extras
// of its owner are requested: its marker is evaluated with "extra" unset and
// with each extra in turn, as pip does. A marker that reads a variable env
// lacks is taken to hold unless the known variables already rule it out;
// known is false then.
func (r Requirement) Applies(env Environment, extras []string) (applies, known bool) {
	if r.Marker == nil {
		return true, true
	}
	known = true
	for i := -1; i < len(extras); i++ {
		x := "" // the requirement itself, then each extra
		if i >= 0 {
			x = extras[i]
		}
		v, k := r.Marker.evaluatePartial(newMarkerEnv(env, x))
		if k && v {
			return true, true
		}
		if !k {
			applies, known = true, false
		}
	}
	return applies, known
}
