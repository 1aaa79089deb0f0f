package fetch

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// countingTransport counts the requests it carries, with their URLs.
type countingTransport struct {
	n    atomic.Int64
	last atomic.Value
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.last.Store(r.URL.String())
	return http.DefaultTransport.RoundTrip(r)
}

// TestLocatedURL: a URL of a scheme of its own (oci://) is downloaded
// from where Locate says, by the given transport, cached by its sha256,
// and installed by the format its own name says (the located URL has
// none); it resumes like any download. Without Locate it is refused.
func TestLocatedURL(t *testing.T) {
	libSize := 200_000
	data := gzBytes(t, tarBytes(t, redistMembers(libSize)))
	s := newServer(t, data, dropAfter(len(data)/2))
	ctx := context.Background()
	var asked []string
	tr := &countingTransport{}
	c := testClient(t, func(o *Options) {
		o.Transport = tr
		o.Locate = func(_ context.Context, raw, sum string) (string, error) {
			asked = append(asked, raw+" "+sum)
			if !strings.HasPrefix(raw, "oci://registry.example/fleet/") {
				return "", errors.New("not this registry's")
			}
			return s.url("v2/fleet/blobs/sha256:" + sum), nil
		}
	})
	raw := "oci://registry.example/fleet/libcudss/linux-sbsa/libcudss-linux-sbsa-0.8.0.10_cuda13-archive.tar.gz"
	req := Request{Name: "libcudss", URL: raw, SHA256: sha(data), Size: int64(len(data))}
	st, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	entries, err := st.Install(ctx, c, []Item{{Key: testKey(), Request: req}})
	if err != nil {
		t.Fatal(err)
	}
	checkRedist(t, entries[0].Dir, libSize)
	if len(asked) != 1 || asked[0] != raw+" "+sha(data) {
		t.Fatalf("Locate was asked %q", asked)
	}
	reqs := s.requests()
	if len(reqs) != 2 || !strings.HasPrefix(reqs[1].Get("Range"), "bytes=") {
		t.Fatalf("%d requests (want the first broken and a second with Range): %v", len(reqs), reqs)
	}
	if tr.n.Load() != 2 || !strings.Contains(tr.last.Load().(string), "/v2/fleet/blobs/sha256:"+sha(data)) {
		t.Fatalf("the transport carried %d requests, the last to %v", tr.n.Load(), tr.last.Load())
	}
	// Cached by its sha256: another URL of the same bytes costs nothing.
	p, err := c.Download(ctx, Request{URL: "oci://registry.example/fleet/other/name.tar.gz", SHA256: sha(data), Size: int64(len(data))})
	checkDownloaded(t, c, p, err, data)
	if len(s.requests()) != 2 {
		t.Fatal("a cached archive was downloaded again")
	}
	if _, err := c.Download(ctx, Request{URL: "oci://elsewhere.example/x/a.tar.gz", SHA256: sha(data[1:]), Size: int64(len(data) - 1)}); err == nil || !strings.Contains(err.Error(), "not this registry's") {
		t.Fatalf("a URL Locate refuses: %v", err)
	}

	plain := testClient(t, nil)
	if _, err := plain.Download(ctx, Request{URL: raw, SHA256: sha(data[2:]), Size: int64(len(data) - 2)}); err == nil || !strings.Contains(err.Error(), `unsupported URL scheme "oci"`) {
		t.Fatalf("oci:// without Locate: %v", err)
	}
}

// TestDownloadAll brings several archives at once, in order; one that
// fails is named while the others arrive; two calls at once for the same
// archive download it once.
func TestDownloadAll(t *testing.T) {
	a, b := payload(1, 300_000), payload(2, 200_000)
	sa, sb := newServer(t, a), newServer(t, b)
	bad := newServer(t, b, status(http.StatusNotFound, ""))
	c := testClient(t, nil)
	ctx := context.Background()
	paths, err := c.DownloadAll(ctx, []Request{request(sa.url("a.tar.xz"), a), request(bad.url("missing.tar.xz"), b)})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a missing archive: %v", err)
	}
	checkDownloaded(t, c, paths[0], nil, a)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			ps, err := c.DownloadAll(ctx, []Request{request(sb.url("b.tar.xz"), b), request(sa.url("a.tar.xz"), a)})
			if err == nil && (ps[0] != c.cachePath(sha(b)) || ps[1] != c.cachePath(sha(a))) {
				err = errors.New("paths out of order: " + strings.Join(ps, ", "))
			}
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(sb.requests()); n != 1 {
		t.Fatalf("b was requested %d times by two calls at once, want once", n)
	}
	if n := len(sa.requests()); n != 1 {
		t.Fatalf("a, already cached, was requested %d times, want once in all", n)
	}
}
