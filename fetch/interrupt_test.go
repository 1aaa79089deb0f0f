package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// fakeXZ writes a shell script that stands in for xz: script is its body,
// after a line that records its process group in dir/pgid.
func fakeXZ(t *testing.T, script string) (path, pgidFile string) {
	t.Helper()
	dir := t.TempDir()
	path = filepath.Join(dir, "xz")
	pgidFile = filepath.Join(dir, "pgid")
	body := "#!/bin/sh\ncut -d' ' -f5 /proc/$$/stat > '" + pgidFile + "'\n" + script
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, pgidFile
}

// A decompressor that dies of a signal (Ctrl-C reaches every process of the
// terminal's foreground group) has not refused the bytes: the partial
// download survives, so that a rerun resumes it, whatever came first, the
// child's death or our own cancellation.
func TestInstallKeepsPartialWhenDecoderIsSignalled(t *testing.T) {
	data := xzBytes(t, tarBytes(t, redistMembers(300_000)))
	srv := newServer(t, data, stallAfter(len(data)/2))
	xzPath, _ := fakeXZ(t, "head -c 1000 >/dev/null\nkill -INT $$\nsleep 5\n")
	c := testClient(t, func(o *Options) { o.XZ = xzPath })
	s := openStore(t, t.TempDir())
	_, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request(srv.url("a.tar.xz"), data)}})
	if err == nil {
		t.Fatal("installed through a decompressor that died")
	}
	t.Log(err)
	part := c.cachePath(sha(data)) + ".part"
	fi, serr := os.Stat(part)
	if serr != nil || fi.Size() == 0 {
		t.Fatalf("the partial download is gone after the decompressor was interrupted: %v", serr)
	}
	if !strings.Contains(err.Error(), "signal") {
		t.Errorf("the error should say the decompressor was stopped by a signal: %v", err)
	}
}

// The decompressor runs in a process group of its own: Ctrl-C at a terminal
// reaches only cudadeps, which stops the child itself, so the child's death
// can never be taken for a verdict on the archive.
func TestDecoderHasItsOwnProcessGroup(t *testing.T) {
	data := xzBytes(t, tarBytes(t, redistMembers(10_000)))
	xzPath, pgidFile := fakeXZ(t, "exec xz \"$@\"\n")
	_, err := os.Stat("/proc/self/stat")
	lddtest.Need(t, err == nil, "no /proc: the process group cannot be read")
	decs := decoders(t)
	if decs["system"].xz == "" {
		return // decoders has reported the skip
	}
	c := testClient(t, func(o *Options) { o.XZ = xzPath })
	if err := c.Unpack(context.Background(), request(fileURL(t, data, "a.tar.xz"), data), filepath.Join(t.TempDir(), "out")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pgidFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if got == syscall.Getpgrp() {
		t.Errorf("the decompressor runs in cudadeps' process group %d; a terminal's Ctrl-C would reach it", got)
	}
}

// fileURL writes data to a file named name and returns its file:// URL.
func fileURL(t *testing.T, data []byte, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return "file://" + p
}

// An archive whose bytes are the ones asked for but whose entries are
// refused (a path that climbs out) is not kept in the download cache: the
// next run would only refuse it again. A file:// archive is the user's and
// stays where it is; a partial download of an interrupted run stays too.
func TestRefusedArchiveLeavesTheCache(t *testing.T) {
	hostile := tarBytes(t, []member{dir("top/"), file("top/../../escape", "x")})
	for name, data := range map[string][]byte{"a.tar.gz": gzBytes(t, hostile), "a.tar": hostile, "a.whl": zipBytes(t, []member{file("../escape", "x")})} {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, data)
			c := testClient(t, nil)
			s := openStore(t, t.TempDir())
			_, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request(srv.url(name), data)}})
			if err == nil || !strings.Contains(err.Error(), `".." in path`) {
				t.Fatalf("install of a hostile archive: %v", err)
			}
			if got := walk(t, c.cacheDir); len(got) != 0 {
				t.Errorf("the download cache keeps %q after the archive was refused", got)
			}
			local := writeFile(t, t.TempDir(), name, data)
			if _, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request("file://"+local, data)}}); err == nil {
				t.Fatal("installed a hostile archive from a file")
			}
			if _, err := os.Stat(local); err != nil {
				t.Errorf("the user's own archive was removed: %v", err)
			}
		})
	}
}

// A partial download that is complete (the run before was stopped after
// its last byte) is used without a request, and the progress says so:
// no speed for bytes that were never fetched. A partial one that is
// resumed reports the speed of what this run fetched.
func TestProgressOfAPartialDownload(t *testing.T) {
	data := payload(11, 400_000)
	for _, c := range []struct {
		have     int
		want     string
		requests int
	}{
		{len(data), "done, 390.6 KiB from a complete partial download", 0},
		{100_000, "resumed at 97.7 KiB", 1},
	} {
		srv := newServer(t, data)
		var out bytes.Buffer
		cl := testClient(t, func(o *Options) { o.Progress = &out })
		part := cl.cachePath(sha(data)) + ".part"
		if err := os.MkdirAll(filepath.Dir(part), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(part, data[:c.have], 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := cl.Download(context.Background(), request(srv.url("a.tar.xz"), data))
		checkDownloaded(t, cl, p, err, data)
		if !strings.Contains(out.String(), c.want) || len(srv.requests()) != c.requests {
			t.Errorf("%d bytes on disk: %d requests, progress:\n%s\nwant %q", c.have, len(srv.requests()), out.String(), c.want)
		}
		if c.have == len(data) && strings.Contains(out.String(), "/s)") {
			t.Errorf("a speed for bytes never fetched:\n%s", out.String())
		}
	}
}

// cancelAfter cancels once n bytes were read through it.
type cancelAfter struct {
	r      io.Reader
	n      int64
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	m, err := c.r.Read(p)
	if c.n -= int64(m); c.n <= 0 {
		c.cancel()
	}
	return m, err
}

// An archive of 54,594 entries stops at the entry where it is cancelled
// (SIGTERM cancels the context): cancellation is checked before each entry,
// for tar and zip, not once per archive, so a bomb of small entries cannot
// keep a stopped process busy.
func TestExtractionStopsAtTheEntryItIsCancelledAt(t *testing.T) {
	const entries, stopAt = 54_594, 1000
	var ms []member
	for i := 0; i < entries; i++ {
		ms = append(ms, file(fmt.Sprintf("top/d%03d/f%05d", i%100, i), ""))
	}
	for _, kind := range []string{"tar", "zip"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dir := filepath.Join(t.TempDir(), "out")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			var err error
			if kind == "tar" {
				data := tarBytes(t, ms)
				per := int64(len(data) / entries)
				r := &cancelAfter{r: bytes.NewReader(data), n: per * stopAt, cancel: cancel}
				_, err = extractStream(ctx, io.NopCloser(r), dir, Limits{}.withDefaults(), decoder{}, "bomb.tar", archiveSize{declared: -1})
			} else {
				p := writeFile(t, t.TempDir(), "bomb.zip", zipBytes(t, ms))
				// Entries go round the 100 directories: cancel once the
				// first holds its share of stopAt.
				go func() {
					for ctx.Err() == nil {
						if ents, _ := os.ReadDir(filepath.Join(dir, "top", "d000")); len(ents) >= stopAt/100 {
							cancel()
						}
						time.Sleep(time.Millisecond)
					}
				}()
				_, err = extractFile(ctx, p, dir, Limits{}.withDefaults(), decoder{}, "bomb.zip")
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("extraction after cancel: %v", err)
			}
			n, _ := filepath.Glob(filepath.Join(dir, "top", "d*", "f*"))
			if len(n) >= entries/2 {
				t.Errorf("%d of %d entries written after a cancel at about %d", len(n), entries, stopAt)
			}
		})
	}
}

// An install cancelled mid-download (Ctrl-C, SIGTERM) returns without
// deleting its staging directory, which may hold tens of thousands of
// extracted files: the next install of the key clears it, holding the
// key's lock.
func TestCancelledInstallLeavesStagingToTheNextRun(t *testing.T) {
	data := xzBytes(t, tarBytes(t, redistMembers(300_000)))
	srv := newServer(t, data, stallAfter(len(data)/2))
	c := testClient(t, nil)
	s := openStore(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if entries, _ := os.ReadDir(filepath.Join(s.Dir(), ".staging")); len(entries) > 0 {
				time.Sleep(200 * time.Millisecond) // the download has begun
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := s.Install(ctx, c, []Item{{Key: testKey(), Request: request(srv.url("a.tar.xz"), data)}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("install: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Dir(), ".staging")); len(entries) != 1 {
		t.Fatalf("the cancelled install's staging directory: %d entries", len(entries))
	}
	if _, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request(srv.url("a.tar.xz"), data)}}); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Dir(), ".staging")); len(entries) != 0 {
		t.Errorf("the next install left %d staging entries", len(entries))
	}
}
