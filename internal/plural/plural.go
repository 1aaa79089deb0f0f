// Package plural chooses the singular or the plural form of an English word for a count, for the messages cudadeps prints.
package plural

import "strconv"

// Of is one when n is 1, else many: "librar"+Of(n, "y", "ies").
func Of(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count is n and the word, with an "s" unless n is 1: "1 failure", "3 warnings".
func Count(n int, word string) string {
	return strconv.Itoa(n) + " " + word + Of(n, "", "s")
}
