// Package fetch downloads, verifies, extracts and installs archives into the store.
//
// The package knows URLs, sizes and sha256 sums, never catalog types: a
// caller names each archive with a [Request]. The pieces, bottom up:
//
//   - [Client.Download] brings one verified archive into the download cache
//     ($XDG_CACHE_HOME/cudadeps, keyed by sha256) and returns its path. HTTP
//     requests retry with backoff (go-retryablehttp), broken bodies resume with
//     Range, file:// URLs are read in place.
//   - [Extract] and [Client.Extract] unpack a verified .tar.xz, .tar.gz,
//     .tar.zst, .tar, .whl or .zip into a new directory under the rules of [Limits] and
//     refuse hostile entries. [Client.Unpack] downloads and extracts in one
//     stream, for callers that need an archive's contents once (the catalog
//     importer).
//   - [Store.Install] makes components present in the store
//     ($XDG_DATA_HOME/cudadeps): downloaded several at once, extracted while
//     the bytes arrive, verified, and renamed into place whole.
package fetch

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/cudadeps/cudadeps/internal/urlpolicy"
)

// Request names one archive to bring in.
type Request struct {
	// Name labels the archive in logs and progress, e.g.
	// "libcudss 0.8.0.10 (linux-sbsa, cuda13)". Defaults to the URL's base name.
	Name string
	// URL is https://..., http://... (loopback only unless Options.AllowHTTP)
	// or file:///... (read in place).
	URL string
	// SHA256 is the archive's sha256, lowercase hex. Required.
	SHA256 string
	// Size is the archive's size in bytes. Required (> 0).
	Size int64
}

func (r Request) label() string {
	if r.Name != "" {
		return r.Name
	}
	if u, err := url.Parse(r.URL); err == nil && u.Path != "" {
		return path.Base(u.Path)
	}
	return r.URL
}

func (r Request) validate() error {
	if r.URL == "" {
		return errors.New("request without a URL")
	}
	if len(r.SHA256) != 64 || strings.ToLower(r.SHA256) != r.SHA256 {
		return fmt.Errorf("%s: sha256 %q is not 64 lowercase hex digits", r.URL, r.SHA256)
	}
	if _, err := hex.DecodeString(r.SHA256); err != nil {
		return fmt.Errorf("%s: sha256 %q is not 64 lowercase hex digits", r.URL, r.SHA256)
	}
	if r.Size <= 0 {
		return fmt.Errorf("%s: size %d: the archive's size in bytes is required", r.URL, r.Size)
	}
	return nil
}

// Defaults for the zero values of Options.
const (
	DefaultParallel      = 4
	DefaultRetries       = 5
	DefaultStallTimeout  = 60 * time.Second
	DefaultHeaderTimeout = 60 * time.Second
	DefaultRetryWaitMin  = 1 * time.Second
	DefaultRetryWaitMax  = 30 * time.Second
	// maxRetryAfter caps a server's Retry-After: an hour-long wait helps nobody
	// at a terminal.
	maxRetryAfter = 5 * time.Minute
)

// XZ decoder choices for Options.XZ.
const (
	XZAuto = ""   // the system xz when it is on PATH, else the pure-Go decoder
	XZGo   = "go" // always the pure-Go decoder (github.com/ulikunitz/xz)
)

// Options configure a Client. The zero value is usable: every zero field
// takes the default named beside it.
type Options struct {
	// CacheDir holds downloaded archives, keyed by sha256.
	// Default: DefaultCacheDir().
	CacheDir string
	// AllowHTTP permits plain http:// to hosts other than loopback.
	AllowHTTP bool
	// Parallel bounds the archives in flight at once. Default 4.
	Parallel int
	// StallTimeout fails a response body that delivers no byte for this long
	// (the download then resumes). Default 60s.
	StallTimeout time.Duration
	// HeaderTimeout bounds the wait for response headers. Default 60s.
	HeaderTimeout time.Duration
	// Retries is how many times a failed request, or a body that broke
	// without progress, is tried again. Default 5; negative means none.
	Retries int
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between
	// tries (a server's Retry-After wins, up to 5 minutes). Default 1s, 30s.
	RetryWaitMin, RetryWaitMax time.Duration
	// Logger receives warnings (retries, resumes) and debug details.
	// Nil discards them.
	Logger *slog.Logger
	// Progress receives progress: one aggregate bar when it is a terminal,
	// otherwise a plain line when each archive starts and ends and about
	// every 10 %. Nil is quiet.
	Progress io.Writer
	// Limits bound what an extraction may write.
	Limits Limits
	// Transport, when set, carries the client's HTTP requests instead of
	// a transport of its own (which takes the proxy from the environment):
	// a registry's, which authenticates to it (package fleet/registry). An
	// error it returns wrapped by Refusal is not tried again.
	Transport http.RoundTripper
	// Locate, when set, turns the URL of a request whose scheme is none of
	// https, http and file (oci://) into the https or http URL its bytes
	// are downloaded from; sha256 is the request's. Without it such a URL
	// is refused.
	Locate func(ctx context.Context, rawURL, sha256 string) (string, error)
	// XZ picks the .xz decoder: XZAuto (default), XZGo, or the path of an xz
	// program. The system xz-utils decoder is about twice as fast as the
	// pure-Go one and runs in its own process, so archives stream into it
	// while they download; the pure-Go decoder only reads archives whose
	// sha256 has been checked, because a hostile stream could ask it for a
	// dictionary of gigabytes.
	XZ string
}

// Client downloads and extracts archives. It is safe for concurrent use.
type Client struct {
	cacheDir  string
	allowHTTP bool
	parallel  int
	stall     time.Duration
	retries   int
	waitMin   time.Duration
	waitMax   time.Duration
	log       *slog.Logger
	progress  io.Writer
	lim       Limits
	dec       decoder
	http      *retryablehttp.Client
	locate    func(ctx context.Context, rawURL, sha256 string) (string, error)
}

// NewClient checks opts and builds a Client.
func NewClient(opts Options) (*Client, error) {
	c := &Client{
		cacheDir:  opts.CacheDir,
		allowHTTP: opts.AllowHTTP,
		parallel:  orDefault(opts.Parallel, DefaultParallel),
		stall:     orDefault(opts.StallTimeout, DefaultStallTimeout),
		retries:   orDefault(opts.Retries, DefaultRetries),
		waitMin:   orDefault(opts.RetryWaitMin, DefaultRetryWaitMin),
		waitMax:   orDefault(opts.RetryWaitMax, DefaultRetryWaitMax),
		log:       opts.Logger,
		progress:  opts.Progress,
		lim:       opts.Limits.withDefaults(),
		locate:    opts.Locate,
	}
	if c.retries < 0 {
		c.retries = 0
	}
	if c.waitMax < c.waitMin {
		c.waitMax = c.waitMin
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.cacheDir == "" {
		dir, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		c.cacheDir = dir
	}
	abs, err := filepath.Abs(c.cacheDir)
	if err != nil {
		return nil, fmt.Errorf("cache directory %s: %w", c.cacheDir, err)
	}
	c.cacheDir = abs
	// One pure-Go decoder at a time keeps the peak RSS of parallel installs
	// under 64 MB; downloads still run in parallel.
	c.dec.goSlots = make(chan struct{}, 1)
	switch opts.XZ {
	case XZAuto:
		c.dec.xz = autoDecoder().xz
	case XZGo:
	default:
		p, err := exec.LookPath(opts.XZ)
		if err != nil {
			return nil, fmt.Errorf("xz decoder %q: %w", opts.XZ, err)
		}
		c.dec.xz = p
	}
	c.http = c.newHTTPClient(orDefault(opts.HeaderTimeout, DefaultHeaderTimeout), opts.Transport)
	return c, nil
}

// CacheDir is the download cache's directory (absolute).
func (c *Client) CacheDir() string { return c.cacheDir }

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// DefaultCacheDir is $XDG_CACHE_HOME/cudadeps, i.e. ~/.cache/cudadeps.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("download cache: %w", err)
	}
	return filepath.Join(dir, "cudadeps"), nil
}

func (c *Client) newHTTPClient(headerTimeout time.Duration, given http.RoundTripper) *retryablehttp.Client {
	var transport http.RoundTripper = &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   c.parallel,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
		// Archives are already compressed; a transparent gunzip would break
		// both the size check and Range offsets.
		DisableCompression: true,
	}
	if given != nil {
		transport = given
	}
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if err := urlpolicy.CheckRedirect(c.allowHTTP)(req, via); err != nil {
				return &policyError{err}
			}
			return nil
		},
	}
	rc.Logger = nil
	rc.RetryMax = c.retries
	rc.RetryWaitMin = c.waitMin
	rc.RetryWaitMax = c.waitMax
	rc.Backoff = func(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
		return backoff(lo, hi, attempt, resp, time.Now())
	}
	rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		var pe *policyError
		if errors.As(err, &pe) {
			return false, err
		}
		retry, cerr := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
		if retry {
			why := ""
			if err != nil {
				why = err.Error()
			} else if resp != nil {
				why = resp.Status
			}
			c.log.Warn("request failed, will retry", "url", redact(resp, err), "reason", why)
		}
		return retry, cerr
	}
	rc.ErrorHandler = func(resp *http.Response, err error, tries int) (*http.Response, error) {
		if resp != nil {
			resp.Body.Close()
		}
		var ue *url.Error
		isURLErr := errors.As(err, &ue)
		if resp != nil && !isURLErr {
			// Retries spent on an HTTP status (429, 5xx).
			return nil, &StatusError{URL: resp.Request.URL.Redacted(), Status: resp.Status, Code: resp.StatusCode, Tries: tries}
		}
		if isURLErr {
			err = ue.Err // the caller names the URL
		}
		if tries > 1 {
			return nil, fmt.Errorf("%w (after %s)", err, attempts(tries))
		}
		return nil, err
	}
	return rc
}

func redact(resp *http.Response, err error) string {
	if resp != nil && resp.Request != nil {
		return resp.Request.URL.Redacted()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.URL
	}
	return ""
}

// StatusError is an HTTP answer that ends a download: a permanent one such as
// 404 or 403 at once, a temporary one (429, 5xx) once retries are spent.
type StatusError struct {
	URL    string
	Status string // e.g. "404 Not Found"
	Code   int
	Tries  int
}

func (e *StatusError) Error() string {
	if e.Tries > 1 {
		return fmt.Sprintf("GET %s: %s (after %s)", e.URL, e.Status, attempts(e.Tries))
	}
	return fmt.Sprintf("GET %s: %s", e.URL, e.Status)
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// policyError is a refusal of ours (a redirect to plain http): never retried.
type policyError struct{ err error }

func (e *policyError) Error() string { return e.err.Error() }
func (e *policyError) Unwrap() error { return e.err }

// Refusal marks err, returned by a given Transport, as a refusal of the
// transport's own (a request it will not send): the client does not try
// it again.
func Refusal(err error) error { return &policyError{err} }

// backoff is the wait before retry attempt+1: the server's Retry-After when
// it sent one with 429 or 5xx, else exponential from lo to hi with jitter so
// that parallel downloads do not retry in lockstep.
func backoff(lo, hi time.Duration, attempt int, resp *http.Response, now time.Time) time.Duration {
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500) {
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), now); ok {
			return min(d, maxRetryAfter)
		}
	}
	d := hi
	if attempt < 30 && lo<<attempt > 0 && lo<<attempt < hi {
		d = lo << attempt
	}
	// Half fixed, half random: never below d/2, never above d.
	return d/2 + rand.N(d/2+1)
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP-date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		if s > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
