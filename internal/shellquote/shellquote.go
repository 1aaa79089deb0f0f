// Package shellquote writes strings so that a POSIX shell reads each back as one word, for the command lines cudadeps prints for users to paste.
package shellquote

import "strings"

// Word is s as one shell word: unchanged when every character is one a
// shell takes literally, else in single quotes, each quote inside closed,
// escaped with a backslash and reopened.
func Word(s string) string {
	if s != "" && strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join is the words quoted and joined by spaces: a command line.
func Join(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = Word(w)
	}
	return strings.Join(out, " ")
}

func unsafe(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
}
