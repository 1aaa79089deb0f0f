package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// xzCLI compresses with the xz program, much faster than the pure-Go
// encoder for archives of megabytes.
func xzCLI(t *testing.T, xzPath string, data []byte) []byte {
	t.Helper()
	cmd := exec.Command(xzPath, "-1", "-T1", "--stdout")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", xzPath, err)
	}
	return out
}

// tmpfs mounts a file system of size bytes for the test, or skips it where
// mounting is not permitted.
func tmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10))
	lddtest.Need(t, err == nil, "cannot mount a tmpfs to fill (%v): the disk-full cases need root (CAP_SYS_ADMIN)", err)
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func resizeTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Fatalf("remount %s: %v", dir, err)
	}
}

// A cache without room for the archive: refused before the download, with
// the space it needs, and nothing left behind to keep the disk full.
func TestDownloadCacheFull(t *testing.T) {
	cache := tmpfs(t, 1<<20)
	data := payload(21, 3<<20)
	srv := newServer(t, data)
	c := testClient(t, func(o *Options) { o.CacheDir = cache })
	for try := range 2 {
		_, err := c.Download(context.Background(), request(srv.url("a.tar.gz"), data))
		var se *SpaceError
		if !errors.As(err, &se) || !errors.Is(err, syscall.ENOSPC) || se.Need != int64(len(data)) {
			t.Fatalf("try %d: err = %v; want a SpaceError needing %d bytes", try, err, len(data))
		}
		if !strings.Contains(err.Error(), "3.0 MiB") {
			t.Errorf("the error does not say what is needed: %v", err)
		}
		if n := diskUsage(cache); n != 0 {
			t.Errorf("try %d: the cache holds %d bytes", try, n)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests for an archive that cannot fit", n)
	}
}

// The cache fills up while the archive downloads (something else took the
// room): the .part is deleted rather than left to fill the disk, the error
// says what is needed, and once there is room the next try succeeds.
func TestDownloadCacheFillsUp(t *testing.T) {
	cache := tmpfs(t, 8<<20)
	data := payload(22, 3<<20)
	filler := filepath.Join(cache, "filler")
	srv := newServer(t, data, func(w http.ResponseWriter, r *http.Request, data []byte) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:1<<20])
		w.(http.Flusher).Flush()
		time.Sleep(100 * time.Millisecond)
		// Take what is left of the file system.
		f, err := os.Create(filler)
		if err == nil {
			chunk := make([]byte, 64<<10)
			for {
				if _, err := f.Write(chunk); err != nil {
					break
				}
			}
			f.Close()
		}
		w.Write(data[1<<20:])
	})
	c := testClient(t, func(o *Options) { o.CacheDir = cache })
	_, err := c.Download(context.Background(), request(srv.url("a.tar.gz"), data))
	var se *SpaceError
	if !errors.As(err, &se) || se.Need != int64(len(data)) {
		t.Fatalf("err = %v; want a SpaceError needing %d bytes", err, len(data))
	}
	t.Log(err)
	// The free space reported is what there is once our own partial file
	// is gone (at least the megabyte it held), not what it left.
	if se.Free < 1<<20 {
		t.Errorf("reported free space %d counts our own deleted partial download as used", se.Free)
	}
	part := c.cachePath(sha(data)) + ".part"
	mustNotExist(t, part)
	mustNotExist(t, part+".json")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	p, err := c.Download(context.Background(), request(srv.url("a.tar.gz"), data))
	checkDownloaded(t, c, p, err, data)
}

// A store without room for what the archive unpacks to: the install fails
// saying how much it needs, leaves nothing in the store, and keeps the
// verified download, so that the try after making room downloads nothing.
func TestInstallStoreFull(t *testing.T) {
	const libSize = 2 << 20
	tarball := tarBytes(t, redistMembers(libSize))
	cases := map[string][]byte{"a.tar.gz": gzBytes(t, tarball)}
	if d := decoders(t)["system"]; d.xz != "" {
		cases["a.tar.xz"] = xzCLI(t, d.xz, tarball) // streams, and declares its size
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			store := tmpfs(t, 1<<20)
			srv := newServer(t, data)
			s := openStore(t, store)
			c := testClient(t, nil)
			item := []Item{{Key: testKey(), Request: request(srv.url(name), data)}}
			for try := range 2 {
				_, err := s.Install(context.Background(), c, item)
				var se *SpaceError
				if !errors.As(err, &se) || se.Dir != store {
					t.Fatalf("try %d: err = %v; want a SpaceError for %s", try, err, store)
				}
				t.Logf("try %d: %v", try, err)
				if name == "a.tar.xz" && se.Need < libSize {
					t.Errorf("try %d: needs %d; the archive unpacks to more than %d", try, se.Need, libSize)
				}
				if got := readAll(t, c.cachePath(sha(data))); sha(got) != sha(data) {
					t.Fatalf("try %d: the cached archive is not the verified one", try)
				}
				if n := diskUsage(store); n != 0 {
					t.Errorf("try %d: the store holds %d bytes", try, n)
				}
				mustNotExist(t, s.entryDir(testKey()))
			}
			resizeTmpfs(t, store, 16<<20)
			es, err := s.Install(context.Background(), c, item)
			if err != nil {
				t.Fatal(err)
			}
			checkRedist(t, es[0].Dir, libSize)
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d requests; want the first only", n)
			}
			checkNoLeftovers(t, s, c)
		})
	}
}

// Extract checks the free space against what an .xz or .zst file declares
// before it writes anything.
func TestExtractDeclaredSizeNeedsSpace(t *testing.T) {
	tarball := tarBytes(t, redistMembers(1<<20))
	archives := map[string][]byte{}
	if d := decoders(t)["system"]; d.xz != "" {
		archives["a.tar.xz"] = xzCLI(t, d.xz, tarball)
	} else {
		archives["a.tar.xz"] = xzBytes(t, tarball)
	}
	if zstdCLI, err := exec.LookPath("zstd"); err == nil {
		src := writeFile(t, t.TempDir(), "a.tar", tarball)
		out, err := exec.Command(zstdCLI, "-q", "-c", src).Output()
		if err != nil {
			t.Fatal(err)
		}
		archives["a.tar.zst"] = out
	}
	for name, data := range archives {
		t.Run(name, func(t *testing.T) {
			dest := tmpfs(t, 512<<10)
			p := writeFile(t, t.TempDir(), name, data)
			err := Extract(context.Background(), p, filepath.Join(dest, "out"), Limits{})
			var se *SpaceError
			if !errors.As(err, &se) || se.Need != int64(len(tarball)) || se.What != "the archive unpacks to" {
				t.Fatalf("err = %v; want a SpaceError for the declared %d bytes", err, len(tarball))
			}
			if !strings.Contains(err.Error(), fmt.Sprint(se.Need)) {
				t.Errorf("the error does not say what is needed: %v", err)
			}
			if n := diskUsage(dest); n != 0 {
				t.Errorf("%d bytes written", n)
			}
		})
	}
}

// The size an .xz file declares is the sum over its blocks and streams,
// with stream padding between them; anything else declares nothing.
func TestXZDeclaredSize(t *testing.T) {
	d := decoders(t)["system"]
	lddtest.Need(t, d.xz != "", "xz is not on PATH")
	data := payload(31, 3<<20)
	one := xzCLI(t, d.xz, data)
	cmd := exec.Command(d.xz, "-1", "-T2", "--block-size=262144", "--stdout")
	cmd.Stdin = bytes.NewReader(data)
	blocks, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	padded := append(append(append([]byte{}, one...), make([]byte, 8)...), blocks...)
	for name, c := range map[string]struct {
		file []byte
		want int64
	}{
		"one block":           {one, int64(len(data))},
		"blocks":              {blocks, int64(len(data))},
		"two streams, padded": {padded, 2 * int64(len(data))},
	} {
		got, ok := xzDeclaredSize(bytes.NewReader(c.file), int64(len(c.file)))
		if !ok || got != c.want {
			t.Errorf("%s: %d, %v; want %d", name, got, ok, c.want)
		}
	}
	for name, bad := range map[string][]byte{
		"truncated":  one[:len(one)-1],
		"not xz":     data[:4096],
		"bad footer": append(append([]byte{}, one[:len(one)-2]...), 'Y', 'Y'),
	} {
		if got, ok := xzDeclaredSize(bytes.NewReader(bad), int64(len(bad))); ok {
			t.Errorf("%s: declared %d", name, got)
		}
	}
}
