package pymeta

import "testing"

// BenchmarkParseMatch parses a specifier set and a version and matches
// them, the unit of work of checking one pin.
func BenchmarkParseMatch(b *testing.B) {
	for i := 0; i < b.N; i++ {
		s, err := ParseSpecifierSet(">=13.0.3,<14,!=13.1.*")
		if err != nil {
			b.Fatal(err)
		}
		v, err := ParseVersion("13.3.1+cu130")
		if err != nil {
			b.Fatal(err)
		}
		if !s.Contains(v, false) {
			b.Fatal("no match")
		}
	}
}

// BenchmarkMarker parses and evaluates a cuda-toolkit extra's marker.
func BenchmarkMarker(b *testing.B) {
	env := Environment{"sys_platform": "linux", "extra": "cublas"}
	for i := 0; i < b.N; i++ {
		m, err := ParseMarker("(sys_platform == 'linux' or sys_platform == 'win32') and extra == 'cublas'")
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := m.Evaluate(env); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
