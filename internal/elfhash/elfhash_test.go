package elfhash

import "testing"

// TestKnownValues checks both hashes against values other tools print:
// version-record hashes as objdump -p lists them for glibc's libm
// ("Version References"), and the GNU hash of printf as the DT_GNU_HASH
// write-ups give it; "" and "a" follow from the definitions alone.
func TestKnownValues(t *testing.T) {
	for name, want := range map[string]uint32{"": 0, "a": 0x61, "GLIBC_2.2.5": 0x09691a75, "GLIBC_2.4": 0x0d696914} {
		if got := SysV(name); got != want {
			t.Errorf("SysV(%q) = %#x, want %#x", name, got, want)
		}
	}
	for name, want := range map[string]uint32{"": 5381, "a": 5381*33 + 'a', "printf": 0x156b2bb8} {
		if got := GNU(name); got != want {
			t.Errorf("GNU(%q) = %#x, want %#x", name, got, want)
		}
	}
}
