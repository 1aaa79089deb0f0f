package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedWheelIsGenerated keeps the example wheel what the generator
// writes (regenerate with go run ./examples/demowheel).
func TestCommittedWheelIsGenerated(t *testing.T) {
	want, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", Wheel))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what go run ./examples/demowheel writes", Wheel)
	}
}
