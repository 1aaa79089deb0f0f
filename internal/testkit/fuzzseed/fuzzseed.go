// Package fuzzseed keeps a fuzz target's seed corpus in testdata/fuzz/NAME as the Go fuzzer reads it, written by the code that makes each seed, so that the seeds stay small, reviewable and in step with the formats they exercise.
package fuzzseed

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// MaxSize is the largest seed: the fuzzer minimises every input that finds
// new coverage, one byte at a time, and a large seed's mutations cost it
// minutes each where a small one's cost a second.
const MaxSize = 4 << 10

// UpdateEnv rewrites the corpus when set to 1.
const UpdateEnv = "CUDADEPS_UPDATE_SEEDS"

// Check compares the seeds with their files in testdata/fuzz/name
// (relative to the package under test). A seed larger than MaxSize fails.
// With CUDADEPS_UPDATE_SEEDS=1 it writes them instead. Other files there
// are inputs the fuzzer found failing once: they stay, as regression tests.
func Check(t *testing.T, name string, seeds map[string][]byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", name)
	for n, b := range seeds {
		if len(b) > MaxSize {
			t.Errorf("seed %s/%s has %d bytes, more than %d: the fuzzer would spend its time minimising", name, n, len(b), MaxSize)
		}
	}
	if os.Getenv(UpdateEnv) == "1" {
		if err := write(dir, seeds); err != nil {
			t.Fatal(err)
		}
		return
	}
	var names []string
	for n := range seeds {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		got, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || !bytes.Equal(got, Encode(seeds[n])) {
			t.Errorf("%s/%s is missing or stale: run %s=1 go test -run '%s' (%v)", dir, n, UpdateEnv, t.Name(), err)
		}
	}
}

// Encode is a []byte input in the fuzzer's corpus file format.
func Encode(b []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n")
}

func write(dir string, seeds map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for n, b := range seeds {
		if strings.ContainsAny(n, "/\\") || n == "" {
			return fmt.Errorf("seed name %q", n)
		}
		if err := os.WriteFile(filepath.Join(dir, n), Encode(b), 0o644); err != nil {
			return err
		}
	}
	return nil
}
