package fetch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every format and decoder yields the NVIDIA layout: top directory
// stripped, symlink chain and hard link kept, modes kept.
func TestExtractRedistLayout(t *testing.T) {
	const libSize = 300_000
	raw := tarBytes(t, redistMembers(libSize))
	formats := map[string][]byte{
		"a.tar.xz": xzBytes(t, raw),
		"a.tar.gz": gzBytes(t, raw),
		"a.tar":    raw,
	}
	for dname, dec := range decoders(t) {
		for name, data := range formats {
			t.Run(dname+"/"+name, func(t *testing.T) {
				src := writeFile(t, t.TempDir(), name, data)
				dest := filepath.Join(t.TempDir(), "out")
				if err := extractTo(context.Background(), src, dest, Limits{}.withDefaults(), dec); err != nil {
					t.Fatal(err)
				}
				checkRedist(t, dest, libSize)
				a, b := readAll(t, filepath.Join(dest, "lib/libcudss.so.0.8.0.10")), readAll(t, filepath.Join(dest, "lib/libcudss_static_copy.so"))
				if !bytes.Equal(a, b) {
					t.Error("hard link has other contents than its target")
				}
			})
		}
	}
}

// The package-level Extract works on a file without any client.
func TestExtractPublic(t *testing.T) {
	src := writeFile(t, t.TempDir(), "a.tar.xz", xzBytes(t, tarBytes(t, redistMembers(1000))))
	dest := filepath.Join(t.TempDir(), "out")
	if err := Extract(context.Background(), src, dest, Limits{}); err != nil {
		t.Fatal(err)
	}
	checkRedist(t, dest, 1000)
}

// A wheel keeps its site-packages layout: nothing is stripped.
func TestExtractWheelLayout(t *testing.T) {
	whl := zipBytes(t, []member{
		file("nvidia/__init__.py", ""),
		dir("nvidia/cu13/"),
		{name: "nvidia/cu13/lib/libcublas.so.13", body: payload(2, 5000), mode: 0o755},
		file("nvidia_cublas-13.0.0.dist-info/RECORD", "nvidia/cu13/lib/libcublas.so.13,,\n"),
	})
	src := writeFile(t, t.TempDir(), "nvidia_cublas-13.0.0-py3-none-manylinux_2_27_aarch64.whl", whl)
	parent := t.TempDir()
	res, err := extractFile(context.Background(), src, parent, Limits{}.withDefaults(), decoder{}, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nvidia/__init__.py", "nvidia/cu13/lib/libcublas.so.13", "nvidia_cublas-13.0.0.dist-info/RECORD"}
	if res.root != "" || res.layout != LayoutWheel || !equalStrings(res.files, want) {
		t.Errorf("got root %q layout %q files %q; want \"\", %q, %q", res.root, res.layout, res.files, LayoutWheel, want)
	}
	if !bytes.Equal(readAll(t, filepath.Join(parent, "nvidia/cu13/lib/libcublas.so.13")), payload(2, 5000)) {
		t.Error("wrong contents")
	}
	if fi, err := os.Stat(filepath.Join(parent, "nvidia/cu13/lib/libcublas.so.13")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode: %v %v", fi, err)
	}
}

// A tar without one top directory is kept as it is.
func TestExtractTreeLayout(t *testing.T) {
	src := writeFile(t, t.TempDir(), "a.tar", tarBytes(t, []member{
		file("lib/libx.so.1", "x"), symlink("lib/libx.so", "libx.so.1"), file("README", "r"),
	}))
	dest := filepath.Join(t.TempDir(), "out")
	if err := extractTo(context.Background(), src, dest, Limits{}.withDefaults(), decoder{}); err != nil {
		t.Fatal(err)
	}
	if got := walk(t, dest); !equalStrings(got, []string{"README", "lib/libx.so", "lib/libx.so.1"}) {
		t.Errorf("files = %q", got)
	}
}

// setuid, setgid and sticky bits never reach the disk.
func TestExtractDropsSpecialBits(t *testing.T) {
	src := writeFile(t, t.TempDir(), "a.tar", tarBytes(t, []member{
		{name: "top/bin/tool", body: []byte("x"), mode: 0o4755 | 0o2000 | 0o1000},
	}))
	dest := filepath.Join(t.TempDir(), "out")
	if err := extractTo(context.Background(), src, dest, Limits{}.withDefaults(), decoder{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dest, "bin/tool"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 || fi.Mode().Perm() != 0o755 {
		t.Errorf("mode %v; want -rwxr-xr-x", fi.Mode())
	}
}

func TestExtractDestination(t *testing.T) {
	src := writeFile(t, t.TempDir(), "a.tar", tarBytes(t, redistMembers(10)))
	lim := Limits{}.withDefaults()
	empty := t.TempDir()
	if err := extractTo(context.Background(), src, empty, lim, decoder{}); err != nil {
		t.Errorf("an existing empty destination: %v", err)
	}
	full := t.TempDir()
	writeFile(t, full, "keep", []byte("k"))
	err := extractTo(context.Background(), src, full, lim, decoder{})
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a non-empty destination: err = %v", err)
	}
	if got := walk(t, full); !equalStrings(got, []string{"keep"}) {
		t.Errorf("the non-empty destination changed: %q", got)
	}
}

func TestExtractBadInput(t *testing.T) {
	good := xzBytes(t, tarBytes(t, redistMembers(100_000)))
	cases := map[string]struct {
		data []byte
		want string
	}{
		"truncated xz":   {good[:len(good)/2], ""},
		"corrupt xz":     {append(append([]byte{}, good[:200]...), bytes.Repeat([]byte{0x55}, 1000)...), ""},
		"unknown format": {[]byte("hello, this is not an archive"), "not a .tar.xz"},
		"empty file":     {nil, "not a .tar.xz"},
		"truncated zip":  {zipBytes(t, []member{file("a", "b")})[:30], "zip"},
	}
	for dname, dec := range decoders(t) {
		for name, c := range cases {
			t.Run(dname+"/"+name, func(t *testing.T) {
				root := t.TempDir()
				src := writeFile(t, t.TempDir(), "a.bin", c.data)
				dest := filepath.Join(root, "out")
				err := extractTo(context.Background(), src, dest, Limits{}.withDefaults(), dec)
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), src) {
					t.Fatalf("err = %v; want an error naming %s and saying %q", err, src, c.want)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				if got := walk(t, root); len(got) != 0 {
					t.Errorf("left behind: %q", got)
				}
				mustNotExist(t, dest)
			})
		}
	}
}

// hostile is one archive that breaks one rule.
type hostile struct {
	name string
	ms   []member
	zip  bool
	lim  Limits
	want string
}

// hostileArchives builds one archive per rule. outside is an absolute path
// that must never be created; the "../" chains are long enough to reach
// above the test's root directory.
func hostileArchives(outside string) []hostile {
	up := strings.Repeat("../", 8)
	return []hostile{
		{name: "absolute path", ms: []member{file(outside+"/pwned", "x")}, want: "absolute path"},
		{name: "dotdot path", ms: []member{file("top/"+up+"pwned", "x")}, want: `".." in path`},
		{name: "leading dotdot", ms: []member{file(up+"pwned", "x")}, want: `".." in path`},
		{name: "dotdot directory", ms: []member{dir(up + "d/")}, want: `".." in path`},
		{name: "symlink to absolute path", ms: []member{symlink("top/lib/evil", outside)}, want: "leaves the component directory"},
		{name: "symlink climbing out", ms: []member{symlink("top/lib/evil", up+"pwned")}, want: "leaves the component directory"},
		{name: "symlink to a sibling of the component", ms: []member{file("top/a", "a"), symlink("top/lib/evil", "../../other")}, want: "leaves the component directory"},
		{name: "symlink with dotdot after a name", ms: []member{symlink("top/lib/evil", "x/../../..")}, want: `".." after a name`},
		{name: "write through a symlink", ms: []member{symlink("top/lib/sub", "."), file("top/lib/sub/f", "x")}, want: "through the symbolic link"},
		{name: "symlink then file", ms: []member{symlink("top/lib/f", "g"), file("top/lib/f", "x")}, want: "duplicate path"},
		{name: "hard link climbing out", ms: []member{hardlink("top/lib/h", up+"etc/passwd")}, want: `".." in path`},
		{name: "hard link to absolute path", ms: []member{hardlink("top/lib/h", outside)}, want: "absolute path"},
		{name: "hard link into another directory", ms: []member{file("other/x", "x"), hardlink("top/lib/h", "other/x")}, want: "leaves the component directory"},
		{name: "hard link to a symlink", ms: []member{symlink("top/lib/s", "x"), hardlink("top/lib/h", "top/lib/s")}, want: "not a regular file"},
		{name: "character device", ms: []member{{name: "top/dev/null", typ: tar.TypeChar}}, want: "character devices are refused"},
		{name: "block device", ms: []member{{name: "top/dev/sda", typ: tar.TypeBlock}}, want: "block devices are refused"},
		{name: "fifo", ms: []member{{name: "top/fifo", typ: tar.TypeFifo}}, want: "fifos are refused"},
		{name: "too many entries", ms: []member{file("top/1", ""), file("top/2", ""), file("top/3", ""), file("top/4", "")}, lim: Limits{MaxEntries: 3}, want: "limit of 3 entries"},
		{name: "too many bytes", ms: []member{file("top/a", strings.Repeat("a", 600)), file("top/b", strings.Repeat("b", 600))}, lim: Limits{MaxBytes: 1000}, want: "limit of 1000 bytes"},
		{name: "zip absolute path", zip: true, ms: []member{file(outside+"/pwned", "x")}, want: "absolute path"},
		{name: "zip dotdot path", zip: true, ms: []member{file(up+"pwned", "x")}, want: `".." in path`},
		{name: "zip backslash path", zip: true, ms: []member{file(`..\..\pwned`, "x")}, want: "backslash"},
		{name: "zip symlink", zip: true, ms: []member{symlink("nvidia/evil", outside)}, want: "symbolic links in zip archives are refused"},
		{name: "zip too many bytes", zip: true, ms: []member{file("a", strings.Repeat("a", 600)), file("b", strings.Repeat("b", 600))}, lim: Limits{MaxBytes: 1000}, want: "limit of 1000 bytes"},
		{name: "zip too many entries", zip: true, ms: []member{file("1", ""), file("2", ""), file("3", "")}, lim: Limits{MaxEntries: 2}, want: "limit of 2 entries"},
	}
}

// Each hostile archive is refused with an error naming the rule, and
// nothing exists outside the staging directory afterwards (nor inside: it
// is removed).
func TestExtractRefusesHostileArchives(t *testing.T) {
	for dname, dec := range decoders(t) {
		for _, h := range hostileArchives("/OUTSIDE") {
			if h.zip && dname != "go" {
				continue // no decoder involved
			}
			t.Run(dname+"/"+h.name, func(t *testing.T) {
				root := t.TempDir()
				outside := filepath.Join(t.TempDir(), "outside")
				// Rebuild with this test's own outside path.
				for _, hh := range hostileArchives(outside) {
					if hh.name == h.name {
						h = hh
					}
				}
				var data []byte
				name := "a.tar.xz"
				if h.zip {
					data, name = zipBytes(t, h.ms), "a.whl"
				} else {
					data = xzBytes(t, tarBytes(t, h.ms))
				}
				src := writeFile(t, t.TempDir(), name, data)
				parent := filepath.Join(root, "a", "b", "c")
				dest := filepath.Join(parent, "out")
				err := extractTo(context.Background(), src, dest, h.lim.withDefaults(), dec)
				if err == nil || !strings.Contains(err.Error(), h.want) {
					t.Fatalf("err = %v; want one saying %q", err, h.want)
				}
				if !strings.Contains(err.Error(), src) {
					t.Errorf("error %q does not name the archive", err)
				}
				checkNothingOutside(t, root, outside)
			})
		}
	}
}

// checkNothingOutside: only the empty directories root/a/b/c remain, and
// the outside path was never created.
func checkNothingOutside(t *testing.T, root, outside string) {
	t.Helper()
	var got []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != root {
			rel, _ := filepath.Rel(root, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return nil
	})
	if !equalStrings(got, []string{"a", "a/b", "a/b/c"}) {
		t.Errorf("left behind under the test root: %q", got)
	}
	mustNotExist(t, outside)
	mustNotExist(t, filepath.Join(filepath.Dir(root), "pwned"))
	mustNotExist(t, "/OUTSIDE")
}

// A zip entry that holds more than its declared size is refused.
func TestExtractZipLyingSize(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	body := []byte(strings.Repeat("z", 100))
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "a", Method: zip.Store, CompressedSize64: 100, UncompressedSize64: 10, CRC32: crc32.ChecksumIEEE(body)})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(body)
	zw.Close()
	root := t.TempDir()
	src := writeFile(t, t.TempDir(), "a.zip", buf.Bytes())
	err = extractTo(context.Background(), src, filepath.Join(root, "out"), Limits{}.withDefaults(), decoder{})
	if err == nil {
		t.Fatal("a zip entry larger than declared was accepted")
	}
	if got := walk(t, root); len(got) != 0 {
		t.Errorf("left behind: %q", got)
	}
}

// Links that stay inside the component are accepted.
func TestCheckSymlinkAccepts(t *testing.T) {
	tr := newTree(t.TempDir(), Limits{}.withDefaults(), true, 0)
	for _, c := range []struct{ at, target string }{
		{"top/lib/libfoo.so", "libfoo.so.1"},
		{"top/lib/libfoo.so", "./libfoo.so.1"},
		{"top/lib/stubs/libfoo.so", "../libfoo.so.1"},
		{"top/include/x.h", "../lib/x.h"},
		{"top/lib/self", ".."},
		{"top/lib/dangling", "not/yet/there"},
	} {
		if err := tr.checkSymlink(strings.Split(c.at, "/"), c.target); err != nil {
			t.Errorf("%s -> %s: %v", c.at, c.target, err)
		}
	}
}

// A client runs one pure-Go xz decoder at a time: while the slot is taken,
// another extraction waits (here until its context ends), then proceeds.
func TestPureGoDecoderSlots(t *testing.T) {
	c := testClient(t, func(o *Options) { o.XZ = XZGo })
	if cap(c.dec.goSlots) != 1 {
		t.Fatalf("goSlots capacity %d; want 1", cap(c.dec.goSlots))
	}
	src := writeFile(t, t.TempDir(), "a.tar.xz", xzBytes(t, tarBytes(t, redistMembers(1000))))
	c.dec.goSlots <- struct{}{} // another extraction holds the slot
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	dest := filepath.Join(t.TempDir(), "out")
	if err := c.Extract(ctx, src, dest); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want to wait for the slot until the deadline", err)
	}
	<-c.dec.goSlots
	if err := c.Extract(context.Background(), src, dest); err != nil {
		t.Fatal(err)
	}
	checkRedist(t, dest, 1000)
	if len(c.dec.goSlots) != 0 {
		t.Error("the slot was not released")
	}
}
