package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
)

// benchmarkCommand runs a whole command line in-process, its output
// rendered and thrown away: the scan, the report and its rendering.
func benchmarkCommand(b *testing.B, args ...string) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if code := run(ctx, args, strings.NewReader(""), io.Discard, io.Discard); code != exitOK && code != exitMissing {
			b.Fatalf("%v: exit %d", args, code)
		}
	}
}

func BenchmarkScanCommand(b *testing.B) {
	const hostLibs = "/usr/lib/x86_64-linux-gnu"
	trees := map[string]func(b *testing.B) string{
		"torch-skeleton": func(b *testing.B) string {
			dir, _ := torchtree.Tree(b, torchtree.Options{Pad: true})
			return dir
		},
		"host-libraries": func(b *testing.B) string {
			if _, err := os.Stat(hostLibs); err != nil {
				lddtest.Need(b, false, "%s is absent", hostLibs)
			}
			return hostLibs
		},
	}
	for _, name := range []string{"torch-skeleton", "host-libraries"} {
		for _, format := range []string{"text", "json"} {
			b.Run(name+"/"+format, func(b *testing.B) {
				args := []string{"scan", "--quiet", trees[name](b)}
				if format == "json" {
					args = append(args, "--json")
				}
				benchmarkCommand(b, args...)
			})
		}
	}
}
