// Package humansize writes byte counts the one way cudadeps shows them: binary units (KiB, MiB, GiB).
package humansize

import "fmt"

// Bytes writes n as "812 B", "1.5 KiB", "160.0 MiB", "2.3 GiB" or larger.
func Bytes(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		v /= 1024
		if v < 1024 && v > -1024 || unit == "PiB" {
			return fmt.Sprintf("%.1f %s", v, unit)
		}
	}
	panic("unreachable")
}
