package doctor

import "testing"

// TestDriverVersion: a driver version is one or more dot-separated
// numbers; its major is the first, and versions order field by field.
func TestDriverVersion(t *testing.T) {
	for s, major := range map[string]int{"580.95.05": 580, "525.60.13": 525, "470": 470} {
		v, ok := parseVersion(s)
		if !ok || !v.ok() || v.major() != major || v.String() != s {
			t.Errorf("parseVersion(%q) = %+v %v, major %d", s, v, ok, v.major())
		}
	}
	for _, s := range []string{"", "580.", ".95", "580..5", "580.95.05a", "-1", "r580"} {
		if v, ok := parseVersion(s); ok || v.ok() {
			t.Errorf("parseVersion(%q) accepted: %+v", s, v)
		}
	}
	if (version{}).major() != 0 {
		t.Error("the zero version has a major")
	}
	if a, b := mustVersion("580.9"), mustVersion("580.65.06"); !a.less(b) || b.less(a) || !a.equal(mustVersion("580.9")) {
		t.Error("580.9 does not order before 580.65.06")
	}
}
