package fetch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// benchArchive is an NVIDIA-like tar of about 8 MiB (half random, half
// repetitive bytes).
func benchArchive(b *testing.B) []byte {
	b.Helper()
	return tarBytes(b, redistMembers(8<<20))
}

// benchExtract times extracting one archive file into a fresh directory,
// in bytes of tar per second.
func benchExtract(b *testing.B, name string, data []byte, tarSize int, dec decoder) {
	src := filepath.Join(b.TempDir(), name)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		b.Fatal(err)
	}
	root := b.TempDir()
	lim := Limits{}.withDefaults()
	b.SetBytes(int64(tarSize))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		dest := filepath.Join(root, "out")
		if err := extractTo(context.Background(), src, dest, lim, dec); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(dest)
		b.StartTimer()
	}
}

// go test -run '^$' -bench Extract ./fetch/
func BenchmarkExtractTarXZ(b *testing.B) {
	raw := benchArchive(b)
	data := xzBytes(b, raw)
	b.Run("pure-go", func(b *testing.B) { benchExtract(b, "a.tar.xz", data, len(raw), decoder{}) })
	if d := autoDecoder(); d.xz != "" {
		b.Run("system-xz", func(b *testing.B) { benchExtract(b, "a.tar.xz", data, len(raw), d) })
	}
}

func BenchmarkExtractTarGz(b *testing.B) {
	raw := benchArchive(b)
	benchExtract(b, "a.tar.gz", gzBytes(b, raw), len(raw), decoder{})
}

func BenchmarkExtractTar(b *testing.B) {
	raw := benchArchive(b)
	benchExtract(b, "a.tar", raw, len(raw), decoder{})
}

func BenchmarkExtractWheel(b *testing.B) {
	ms := []member{{name: "nvidia/cu13/lib/libcublas.so.13", body: payload(1, 8<<20), mode: 0o755}}
	for i := range 200 {
		ms = append(ms, member{name: filepath.Join("nvidia/cu13/include", string(rune('a'+i%26))+".h"+string(rune('a'+i/26))), body: payload(uint64(i), 4096)})
	}
	benchExtract(b, "a.whl", zipBytes(b, ms), 8<<20+200*4096, decoder{})
}
