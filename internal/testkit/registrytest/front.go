package registrytest

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Front is a reverse proxy before the registry, on its own port of
// 127.0.0.1 (TLS from the same authority when the registry has TLS): it
// logs every request it passes, so that a test counts what one client
// asked for, and can hold a blob's answer part-way.
type Front struct {
	// Host is 127.0.0.1:PORT.
	Host string

	mu    sync.Mutex
	log   []Request
	holds map[string]*hold
}

// Request is one request the front passed on.
type Request struct {
	Method string
	Path   string
	Range  string
	Status int
}

type hold struct {
	after   int64
	reached chan struct{}
	once    sync.Once
}

// Front starts a front for the registry until the test ends.
func (r *Registry) Front(t testing.TB) *Front {
	t.Helper()
	up, err := url.Parse(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	f := &Front{holds: map[string]*hold{}}
	proxy := httputil.NewSingleHostReverseProxy(up)
	tr := &http.Transport{}
	if r.CA != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: r.CA.Pool}
	}
	proxy.Transport = tr
	proxy.FlushInterval = -1
	// A client that goes away mid-answer is what the holds are for.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	proxy.ModifyResponse = func(resp *http.Response) error {
		req := resp.Request
		f.mu.Lock()
		f.log = append(f.log, Request{Method: req.Method, Path: req.URL.Path, Range: req.Header.Get("Range"), Status: resp.StatusCode})
		h := f.holds[blobDigest(req.URL.Path)]
		f.mu.Unlock()
		if h != nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
			resp.Body = &heldBody{ReadCloser: resp.Body, h: h, done: req.Context().Done()}
		}
		return nil
	}
	srv := httptest.NewUnstartedServer(proxy)
	if r.CA != nil {
		srv.TLS = r.CA.ServerTLS(t, "127.0.0.1")
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	f.Host = strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://")
	return f
}

// blobDigest is the digest of a blob path (/v2/REPO/blobs/DIGEST), or "".
func blobDigest(p string) string {
	if i := strings.LastIndex(p, "/blobs/"); i >= 0 && !strings.Contains(p[i:], "/uploads") {
		return p[i+len("/blobs/"):]
	}
	return ""
}

// Hold makes the next full answers for the blob of digest stop after n
// bytes until the client goes away; the channel closes once n bytes have
// been sent.
func (f *Front) Hold(digest string, n int64) <-chan struct{} {
	h := &hold{after: n, reached: make(chan struct{})}
	f.mu.Lock()
	f.holds[digest] = h
	f.mu.Unlock()
	return h.reached
}

// Release ends the hold of a blob.
func (f *Front) Release(digest string) {
	f.mu.Lock()
	delete(f.holds, digest)
	f.mu.Unlock()
}

type heldBody struct {
	io.ReadCloser
	h    *hold
	done <-chan struct{}
	sent int64
}

func (b *heldBody) Read(p []byte) (int, error) {
	if b.sent >= b.h.after {
		b.h.once.Do(func() { close(b.h.reached) })
		<-b.done
		return 0, io.ErrUnexpectedEOF
	}
	if rest := b.h.after - b.sent; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := b.ReadCloser.Read(p)
	b.sent += int64(n)
	return n, err
}

// Requests are the requests passed so far.
func (f *Front) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.log...)
}

// Count is how many requests of the method, whose path contains part,
// were answered with a status below 300.
func (f *Front) Count(method, part string) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Method == method && strings.Contains(r.Path, part) && r.Status < 300 {
			n++
		}
	}
	return n
}

// BlobGets counts the GETs of each blob answered with its bytes (200 or
// 206), by digest.
func (f *Front) BlobGets() map[string]int {
	out := map[string]int{}
	for _, r := range f.Requests() {
		if d := blobDigest(r.Path); d != "" && r.Method == http.MethodGet && (r.Status == http.StatusOK || r.Status == http.StatusPartialContent) {
			out[d]++
		}
	}
	return out
}
