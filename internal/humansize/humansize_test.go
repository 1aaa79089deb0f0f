package humansize

import "testing"

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0:           "0 B",
		1023:        "1023 B",
		1024:        "1.0 KiB",
		1536:        "1.5 KiB",
		160 << 20:   "160.0 MiB",
		168_000_000: "160.2 MiB",
		5 << 30:     "5.0 GiB",
		3 << 40:     "3.0 TiB",
		1 << 62:     "4096.0 PiB",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
