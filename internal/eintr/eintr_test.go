package eintr

import (
	"errors"
	"syscall"
	"testing"
)

func TestRetry(t *testing.T) {
	calls := 0
	n, err := Retry(func() (int, error) {
		calls++
		if calls < 3 {
			return 0, syscall.EINTR
		}
		return 7, errors.New("done")
	})
	if calls != 3 || n != 7 || err == nil || err.Error() != "done" {
		t.Errorf("Retry: %d calls, %d, %v", calls, n, err)
	}
}
