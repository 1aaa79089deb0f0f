// Package shquote writes a string so that a POSIX shell reads it back as one word.
package shquote

import "strings"

// Quote returns s as it is when every character is safe unquoted, else in
// single quotes (a single quote inside written as '\”).
func Quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '+' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
