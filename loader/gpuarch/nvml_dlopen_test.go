//go:build dlprobe

package gpuarch

import (
	"context"
	"os"
	"testing"
)

// The test binary is its own NVML child, as cudadeps is.
func TestMain(m *testing.M) {
	if os.Getenv("CUDADEPS_TEST_NVML_CHILD") == "1" {
		os.Exit(NVMLChild(os.Stdout))
	}
	os.Exit(m.Run())
}

// TestNVMLChild runs the purego query against an NVML with code.
func TestNVMLChild(t *testing.T) {
	dir := buildFakeNVML(t)
	d, err := Detect(context.Background(), DetectOptions{Root: t.TempDir(), NVMLCommand: []string{os.Args[0]},
		Exec: withEnv("CUDADEPS_TEST_NVML_CHILD=1", "LD_LIBRARY_PATH="+dir)})
	if err != nil {
		t.Fatal(err)
	}
	checkFakeNVML(t, d, dir)
}
