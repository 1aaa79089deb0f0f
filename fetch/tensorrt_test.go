package fetch

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// trtTop is the top directory of a TensorRT archive, as NVIDIA names it.
const trtTop = "TensorRT-10.16.1.11"

// trtMembers is a TensorRT-like archive: its own top directory, a soname
// chain in lib/, more directories beside it.
func trtMembers() []member {
	return []member{
		dir(trtTop + "/"),
		dir(trtTop + "/lib/"),
		{name: trtTop + "/lib/libnvinfer.so.10.16.1", body: payload(3, 300_000), mode: 0o755},
		symlink(trtTop+"/lib/libnvinfer.so.10", "libnvinfer.so.10.16.1"),
		symlink(trtTop+"/lib/libnvinfer.so", "libnvinfer.so.10"),
		{name: trtTop + "/lib/libnvonnxparser.so.10.16.1", body: payload(4, 50_000), mode: 0o755},
		symlink(trtTop+"/lib/libnvonnxparser.so.10", "libnvonnxparser.so.10.16.1"),
		dir(trtTop + "/include/"),
		file(trtTop+"/include/NvInfer.h", "#define NV_TENSORRT_MAJOR 10\n"),
		dir(trtTop + "/bin/"),
		file(trtTop+"/bin/trtexec", "\x7fELF"),
		file(trtTop+"/doc/Acknowledgements.txt", "text\n"),
	}
}

// TensorRT's .tar.gz and .tar.zst install with their top directory stripped:
// the libraries are at Dir/lib, and the entry lists them there.
func TestInstallTensorRTLayout(t *testing.T) {
	tarball := tarBytes(t, trtMembers())
	cases := map[string][]byte{
		"TensorRT-10.16.1.11.Linux.x86_64-gnu.cuda-13.0.tar.gz": gzBytes(t, tarball),
		"TensorRT-11.3.0.10.Linux.x86_64-gnu.cuda-13.0.tar.zst": zstdBytes(t, tarball),
	}
	for name, data := range cases {
		t.Run(filepath.Ext(name), func(t *testing.T) {
			srv := newServer(t, data)
			s := openStore(t, t.TempDir())
			c := testClient(t, nil)
			key := Key{Component: "tensorrt", Version: "10.16.1.11", Platform: "linux-x86_64", Variant: "cuda13"}
			es, err := s.Install(context.Background(), c, []Item{{Key: key, Request: request(srv.url(name), data)}})
			if err != nil {
				t.Fatal(err)
			}
			e, ok, err := s.Lookup(key)
			if err != nil || !ok {
				t.Fatalf("lookup: %v, %v", ok, err)
			}
			if e.Layout != LayoutRedist || e.Dir != es[0].Dir {
				t.Errorf("layout %q, dir %s", e.Layout, e.Dir)
			}
			got, err := os.ReadFile(filepath.Join(e.Dir, "lib", "libnvinfer.so.10"))
			if err != nil || !bytes.Equal(got, payload(3, 300_000)) {
				t.Fatalf("lib/libnvinfer.so.10: %d bytes, %v", len(got), err)
			}
			want := []string{"bin/trtexec", "doc/Acknowledgements.txt", "include/NvInfer.h",
				"lib/libnvinfer.so", "lib/libnvinfer.so.10", "lib/libnvinfer.so.10.16.1",
				"lib/libnvonnxparser.so.10", "lib/libnvonnxparser.so.10.16.1"}
			if !equalStrings(e.Files, want) {
				t.Errorf("files %q, want %q", e.Files, want)
			}
			mustNotExist(t, filepath.Join(e.Dir, trtTop))
		})
	}
}

// A .tar.zst gets the same hostile-archive rules as a .tar.xz.
func TestExtractZstdHostile(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside")
	cases := []struct {
		name string
		ms   []member
		want string
	}{
		{"escaping symlink", []member{file(trtTop+"/a", "a"), symlink(trtTop+"/lib/evil", "../../../../../../.."+outside)}, "leaves the component directory"},
		{"dot-dot", []member{file(trtTop+"/../../evil", "x")}, `".." in path`},
		{"absolute", []member{file("/etc/evil", "x")}, "absolute path"},
		{"escape in name", []member{file(trtTop+"/lib/\x1b]0;owned\x07", "x")}, "control character"},
		{"through a link", []member{symlink(trtTop+"/lib", "/tmp"), file(trtTop+"/lib/evil", "x")}, "leaves the component directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "a.tar.zst", zstdBytes(t, tarBytes(t, c.ms)))
			dest := filepath.Join(t.TempDir(), "out")
			err := Extract(context.Background(), p, dest, Limits{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want %q", err, c.want)
			}
			mustNotExist(t, dest)
			mustNotExist(t, outside)
		})
	}
}

// A zstd frame that asks for a window beyond what the zstd program allows
// without --long is refused rather than given the memory.
func TestExtractZstdWindowLimit(t *testing.T) {
	tarball := tarBytes(t, []member{file("top/a", "a")})
	// A frame by hand: no content size, window descriptor 1 GiB (exponent
	// 20), then the tar as one raw last block.
	frame := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 20 << 3}
	bh := uint32(len(tarball))<<3 | 1
	frame = append(frame, byte(bh), byte(bh>>8), byte(bh>>16))
	frame = append(frame, tarball...)
	// The same frame with a 1 MiB window (exponent 10) is fine.
	small := append([]byte{}, frame...)
	small[5] = 10 << 3
	if err := Extract(context.Background(), writeFile(t, t.TempDir(), "ok.tar.zst", small), filepath.Join(t.TempDir(), "out"), Limits{}); err != nil {
		t.Fatalf("a 1 MiB window: %v", err)
	}
	p := writeFile(t, t.TempDir(), "a.tar.zst", frame)
	err := Extract(context.Background(), p, filepath.Join(t.TempDir(), "out"), Limits{})
	if err == nil || !strings.Contains(err.Error(), "window") {
		t.Fatalf("err = %v; want a refusal of the window size", err)
	}
	t.Log(err)
}

// A .tar.zst whose frames go on after the tar archive's end are refused
// once more than a tar's padding follows.
func TestExtractZstdTrailer(t *testing.T) {
	tarball := tarBytes(t, []member{file("top/a", "a")})
	data := zstdBytes(t, append(tarball, make([]byte, 8<<20)...))
	p := writeFile(t, t.TempDir(), "a.tar.zst", data)
	err := Extract(context.Background(), p, filepath.Join(t.TempDir(), "out"), Limits{})
	if err == nil || !strings.Contains(err.Error(), "after the end of the tar archive") {
		t.Fatalf("err = %v", err)
	}
}

// The content sizes of a .zst file's frames are what it declares; a frame
// without one declares nothing.
func TestZstdDeclaredSize(t *testing.T) {
	zstdCLI, err := exec.LookPath("zstd")
	lddtest.Need(t, err == nil, "zstd is not on PATH")
	data := payload(41, 3<<20)
	p := writeFile(t, t.TempDir(), "a", data)
	out, err := exec.Command(zstdCLI, "-q", "-3", "-c", p).Output() // from a file: with its size
	if err != nil {
		t.Fatal(err)
	}
	two := append(append([]byte{}, out...), out...)
	for name, c := range map[string]struct {
		file []byte
		want int64
		ok   bool
	}{
		"one frame":        {out, int64(len(data)), true},
		"two frames":       {two, 2 * int64(len(data)), true},
		"no content size":  {zstdBytes(t, data), 0, false},
		"truncated":        {out[:len(out)-3], 0, false},
		"trailing garbage": {append(append([]byte{}, out...), 1, 2, 3), 0, false},
	} {
		got, ok := zstdDeclaredSize(bytes.NewReader(c.file), int64(len(c.file)))
		if ok != c.ok || got != c.want {
			t.Errorf("%s: %d, %v; want %d, %v", name, got, ok, c.want, c.ok)
		}
	}
}
