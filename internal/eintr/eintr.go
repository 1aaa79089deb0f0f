// Package eintr retries a system call that a signal interrupted (EINTR), as the os package does for the calls it wraps and raw syscall users must do themselves.
package eintr

import "syscall"

// Retry calls call until it ends with anything but EINTR.
func Retry(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != syscall.EINTR {
			return n, err
		}
	}
}
