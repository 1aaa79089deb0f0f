// Package tty says whether a stream is a terminal, which decides whether cudadeps may ask, draw progress bars or colour its words.
package tty

import "golang.org/x/term"

// Is reports whether stream (an *os.File, or anything with a file
// descriptor) is a terminal; a pipe, a file or a buffer is not.
func Is(stream any) bool {
	f, ok := stream.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}
