package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// xzChoices lists Options.XZ values to test: pure Go, and the system xz
// (which also means streaming extraction) when present.
func xzChoices(t *testing.T) map[string]string {
	out := map[string]string{}
	for name, d := range decoders(t) {
		if d.xz == "" {
			out[name] = XZGo
		} else {
			out[name] = d.xz
		}
	}
	return out
}

// checkNoLeftovers: no staging directory and no partial download remain.
func checkNoLeftovers(t *testing.T, s *Store, c *Client) {
	t.Helper()
	if got := walk(t, filepath.Join(s.Dir(), ".staging")); len(got) != 0 {
		t.Errorf("staging holds %q", got)
	}
	for _, f := range walk(t, c.cacheDir) {
		if strings.HasSuffix(f, ".part") || strings.HasSuffix(f, ".part.json") {
			t.Errorf("cache holds %s", f)
		}
	}
}

// An NVIDIA redist archive installs stripped, recorded and listed; a
// second install costs no request.
func TestInstallRedist(t *testing.T) {
	const libSize = 200_000
	data := xzBytes(t, tarBytes(t, redistMembers(libSize)))
	for name, xzOpt := range xzChoices(t) {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, data)
			s := openStore(t, t.TempDir())
			c := testClient(t, func(o *Options) { o.XZ = xzOpt })
			req := request(srv.url("libcudss-linux-sbsa-0.8.0.10_cuda13-archive.tar.xz"), data)
			es, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: req}})
			if err != nil {
				t.Fatal(err)
			}
			e := es[0]
			wantDir := filepath.Join(s.Dir(), "pkgs", "libcudss", "0.8.0.10", "linux-sbsa", "cuda13")
			if e.Dir != wantDir || e.Key != testKey() || e.Layout != LayoutRedist || e.SHA256 != req.SHA256 || e.URL != req.URL || e.Size != req.Size {
				t.Errorf("entry %+v", e)
			}
			if !equalStrings(e.Files, redistFiles()) {
				t.Errorf("files %q; want %q", e.Files, redistFiles())
			}
			checkRedist(t, e.Dir, libSize)
			got, ok, err := s.Lookup(testKey())
			if err != nil || !ok || got.Dir != e.Dir || !equalStrings(got.Files, e.Files) || !got.InstalledAt.Equal(e.InstalledAt) {
				t.Errorf("Lookup = %+v, %v, %v", got, ok, err)
			}
			list, err := s.List()
			if err != nil || len(list) != 1 || list[0].Dir != e.Dir {
				t.Errorf("List = %+v, %v", list, err)
			}
			checkNoLeftovers(t, s, c)
			// Installed already: nothing is downloaded, even with an empty cache.
			c2 := testClient(t, func(o *Options) { o.XZ = xzOpt })
			if _, err := s.Install(context.Background(), c2, []Item{{Key: testKey(), Request: req}}); err != nil {
				t.Fatal(err)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d requests; want 1", n)
			}
			// Removed, then installed again: the archive comes from the cache.
			if err := s.Remove(context.Background(), testKey()); err != nil {
				t.Fatal(err)
			}
			es, err = s.Install(context.Background(), c, []Item{{Key: testKey(), Request: req}})
			if err != nil {
				t.Fatal(err)
			}
			checkRedist(t, es[0].Dir, libSize)
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d requests after a reinstall; want 1 (the cache)", n)
			}
		})
	}
}

// A wheel from a file:// mirror keeps its layout.
func TestInstallWheel(t *testing.T) {
	whl := zipBytes(t, []member{
		{name: "nvidia/cu13/lib/libcublas.so.13", body: payload(2, 5000), mode: 0o755},
		file("nvidia_cublas-13.0.0.dist-info/RECORD", "x"),
	})
	p := writeFile(t, t.TempDir(), "nvidia_cublas-13.0.0-py3-none-manylinux_2_27_aarch64.whl", whl)
	s := openStore(t, t.TempDir())
	c := testClient(t, nil)
	k := Key{Component: "nvidia-cublas", Version: "13.0.0", Platform: "linux-sbsa", Variant: "cuda13"}
	es, err := s.Install(context.Background(), c, []Item{{Key: k, Request: request("file://"+p, whl)}})
	if err != nil {
		t.Fatal(err)
	}
	if es[0].Layout != LayoutWheel || !equalStrings(es[0].Files, []string{"nvidia/cu13/lib/libcublas.so.13", "nvidia_cublas-13.0.0.dist-info/RECORD"}) {
		t.Errorf("entry %+v", es[0])
	}
	if _, err := os.Stat(filepath.Join(es[0].Dir, "nvidia/cu13/lib/libcublas.so.13")); err != nil {
		t.Error(err)
	}
}

// manyFiles is a tar whose first files are extracted long before its end.
func manyFiles(n, size int) []member {
	ms := []member{dir("top/")}
	for i := range n {
		ms = append(ms, member{name: fmt.Sprintf("top/lib/f%03d", i), body: payload(uint64(i), size)})
	}
	return ms
}

// Extraction streams: files appear in staging while the download is still
// waiting for its second half.
func TestInstallExtractsWhileDownloading(t *testing.T) {
	cases := map[string][]byte{"a.tar.gz": gzBytes(t, tarBytes(t, manyFiles(20, 50_000)))}
	if d := decoders(t)["system"]; d.xz != "" {
		cases["a.tar.xz"] = xzBytes(t, tarBytes(t, manyFiles(20, 50_000)))
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			staged := make(chan struct{})
			srv := newServer(t, data, func(w http.ResponseWriter, r *http.Request, data []byte) {
				w.Header().Set("Content-Length", fmt.Sprint(len(data)))
				w.WriteHeader(http.StatusOK)
				w.Write(data[:len(data)/2])
				w.(http.Flusher).Flush()
				select {
				case <-staged:
				case <-time.After(10 * time.Second):
				}
				w.Write(data[len(data)/2:])
			})
			go func() {
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					if ms, _ := filepath.Glob(filepath.Join(s.Dir(), ".staging", "*", "t", "top", "lib", "f00*")); len(ms) > 0 {
						close(staged)
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			c := testClient(t, nil)
			if _, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request(srv.url(name), data)}}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-staged:
			default:
				t.Fatal("no file was extracted before the download finished")
			}
		})
	}
}

// Bytes that are a valid archive but not the one asked for: the staged
// result is thrown away, nothing is installed, nothing stays in the cache.
func TestInstallWrongBytesInstallsNothing(t *testing.T) {
	good := tarBytes(t, redistMembers(50_000))
	bad := append([]byte{}, good...)
	bad[len(bad)/2] ^= 0xFF // in the library's contents: still a valid tar
	cases := map[string][2][]byte{"a.tar": {good, bad}}
	goodXZ := xzBytes(t, good)
	badXZ := append([]byte{}, goodXZ...)
	badXZ[len(badXZ)/2] ^= 0xFF
	cases["a.tar.xz"] = [2][]byte{goodXZ, badXZ}
	for name, c := range cases {
		for xname, xzOpt := range xzChoices(t) {
			t.Run(name+"/"+xname, func(t *testing.T) {
				srv := newServer(t, c[1])
				s := openStore(t, t.TempDir())
				cl := testClient(t, func(o *Options) { o.XZ = xzOpt })
				_, err := s.Install(context.Background(), cl, []Item{{Key: testKey(), Request: request(srv.url(name), c[0])}})
				if err == nil {
					t.Fatal("wrong bytes installed")
				}
				var ve *VerifyError
				if !errors.As(err, &ve) && name == "a.tar" {
					t.Errorf("err = %v; want a VerifyError", err)
				}
				if _, ok, _ := s.Lookup(testKey()); ok {
					t.Error("the entry exists")
				}
				mustNotExist(t, s.entryDir(testKey()))
				mustNotExist(t, cl.cachePath(sha(c[0])))
				checkNoLeftovers(t, s, cl)
			})
		}
	}
}

// A hostile archive fails the install; nothing is written outside staging.
func TestInstallHostileArchive(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside")
	data := gzBytes(t, tarBytes(t, []member{file("top/a", "a"), symlink("top/lib/evil", "../../../../../../../.."+outside)}))
	root := t.TempDir()
	s := openStore(t, filepath.Join(root, "store"))
	srv := newServer(t, data)
	c := testClient(t, nil)
	_, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request(srv.url("a.tar.gz"), data)}})
	if err == nil || !strings.Contains(err.Error(), "leaves the component directory") {
		t.Fatalf("err = %v", err)
	}
	if got := walk(t, root); len(got) != 0 {
		t.Errorf("store holds %q", got)
	}
	mustNotExist(t, outside)
}

// The archive may not bring its own record.
func TestInstallReservedName(t *testing.T) {
	data := tarBytes(t, []member{file("top/"+recordName, "{}"), file("top/lib/a", "a")})
	p := writeFile(t, t.TempDir(), "a.tar", data)
	s := openStore(t, t.TempDir())
	_, err := s.Install(context.Background(), testClient(t, nil), []Item{{Key: testKey(), Request: request("file://"+p, data)}})
	if err == nil || !strings.Contains(err.Error(), "reserves") {
		t.Fatalf("err = %v", err)
	}
	mustNotExist(t, s.entryDir(testKey()))
}

// A process killed (SIGKILL) in the middle of an install leaves no visible
// entry; the next run resumes the download and completes the install.
func TestInstallKilledMidway(t *testing.T) {
	data := gzBytes(t, tarBytes(t, redistMembers(3<<20)))
	half := len(data) * 6 / 10
	halfSent := make(chan struct{})
	srv := newServer(t, data, func(w http.ResponseWriter, r *http.Request, data []byte) {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:half])
		w.(http.Flusher).Flush()
		close(halfSent)
		<-r.Context().Done() // until the client dies
	})
	store, cache := t.TempDir(), t.TempDir()
	req := request(srv.url("libcudss-archive.tar.gz"), data)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=install", "CHILD_STORE="+store, "CHILD_CACHE="+cache,
		"CHILD_URL="+req.URL, "CHILD_SHA256="+req.SHA256, fmt.Sprintf("CHILD_SIZE=%d", req.Size))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-halfSent:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the child did not start downloading: %s", stderr.String())
	}
	// Kill it once it is extracting: the staging directory holds files.
	s := openStore(t, store)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if ms, _ := filepath.Glob(filepath.Join(store, ".staging", "*", "t", "*", "include", "cudss.h")); len(ms) > 0 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the child extracted nothing: %s", stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, not by SIGKILL; stderr: %s", err, stderr.String())
	}
	// No half-installed component is visible.
	if _, ok, err := s.Lookup(testKey()); ok || err != nil {
		t.Fatalf("after the kill: Lookup = %v, %v", ok, err)
	}
	mustNotExist(t, s.entryDir(testKey()))
	if list, err := s.List(); len(list) != 0 || err != nil {
		t.Fatalf("after the kill: List = %v, %v", list, err)
	}
	// Run again: it completes, resuming the partial download.
	c := testClient(t, func(o *Options) { o.CacheDir = cache })
	es, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: req}})
	if err != nil {
		t.Fatal(err)
	}
	checkRedist(t, es[0].Dir, 3<<20)
	reqs := srv.requests()
	if len(reqs) != 2 || !strings.HasPrefix(reqs[1].Get("Range"), "bytes=") {
		t.Errorf("requests %v; want the rerun to resume with Range", reqs)
	}
	checkNoLeftovers(t, s, c)
}

// Two installs of one component at once, by two clients on one store and
// cache, end with one correct copy and one download.
func TestInstallConcurrentSameComponent(t *testing.T) {
	data := gzBytes(t, tarBytes(t, redistMembers(1<<20)))
	first := make(chan struct{})
	gate := make(chan struct{})
	srv := newServer(t, data, func(w http.ResponseWriter, r *http.Request, data []byte) {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:len(data)/2])
		w.(http.Flusher).Flush()
		close(first)
		<-gate
		w.Write(data[len(data)/2:])
	})
	storeDir, cache := t.TempDir(), t.TempDir()
	req := request(srv.url("a.tar.gz"), data)
	var wg sync.WaitGroup
	entries := make([]Entry, 2)
	errs := make([]error, 2)
	install := func(i int) {
		defer wg.Done()
		s := openStore(t, storeDir)
		c := testClient(t, func(o *Options) { o.CacheDir = cache })
		es, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: req}})
		if err == nil {
			entries[i] = es[0]
		}
		errs[i] = err
	}
	wg.Add(2)
	go install(0)
	<-first
	go install(1)
	time.Sleep(100 * time.Millisecond) // let the second one reach the lock
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("install %d: %v", i, err)
		}
	}
	if entries[0].Dir != entries[1].Dir || !entries[0].InstalledAt.Equal(entries[1].InstalledAt) {
		t.Errorf("two different entries: %+v / %+v", entries[0], entries[1])
	}
	checkRedist(t, entries[0].Dir, 1<<20)
	if n := len(srv.requests()); n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
	list, err := openStore(t, storeDir).List()
	if err != nil || len(list) != 1 {
		t.Errorf("List = %v, %v", list, err)
	}
}

// At most Parallel archives are in flight at once.
func TestInstallBoundedParallel(t *testing.T) {
	var inflight, peak atomic.Int32
	gate := make(chan struct{})
	archives := map[string][]byte{}
	for i := range 5 {
		archives[fmt.Sprintf("/a%d.tar", i)] = tarBytes(t, []member{file(fmt.Sprintf("top/f%d", i), "x")})
	}
	srv := newServer(t, nil)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-gate
		serveNormally(w, r, archives[r.URL.Path])
		inflight.Add(-1)
	})
	s := openStore(t, t.TempDir())
	c := testClient(t, func(o *Options) { o.Parallel = 2 })
	var items []Item
	for i := range 5 {
		p := fmt.Sprintf("/a%d.tar", i)
		k := testKey()
		k.Version = fmt.Sprintf("1.%d", i)
		items = append(items, Item{Key: k, Request: request(srv.URL+p, archives[p])})
	}
	done := make(chan error)
	go func() {
		_, err := s.Install(context.Background(), c, items)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for inflight.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // room for an unbounded third request
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("peak of %d requests in flight; want 2", p)
	}
	if list, _ := s.List(); len(list) != 5 {
		t.Errorf("%d entries; want 5", len(list))
	}
}

// One failing item does not stop the others; its entry is zero.
func TestInstallPartialFailure(t *testing.T) {
	good := tarBytes(t, []member{file("top/a", "a")})
	srv := newServer(t, good)
	other := tarBytes(t, []member{file("top/b", "b")})
	missing := newServer(t, other, status(404, ""))
	s := openStore(t, t.TempDir())
	k2 := testKey()
	k2.Version = "2.0"
	es, err := s.Install(context.Background(), testClient(t, nil), []Item{
		{Key: testKey(), Request: request(srv.url("a.tar"), good)},
		{Key: k2, Request: request(missing.url("b.tar"), other)},
	})
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), k2.String()) {
		t.Fatalf("err = %v", err)
	}
	if es[0].Dir == "" || es[1].Dir != "" {
		t.Errorf("entries %+v", es)
	}
}

// The same key from another archive replaces the entry.
func TestInstallReplacesOtherArchive(t *testing.T) {
	a := tarBytes(t, []member{file("top/lib/a", "a")})
	b := tarBytes(t, []member{file("top/lib/b", "b")})
	pa, pb := writeFile(t, t.TempDir(), "a.tar", a), writeFile(t, t.TempDir(), "b.tar", b)
	s := openStore(t, t.TempDir())
	c := testClient(t, nil)
	if _, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request("file://"+pa, a)}}); err != nil {
		t.Fatal(err)
	}
	es, err := s.Install(context.Background(), c, []Item{{Key: testKey(), Request: request("file://"+pb, b)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := walk(t, es[0].Dir); !equalStrings(got, []string{recordName, filesName, "lib/b"}) || es[0].SHA256 != sha(b) {
		t.Errorf("after replacing: %q, %s", got, es[0].SHA256)
	}
}

func TestInstallDuplicateItems(t *testing.T) {
	a := tarBytes(t, []member{file("top/a", "a")})
	p := writeFile(t, t.TempDir(), "a.tar", a)
	s := openStore(t, t.TempDir())
	c := testClient(t, nil)
	it := Item{Key: testKey(), Request: request("file://"+p, a)}
	es, err := s.Install(context.Background(), c, []Item{it, it})
	if err != nil || len(es) != 2 || es[0].Dir == "" || es[0].Dir != es[1].Dir {
		t.Fatalf("%+v, %v", es, err)
	}
	other := it
	other.Request.SHA256 = sha([]byte("other"))
	if _, err := s.Install(context.Background(), c, []Item{it, other}); err == nil {
		t.Error("one key from two archives accepted")
	}
}

func TestRemove(t *testing.T) {
	a := tarBytes(t, []member{file("top/a", "a")})
	p := writeFile(t, t.TempDir(), "a.tar", a)
	s := openStore(t, t.TempDir())
	c := testClient(t, nil)
	k1, k2 := testKey(), testKey()
	k2.Platform = "linux-x86_64"
	if _, err := s.Install(context.Background(), c, []Item{{Key: k1, Request: request("file://"+p, a)}, {Key: k2, Request: request("file://"+p, a)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(context.Background(), k1); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, s.entryDir(k1))
	mustNotExist(t, filepath.Dir(s.entryDir(k1))) // pruned: linux-sbsa/ is empty
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].Key != k2 {
		t.Errorf("List = %+v, %v", list, err)
	}
	err := s.Remove(context.Background(), k1, k2)
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), k1.String()) {
		t.Errorf("err = %v; want k1 not installed", err)
	}
	if list, _ := s.List(); len(list) != 0 {
		t.Errorf("k2 was not removed: %v", list)
	}
	if got := walk(t, s.Dir()); len(got) != 0 {
		t.Errorf("the store holds %q (lock files stay no longer than their use)", got)
	}
}

// Reading a store that does not exist finds it empty and creates nothing.
func TestStoreReadOnlyCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := openStore(t, dir)
	if list, err := s.List(); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v", list, err)
	}
	if _, ok, err := s.Lookup(testKey()); ok || err != nil {
		t.Errorf("Lookup = %v, %v", ok, err)
	}
	if err := s.Remove(context.Background(), testKey()); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Remove = %v", err)
	}
	mustNotExist(t, dir)
	if _, err := OpenStore(writeFile(t, t.TempDir(), "f", nil)); err == nil {
		t.Error("a file accepted as the store directory")
	}
}

func TestKeyValidation(t *testing.T) {
	s := openStore(t, t.TempDir())
	for _, k := range []Key{
		{Component: "../x", Version: "1", Platform: "p"},
		{Component: "a/b", Version: "1", Platform: "p"},
		{Component: "", Version: "1", Platform: "p"},
		{Component: ".hidden", Version: "1", Platform: "p"},
		{Component: "a", Version: "..", Platform: "p"},
		{Component: "a", Version: "1", Platform: "p", Variant: "any"},
		{Component: "a", Version: "1", Platform: "p", Variant: "a@b"},
		{Component: "a", Version: "1", Platform: strings.Repeat("p", 200)},
	} {
		if _, _, err := s.Lookup(k); err == nil {
			t.Errorf("%+v accepted", k)
		}
	}
	for _, k := range []Key{
		{Component: "cuda_cudart", Version: "13.0.96", Platform: "linux-x86_64", Variant: ""},
		{Component: "libcudss", Version: "0.8.0.10", Platform: "linux-sbsa", Variant: "cuda13"},
	} {
		if _, _, err := s.Lookup(k); err != nil {
			t.Errorf("%+v refused: %v", k, err)
		}
	}
}

// A lock held elsewhere makes Install wait; its context ends the wait.
func TestInstallWaitHonoursContext(t *testing.T) {
	a := tarBytes(t, []member{file("top/a", "a")})
	p := writeFile(t, t.TempDir(), "a.tar", a)
	s := openStore(t, t.TempDir())
	if err := s.prepare(); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockFile(context.Background(), s.lockPath(testKey()), nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = s.Install(ctx, testClient(t, nil), []Item{{Key: testKey(), Request: request("file://"+p, a)}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for lock") {
		t.Fatalf("err = %v", err)
	}
}

// Unpack downloads and extracts into a new directory.
func TestUnpack(t *testing.T) {
	data := xzBytes(t, tarBytes(t, redistMembers(70_000)))
	srv := newServer(t, data)
	c := testClient(t, nil)
	dest := filepath.Join(t.TempDir(), "x")
	if err := c.Unpack(context.Background(), request(srv.url("a.tar.xz"), data), dest); err != nil {
		t.Fatal(err)
	}
	checkRedist(t, dest, 70_000)
}
