package pyenv

import "testing"

// BenchmarkInstalledTorchEnvironment reads every distribution of the real
// torch environment's dist-info folders (71 of them, 68,849 RECORD lines):
// in full, as resolve and doctor read them, and for the paths that may be
// objects alone, as a scan reads them.
func BenchmarkInstalledTorchEnvironment(b *testing.B) {
	site := untarCorpus(b)
	for _, mode := range []struct {
		name        string
		objectsOnly bool
	}{{"full", false}, {"objects-only", true}} {
		b.Run(mode.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				env := &Env{SiteDirs: []string{site}, Markers: linuxX86Py312, ObjectsOnly: mode.objectsOnly}
				dists, problems := env.Installed()
				if len(problems) > 0 || len(dists) == 0 {
					b.Fatalf("%d distributions, problems %v", len(dists), problems)
				}
				n = len(dists)
			}
			b.ReportMetric(float64(n), "dists")
		})
	}
}
