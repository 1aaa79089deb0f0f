package pymeta

import (
	"strings"
	"testing"
)

// TestVersionLengthBounded: a version of 100,000 characters is refused
// with a short error, wherever it comes in (a version, a specifier, a
// requirement, METADATA), instead of being parsed into 50,000 fields.
func TestVersionLengthBounded(t *testing.T) {
	long := strings.Repeat("1.", 50_000) + "1"
	if _, err := ParseVersion(long); err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "at most 128") {
		t.Errorf("ParseVersion of %d characters: %.200v", len(long), err)
	}
	if _, err := ParseVersion(strings.Repeat("1.", 60) + "1"); err != nil {
		t.Errorf("a version of 121 characters is refused: %v", err)
	}
	if _, err := ParseSpecifierSet("==" + long); err == nil || len(err.Error()) > 300 {
		t.Errorf("a specifier with a version of %d characters: %.300v", len(long), err)
	}
	if _, err := ParseRequirement("torch==" + long); err == nil || len(err.Error()) > 300 {
		t.Errorf("a requirement with a version of %d characters: %.300v", len(long), err)
	}
}
