package pymeta

import "strings"

// NormalizeName is the PEP 503 form of a project or extra name:
// "Nvidia_CuDNN.cu13" is "nvidia-cudnn-cu13".
func NormalizeName(name string) string {
	if isNormalized(name) {
		return name // most names are: no copy (called per requirement)
	}
	var b strings.Builder
	b.Grow(len(name))
	sep := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '-' || c == '_' || c == '.' {
			sep = true
			continue
		}
		if sep {
			b.WriteByte('-')
			sep = false
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	if sep {
		b.WriteByte('-')
	}
	return b.String()
}

// isNormalized says whether NormalizeName would return name unchanged:
// lower case, and '-' the only separator, never twice in a row.
func isNormalized(name string) bool {
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'A' && c <= 'Z', c == '_', c == '.':
			return false
		case c == '-' && i > 0 && name[i-1] == '-':
			return false
		}
	}
	return true
}

// validName says whether s is a PEP 508 name: letters and digits, with
// '.', '-' and '_' inside only.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if alnum {
			continue
		}
		if (c == '.' || c == '-' || c == '_') && i > 0 && i < len(s)-1 {
			continue
		}
		return false
	}
	return true
}
