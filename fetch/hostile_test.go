package fetch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/cudadeps/cudadeps/internal/humansize"
)

// Bounds the hostile archives below must stay within.
const (
	maxBombWrite = 64 << 20  // bytes an archive refused as a bomb may have written
	maxHostHeap  = 256 << 20 // heap while a hostile archive is read
)

// guard watches an extraction: the bytes under dir and the heap. Passing a
// bound cancels the extraction, so that code without the bounds fails the
// test quickly instead of filling the disk or the memory.
type guard struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	peakHeap uint64
	peakDisk int64
	tripped  string
}

func watch(dir string, maxDisk int64, maxHeap uint64, cancel func()) *guard {
	g := &guard{stop: make(chan struct{})}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			disk := int64(0)
			if dir != "" {
				disk = diskUsage(dir)
			}
			g.mu.Lock()
			g.peakHeap = max(g.peakHeap, ms.HeapAlloc)
			g.peakDisk = max(g.peakDisk, disk)
			if g.tripped == "" && (ms.HeapAlloc > maxHeap || disk > maxDisk) {
				g.tripped = fmt.Sprintf("heap %s, written %s", humansize.Bytes(int64(ms.HeapAlloc)), humansize.Bytes(disk))
				cancel()
			}
			g.mu.Unlock()
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return g
}

// done stops the watch and fails the test if a bound was passed.
func (g *guard) done(t *testing.T, maxDisk int64, maxHeap uint64) {
	t.Helper()
	close(g.stop)
	g.wg.Wait()
	t.Logf("peak heap %s, peak written %s", humansize.Bytes(int64(g.peakHeap)), humansize.Bytes(g.peakDisk))
	if g.tripped != "" {
		t.Fatalf("a bound was passed (%s); the extraction was stopped by the test", g.tripped)
	}
	if g.peakDisk > maxDisk || g.peakHeap > maxHeap {
		t.Fatalf("peak heap %d, written %d; bounds %d and %d", g.peakHeap, g.peakDisk, maxHeap, maxDisk)
	}
}

// diskUsage is the size of the regular files under dir.
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// zipBomb is a wheel of about 1 MiB whose members expand to 1 GiB of zeros:
// four members of 256 MiB sharing one deflate stream.
func zipBomb(t *testing.T) []byte {
	t.Helper()
	const member = 256 << 20
	var comp bytes.Buffer
	fw, _ := flate.NewWriter(&comp, flate.BestCompression)
	zeros := make([]byte, 1<<20)
	crc := uint32(0)
	for range member / len(zeros) {
		fw.Write(zeros)
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	fw.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range 4 {
		h := &zip.FileHeader{Name: fmt.Sprintf("nvidia/cu13/lib/libbomb%d.so", i), Method: zip.Deflate,
			CRC32: crc, CompressedSize64: uint64(comp.Len()), UncompressedSize64: member}
		h.SetMode(0o644)
		w, err := zw.CreateRaw(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(comp.Bytes())
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A 1 MiB wheel that expands to 1 GiB is refused before a byte is written,
// whether it is extracted or installed.
func TestHostileWheelBomb(t *testing.T) {
	data := zipBomb(t)
	t.Logf("wheel of %s declaring 1 GiB", humansize.Bytes(int64(len(data))))
	p := writeFile(t, t.TempDir(), "bomb-1.0-py3-none-manylinux_2_28_x86_64.whl", data)
	t.Run("extract", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "out")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		g := watch(filepath.Dir(dest), maxBombWrite, maxHostHeap, cancel)
		err := Extract(ctx, p, dest, Limits{})
		g.done(t, 0, maxHostHeap)
		if err == nil || !strings.Contains(err.Error(), "expansion ratio") {
			t.Fatalf("err = %v; want a refusal naming the expansion ratio", err)
		}
		t.Log(err)
		mustNotExist(t, dest)
	})
	t.Run("install", func(t *testing.T) {
		s := openStore(t, t.TempDir())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		g := watch(s.Dir(), maxBombWrite, maxHostHeap, cancel)
		_, err := s.Install(ctx, testClient(t, nil), []Item{{Key: testKey(), Request: request("file://"+p, data)}})
		g.done(t, 4096, maxHostHeap)
		if err == nil || !strings.Contains(err.Error(), "expansion ratio") {
			t.Fatalf("err = %v; want a refusal naming the expansion ratio", err)
		}
		mustNotExist(t, s.entryDir(testKey()))
	})
}

// xzBomb is a .tar.xz of about 3 MiB holding 16 members of 1 GiB of zeros:
// concatenated .xz streams, one per tar header and many of one block of
// zeros, decode to their concatenation.
func xzBomb(t *testing.T) []byte {
	t.Helper()
	const chunk = 16 << 20
	enc := func(b []byte) []byte {
		var buf bytes.Buffer
		w, err := xz.WriterConfig{DictCap: 1 << 20}.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	zeros := enc(make([]byte, chunk))
	var out bytes.Buffer
	for i := range 16 {
		var hdr bytes.Buffer
		tw := tar.NewWriter(&hdr)
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("bomb-archive/lib/libzero%02d.so", i), Mode: 0o644, Size: 1 << 30, Typeflag: tar.TypeReg})
		tw.Flush()
		out.Write(enc(hdr.Bytes()))
		for range (1 << 30) / chunk {
			out.Write(zeros)
		}
	}
	out.Write(enc(make([]byte, 1024))) // the end of the tar archive
	return out.Bytes()
}

// A 3 MiB .tar.xz that would write 16 GiB is refused before it writes: from
// a file its index declares the size; as a stream the first member's header
// does.
func TestHostileXZBomb(t *testing.T) {
	data := xzBomb(t)
	t.Logf(".tar.xz of %s expanding to 16 GiB", humansize.Bytes(int64(len(data))))
	if d, ok := xzDeclaredSize(bytes.NewReader(data), int64(len(data))); !ok || d != 16<<30+16*512+1024 {
		t.Errorf("declared size %d, %v", d, ok)
	}
	p := writeFile(t, t.TempDir(), "bomb.tar.xz", data)
	for name, dec := range decoders(t) {
		t.Run("file/"+name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "out")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g := watch(filepath.Dir(dest), maxBombWrite, maxHostHeap, cancel)
			err := extractTo(ctx, p, dest, Limits{}.withDefaults(), dec)
			g.done(t, 0, maxHostHeap)
			if err == nil || !strings.Contains(err.Error(), "expands to 16.0 GiB") {
				t.Fatalf("err = %v; want a refusal naming the declared 16 GiB", err)
			}
			t.Log(err)
		})
		t.Run("stream/"+name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g := watch(dir, maxBombWrite, maxHostHeap, cancel)
			_, err := extractStream(ctx, io.NopCloser(bytes.NewReader(data)), dir, Limits{}.withDefaults(), dec, "bomb.tar.xz", archiveSize{compressed: int64(len(data)), declared: -1})
			g.done(t, 0, maxHostHeap)
			if err == nil || !strings.Contains(err.Error(), "expansion ratio") {
				t.Fatalf("err = %v; want a refusal naming the expansion ratio", err)
			}
			t.Log(err)
		})
	}
}

// longNames streams a tar of n members whose names are 3.9 KB long (15
// directories of 250 bytes shared by all, then a name of its own) into w,
// and reports how many members it wrote before the reader stopped.
func longNames(w *io.PipeWriter, n int, wrote *int) {
	var dirs []string
	for i := range 15 {
		dirs = append(dirs, strings.Repeat(string(rune('a'+i)), 250))
	}
	prefix := "top/" + strings.Join(dirs, "/") + "/"
	tw := tar.NewWriter(w)
	for i := range n {
		name := fmt.Sprintf("%s%0150d", prefix, i)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			w.CloseWithError(err)
			return
		}
		*wrote = i + 1
	}
	w.CloseWithError(tw.Close())
}

// 100,000 members with 3.9 KB names (390 MB of names) are refused once
// their names pass the limit, with the heap bounded.
func TestHostileManyLongNames(t *testing.T) {
	const members = 100_000
	dir := t.TempDir()
	pr, pw := io.Pipe()
	var wrote int
	gen := make(chan struct{})
	go func() { defer close(gen); longNames(pw, members, &wrote) }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runtime.GC()
	g := watch("", 0, maxHostHeap, cancel)
	_, err := extractStream(ctx, pr, dir, Limits{}.withDefaults(), decoder{}, "names.tar", archiveSize{declared: -1})
	pr.CloseWithError(errors.New("stop"))
	<-gen
	g.done(t, 0, maxHostHeap)
	if err == nil || !strings.Contains(err.Error(), "names take more than the limit") {
		t.Fatalf("err = %v; want a refusal naming the limit on names", err)
	}
	if len(err.Error()) > 600 {
		t.Errorf("the error has %d bytes", len(err.Error()))
	}
	t.Logf("refused after %d of %d members: %v", wrote, members, err)
	if wrote > 2*DefaultMaxNameBytes/3900 {
		t.Errorf("%d members were read before the refusal", wrote)
	}
}

// Member names and link targets with control characters are refused, and
// an error about a long name quotes only its start.
func TestHostileNames(t *testing.T) {
	long := "top/" + strings.Repeat("x", 250) + "/" + strings.Repeat("y/", 4900) + "z"
	cases := []struct {
		name string
		ms   []member
		want string
	}{
		{"newline", []member{file("top/lib/a\nb", "x")}, "control character 0x0a"},
		{"escape", []member{file("top/lib/\x1b[31mred", "x")}, "control character 0x1b"},
		{"delete", []member{file("top/lib/a\x7f", "x")}, "control character 0x7f"},
		{"tab", []member{file("top/lib/a\tb", "x")}, "control character 0x09"},
		{"link target", []member{symlink("top/lib/a", "b\x1b[2J")}, "control character in link target"},
		{"long path", []member{file(long, "x")}, "longer than 4096 bytes"},
		{"long escape", []member{symlink("top/lib/a", strings.Repeat("../", 3000))}, "link target longer than"},
	}
	for _, c := range cases {
		for _, zipped := range []bool{false, true} {
			if zipped && c.ms[0].typ == tar.TypeSymlink {
				continue // zip symlinks are refused as such
			}
			kind := map[bool]string{false: "tar", true: "zip"}[zipped]
			t.Run(c.name+"/"+kind, func(t *testing.T) {
				var data []byte
				name := "a.tar"
				if zipped {
					data, name = zipBytes(t, c.ms), "a.whl"
				} else {
					data = tarBytes(t, c.ms)
				}
				p := writeFile(t, t.TempDir(), name, data)
				dest := filepath.Join(t.TempDir(), "out")
				err := Extract(context.Background(), p, dest, Limits{})
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v; want %q", err, c.want)
				}
				if msg := err.Error(); len(msg) > 600 || strings.ContainsAny(msg, "\n\x1b\x7f") {
					t.Errorf("error of %d bytes, or with control characters: %q", len(msg), msg)
				}
				mustNotExist(t, dest)
			})
		}
	}
}

// The store record stays small however many files an entry has, List
// reads no file list, and Lookup checks the list against the record.
func TestStoreRecordSmall(t *testing.T) {
	const n = 2000
	var ms []member
	for i := range n {
		ms = append(ms, file(fmt.Sprintf("top/include/some/longer/directory/name/header_%05d.h", i), ""))
	}
	data := tarBytes(t, ms)
	p := writeFile(t, t.TempDir(), "a.tar", data)
	s := openStore(t, t.TempDir())
	es, err := s.Install(context.Background(), testClient(t, nil), []Item{{Key: testKey(), Request: request("file://"+p, data)}})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(es[0].Dir, recordName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 2048 {
		t.Errorf("the record has %d bytes for %d files", fi.Size(), n)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	list, err := s.List()
	runtime.ReadMemStats(&after)
	if err != nil || len(list) != 1 || list[0].FileCount != n || list[0].Files != nil {
		t.Fatalf("List = %d entries, %v", len(list), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Errorf("List allocated %d bytes for one entry of %d files", alloc, n)
	}
	e, ok, err := s.Lookup(testKey())
	if err != nil || !ok || len(e.Files) != n || e.Files[0] != "include/some/longer/directory/name/header_00000.h" {
		t.Fatalf("Lookup = %d files, %v, %v", len(e.Files), ok, err)
	}
	files, err := list[0].ReadFiles()
	if err != nil || !equalStrings(files, e.Files) {
		t.Fatalf("ReadFiles = %d files, %v", len(files), err)
	}
	// A list that is not the one recorded is an error, not a wrong answer.
	lp := filepath.Join(es[0].Dir, filesName)
	b := readAll(t, lp)
	if err := os.WriteFile(lp, append(b, "lib/evil.so\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Lookup(testKey()); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("Lookup of a changed list: %v", err)
	}
	if list, err := s.List(); err != nil || len(list) != 1 {
		t.Errorf("List after the change: %d, %v", len(list), err)
	}
}
