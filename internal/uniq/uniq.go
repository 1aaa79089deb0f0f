// Package uniq keeps lists whose elements appear once, in the order they were first added.
package uniq

import "slices"

// Append appends v to list unless list already holds it.
func Append[T comparable](list []T, v T) []T {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}
