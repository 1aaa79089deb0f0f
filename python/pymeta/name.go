package pymeta

import "strings"

// NormalizeName is the PEP 503 form of a project or extra name:
// "Nvidia_CuDNN.cu13" is "nvidia-cudnn-cu13".
func NormalizeName(name string) string {
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
