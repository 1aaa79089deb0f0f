package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// checkDownloaded checks that Download returned the cached, verified file.
func checkDownloaded(t *testing.T, c *Client, p string, err error, data []byte) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if p != c.cachePath(sha(data)) {
		t.Errorf("path %s; want the cache path %s", p, c.cachePath(sha(data)))
	}
	if !bytes.Equal(readAll(t, p), data) {
		t.Fatal("downloaded file differs from the archive")
	}
	mustNotExist(t, p+".part")
}

// A body that breaks mid-way is resumed with Range and If-Range.
func TestDownloadResumesAfterDrop(t *testing.T) {
	data := payload(3, 1<<20)
	s := newServer(t, data, dropAfter(300_000))
	c := testClient(t, nil)
	p, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
	checkDownloaded(t, c, p, err, data)
	reqs := s.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests; want 2", len(reqs))
	}
	var from int
	if _, err := fmt.Sscanf(reqs[1].Get("Range"), "bytes=%d-", &from); err != nil || from <= 0 || from > 300_000 {
		t.Errorf("second request Range %q; want bytes=N- with 0 < N <= 300000", reqs[1].Get("Range"))
	}
	if got := reqs[1].Get("If-Range"); got != s.etag {
		t.Errorf("If-Range %q; want the ETag %q", got, s.etag)
	}
}

// 429 and 5xx are retried (honouring Retry-After), then the download works.
func TestDownloadRetriesTemporaryStatus(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			data := payload(4, 10_000)
			s := newServer(t, data, status(code, "0"), status(code, ""))
			c := testClient(t, nil)
			p, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
			checkDownloaded(t, c, p, err, data)
			if n := len(s.requests()); n != 3 {
				t.Errorf("%d requests; want 3", n)
			}
		})
	}
}

// Retries end; the error names the URL, the status and the attempts.
func TestDownloadGivesUpAfterRetries(t *testing.T) {
	data := payload(4, 1000)
	always := status(http.StatusServiceUnavailable, "")
	s := newServer(t, data, always, always, always, always, always)
	c := testClient(t, func(o *Options) { o.Retries = 2 })
	u := s.url("a.tar.xz")
	_, err := c.Download(context.Background(), request(u, data))
	if err == nil || !strings.Contains(err.Error(), u) || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("err = %v; want the URL, 503 and 3 attempts", err)
	}
	if n := len(s.requests()); n != 3 {
		t.Errorf("%d requests; want 3", n)
	}
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 503 {
		t.Errorf("err is not a StatusError with code 503: %#v", err)
	}
}

// 404, 403 and 410 fail at once: one request, URL and status in the error.
func TestDownloadPermanentStatusFailsAtOnce(t *testing.T) {
	for _, code := range []int{http.StatusNotFound, http.StatusForbidden, http.StatusGone} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			data := payload(5, 1000)
			s := newServer(t, data, status(code, ""))
			c := testClient(t, nil)
			u := s.url("a.tar.xz")
			_, err := c.Download(context.Background(), request(u, data))
			want := fmt.Sprintf("%d %s", code, http.StatusText(code))
			if err == nil || !strings.Contains(err.Error(), u) || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v; want the URL and %q", err, want)
			}
			if n := len(s.requests()); n != 1 {
				t.Errorf("%d requests; want exactly 1", n)
			}
			if got := walk(t, c.cacheDir); len(got) > 1 || (len(got) == 1 && !strings.HasSuffix(got[0], ".lock")) {
				t.Errorf("cache holds %q after a failed download", got)
			}
		})
	}
}

// A server that answers a Range request with the whole file (200): the
// download restarts cleanly and ends with the right bytes.
func TestDownloadServerIgnoresRange(t *testing.T) {
	data := payload(6, 1<<20)
	s := newServer(t, data, dropAfter(400_000), ignoreRange)
	c := testClient(t, nil)
	p, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
	checkDownloaded(t, c, p, err, data)
	reqs := s.requests()
	if len(reqs) != 2 || reqs[1].Get("Range") == "" {
		t.Fatalf("requests %v; want 2, the second with Range", reqs)
	}
}

// A partial file left by an earlier run is resumed: only the rest is asked for.
func TestDownloadResumesPartialFile(t *testing.T) {
	data := payload(7, 500_000)
	s := newServer(t, data)
	c := testClient(t, nil)
	part := c.cachePath(sha(data)) + ".part"
	os.MkdirAll(filepath.Dir(part), 0o755)
	if err := os.WriteFile(part, data[:123_456], 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
	checkDownloaded(t, c, p, err, data)
	reqs := s.requests()
	if len(reqs) != 1 || reqs[0].Get("Range") != "bytes=123456-" {
		t.Fatalf("requests %v; want one with Range bytes=123456-", reqs)
	}
}

// A partial file whose bytes do not belong to the archive fails
// verification after the resume; the download then starts over once.
func TestDownloadBadPartialStartsOver(t *testing.T) {
	data := payload(8, 300_000)
	s := newServer(t, data, ignoreRange)
	c := testClient(t, nil)
	part := c.cachePath(sha(data)) + ".part"
	os.MkdirAll(filepath.Dir(part), 0o755)
	if err := os.WriteFile(part, bytes.Repeat([]byte("x"), 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
	checkDownloaded(t, c, p, err, data)
	reqs := s.requests()
	if len(reqs) != 2 || reqs[0].Get("Range") != "bytes=1000-" || reqs[1].Get("Range") != "" {
		t.Fatalf("requests %v; want a Range request, then a full one", reqs)
	}
}

// stallAfter sends n bytes, then nothing until the client gives up.
func stallAfter(n int) func(w http.ResponseWriter, r *http.Request, data []byte) {
	return func(w http.ResponseWriter, r *http.Request, data []byte) {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:n])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	}
}

// A body that stops delivering trips the stall timeout. A break after
// progress resumes even without retries (only breaks without progress count
// against them); a break before any byte then fails.
func TestDownloadStall(t *testing.T) {
	data := payload(9, 200_000)
	t.Run("no retries", func(t *testing.T) {
		s := newServer(t, data, stallAfter(0))
		c := testClient(t, func(o *Options) { o.StallTimeout = 200 * time.Millisecond; o.Retries = -1 })
		_, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
		if err == nil || !strings.Contains(err.Error(), "no data for 200ms") {
			t.Fatalf("err = %v; want a stall", err)
		}
	})
	t.Run("resumed", func(t *testing.T) {
		s := newServer(t, data, stallAfter(50_000))
		c := testClient(t, func(o *Options) { o.StallTimeout = 200 * time.Millisecond; o.Retries = -1 })
		p, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
		checkDownloaded(t, c, p, err, data)
		if reqs := s.requests(); len(reqs) != 2 || reqs[1].Get("Range") == "" {
			t.Errorf("requests %v; want a resume", reqs)
		}
	})
}

// A server that never sends headers trips the header timeout.
func TestDownloadHeaderTimeout(t *testing.T) {
	data := payload(10, 1000)
	s := newServer(t, data, func(w http.ResponseWriter, r *http.Request, data []byte) {
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	})
	c := testClient(t, func(o *Options) { o.HeaderTimeout = 200 * time.Millisecond; o.Retries = -1 })
	_, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
	if err == nil || !strings.Contains(err.Error(), "timeout awaiting response headers") {
		t.Fatalf("err = %v; want a header timeout", err)
	}
}

// Wrong bytes of the right size: the error gives expected and actual sha256
// and nothing stays in the cache.
func TestDownloadWrongBytes(t *testing.T) {
	data := payload(11, 100_000)
	wrong := payload(12, 100_000)
	s := newServer(t, wrong)
	c := testClient(t, nil)
	_, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
	var ve *VerifyError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "expected "+sha(data)) || !strings.Contains(err.Error(), "got "+sha(wrong)) {
		t.Fatalf("err = %v; want a sha256 mismatch with both sums", err)
	}
	for _, f := range walk(t, c.cacheDir) {
		if !strings.HasSuffix(f, ".lock") {
			t.Errorf("cache holds %s after a failed verification", f)
		}
	}
}

// A server that declares another size fails at once, saying both sizes.
func TestDownloadWrongSize(t *testing.T) {
	data := payload(13, 1000)
	s := newServer(t, data[:900])
	c := testClient(t, nil)
	_, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
	if err == nil || !strings.Contains(err.Error(), "expected 1000 bytes, got 900") {
		t.Fatalf("err = %v; want a size mismatch", err)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
}

// A second download of the same archive costs no request; a damaged cached
// file is replaced.
func TestDownloadCache(t *testing.T) {
	data := payload(14, 100_000)
	s := newServer(t, data)
	cache := t.TempDir()
	req := request(s.url("a.tar.xz"), data)
	c := testClient(t, func(o *Options) { o.CacheDir = cache })
	p, err := c.Download(context.Background(), req)
	checkDownloaded(t, c, p, err, data)
	c2 := testClient(t, func(o *Options) { o.CacheDir = cache })
	p, err = c2.Download(context.Background(), req)
	checkDownloaded(t, c2, p, err, data)
	if n := len(s.requests()); n != 1 {
		t.Fatalf("%d requests after two downloads; want 1", n)
	}
	damaged := append([]byte{}, data...)
	damaged[500] ^= 0xFF
	if err := os.WriteFile(p, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = c2.Download(context.Background(), req)
	checkDownloaded(t, c2, p, err, data)
	if n := len(s.requests()); n != 2 {
		t.Fatalf("%d requests; want 2 (the damaged cache file downloaded again)", n)
	}
}

func TestDownloadURLPolicy(t *testing.T) {
	data := payload(15, 100)
	c := testClient(t, nil)
	for u, want := range map[string]string{
		"http://example.com/a.tar.xz": "plain http is refused",
		"ftp://example.com/a.tar.xz":  "unsupported URL scheme",
		"file://host/a.tar.xz":        "must name a local path",
		"file:///no/such/a.tar.xz":    "no such file",
	} {
		_, err := c.Download(context.Background(), request(u, data))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v; want %q", u, err, want)
		}
	}
	// A redirect is held to the same rule.
	s := newServer(t, data, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Redirect(w, r, "http://example.invalid/a.tar.xz", http.StatusFound)
	})
	_, err := c.Download(context.Background(), request(s.url("a.tar.xz"), data))
	if err == nil || !strings.Contains(err.Error(), "plain http is refused") {
		t.Errorf("redirect to plain http: err = %v", err)
	}
	if n := len(s.requests()); n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
	// http://localhost is loopback.
	s2 := newServer(t, data)
	u := strings.Replace(s2.url("a.tar.xz"), "127.0.0.1", "localhost", 1)
	if _, err := c.Download(context.Background(), request(u, data)); err != nil {
		t.Errorf("http://localhost: %v", err)
	}
}

// A file:// mirror is verified and used in place.
func TestDownloadFileURL(t *testing.T) {
	data := payload(16, 10_000)
	p := writeFile(t, t.TempDir(), "a.tar.xz", data)
	c := testClient(t, nil)
	got, err := c.Download(context.Background(), request("file://"+p, data))
	if err != nil || got != p {
		t.Fatalf("got %q, %v; want %q", got, err, p)
	}
	bad := request("file://"+p, data)
	bad.SHA256 = sha([]byte("other"))
	_, err = c.Download(context.Background(), bad)
	var ve *VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v; want a VerifyError", err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("a file:// source must never be deleted: %v", err)
	}
}

func TestRequestValidation(t *testing.T) {
	c := testClient(t, nil)
	for _, r := range []Request{
		{URL: "https://x/a", SHA256: strings.Repeat("A", 64), Size: 1},
		{URL: "https://x/a", SHA256: "abc", Size: 1},
		{URL: "https://x/a", SHA256: strings.Repeat("g", 64), Size: 1},
		{URL: "https://x/a", SHA256: strings.Repeat("a", 64), Size: 0},
		{SHA256: strings.Repeat("a", 64), Size: 1},
	} {
		if _, err := c.Download(context.Background(), r); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}

// Proxies come from the environment. http.ProxyFromEnvironment reads it
// once per process, so the download runs in a child process.
func TestDownloadProxyFromEnvironment(t *testing.T) {
	data := payload(17, 50_000)
	var seen []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.URL.String())
		serveNormally(w, r, data)
	}))
	defer proxy.Close()
	cache := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"=download",
		"HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=",
		"CHILD_URL=http://archive.example/a.tar.xz", "CHILD_SHA256="+sha(data),
		fmt.Sprintf("CHILD_SIZE=%d", len(data)), "CHILD_CACHE="+cache,
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if len(seen) != 1 || seen[0] != "http://archive.example/a.tar.xz" {
		t.Fatalf("proxy saw %q; want the archive's URL", seen)
	}
	c := testClient(t, func(o *Options) { o.CacheDir = cache })
	if !bytes.Equal(readAll(t, c.cachePath(sha(data))), data) {
		t.Error("the child did not cache the archive")
	}
}

func TestBackoff(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	resp := func(code int, ra string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		if ra != "" {
			r.Header.Set("Retry-After", ra)
		}
		return r
	}
	for _, c := range []struct {
		resp *http.Response
		want time.Duration
	}{
		{resp(503, "7"), 7 * time.Second},
		{resp(429, "0"), 0},
		{resp(429, now.Add(30*time.Second).Format(http.TimeFormat)), 30 * time.Second},
		{resp(503, now.Add(-time.Hour).Format(http.TimeFormat)), 0},
		{resp(503, "86400"), maxRetryAfter},
	} {
		if got := backoff(time.Second, 30*time.Second, 0, c.resp, now); got != c.want {
			t.Errorf("Retry-After %q: %v; want %v", c.resp.Header.Get("Retry-After"), got, c.want)
		}
	}
	for attempt, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		got := backoff(time.Second, 10*time.Second, attempt, resp(500, "bogus"), now)
		if got < want/2 || got > want {
			t.Errorf("attempt %d: %v; want within [%v, %v]", attempt, got, want/2, want)
		}
	}
	if got := backoff(time.Second, 10*time.Second, 100, nil, now); got > 10*time.Second || got < 5*time.Second {
		t.Errorf("attempt 100: %v", got)
	}
}

func TestParseContentRange(t *testing.T) {
	for v, want := range map[string][2]int64{
		"bytes 100-199/200": {100, 200},
		"bytes 0-0/*":       {0, -1},
	} {
		s, tot, err := parseContentRange(v)
		if err != nil || s != want[0] || tot != want[1] {
			t.Errorf("%q: %d %d %v", v, s, tot, err)
		}
	}
	for _, v := range []string{"", "bytes", "bytes 5-4/10", "bytes 0-9/5", "items 0-1/2", "bytes a-b/c"} {
		if _, _, err := parseContentRange(v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
}

// Off a terminal, progress is a line at start and end and about every 10 %.
func TestProgressLines(t *testing.T) {
	data := payload(18, 4<<20)
	s := newServer(t, data)
	var out bytes.Buffer
	c := testClient(t, func(o *Options) { o.Progress = &out })
	req := request(s.url("a.tar.xz"), data)
	req.Name = "libcudss 0.8.0.10"
	if _, err := c.Download(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 3 || len(lines) > 11 {
		t.Fatalf("%d lines; want start, a few steps, end:\n%s", len(lines), out.String())
	}
	if !strings.HasPrefix(lines[0], "libcudss 0.8.0.10: downloading 4.0 MiB") || !strings.HasPrefix(lines[len(lines)-1], "libcudss 0.8.0.10: done, 4.0 MiB in") {
		t.Errorf("unexpected lines:\n%s", out.String())
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.Contains(l, "% (") {
			t.Errorf("unexpected step line %q", l)
		}
	}
}
