package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/internal/urlpolicy"
	"github.com/cudadeps/cudadeps/internal/workers"
)

// VerifyError says that an archive's bytes are not the ones asked for.
type VerifyError struct {
	URL        string
	WantSize   int64
	GotSize    int64
	WantSHA256 string
	GotSHA256  string // empty when the sizes differ
}

func (e *VerifyError) Error() string {
	if e.WantSize != e.GotSize {
		return fmt.Sprintf("verify %s: size mismatch: expected %d bytes, got %d", e.URL, e.WantSize, e.GotSize)
	}
	return fmt.Sprintf("verify %s: sha256 mismatch: expected %s, got %s", e.URL, e.WantSHA256, e.GotSHA256)
}

// permanentError ends a download at once: another try would get the same.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// sourceError marks a failure to read the archive's bytes (network, disk), as
// opposed to a failure of what consumed them.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// errStalled is the cause of a request cancelled by the stall watchdog.
var errStalled = errors.New("stalled")

// consumer reads an archive's bytes as they arrive (the extractor). It may
// stop reading early; closing r makes a read in progress return.
type consumer func(r io.ReadCloser) error

// Download brings the verified archive into the cache (keyed by sha256) and
// returns its path. A valid cached file costs no network at all; a damaged
// one is deleted and downloaded again. A partial file left by an interrupted
// run is resumed. A file:// URL is verified and its own path returned.
// Concurrent calls for one archive, in this process or others, download it
// once.
func (c *Client) Download(ctx context.Context, req Request) (string, error) {
	if err := req.validate(); err != nil {
		return "", err
	}
	prog := c.newProgress([]Request{req})
	tr := prog.track(req)
	p, err := c.produce(ctx, req, nil, tr)
	tr.done(err)
	prog.finish(err)
	return p, err
}

// NeedsDownload reports whether bringing the archive in would fetch bytes:
// not for a file:// URL (read in place), nor when the download cache
// holds a file of its size under its sha256, complete or a finished
// partial download (it is verified when used, and fetched again only if
// damaged).
func (c *Client) NeedsDownload(req Request) bool {
	if p := c.localPath(req); p != c.cachePath(req.SHA256) {
		return false
	}
	for _, p := range []string{c.cachePath(req.SHA256), c.cachePath(req.SHA256) + ".part"} {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Size() == req.Size {
			return false
		}
	}
	return true
}

// DownloadAll brings each request's verified archive into the cache as
// Download does, several at once (Options.Parallel) under one progress
// report, and returns their paths in the order asked. The error joins
// every request's that failed; the others' paths are still returned.
func (c *Client) DownloadAll(ctx context.Context, reqs []Request) ([]string, error) {
	for _, r := range reqs {
		if err := r.validate(); err != nil {
			return nil, err
		}
	}
	paths := make([]string, len(reqs))
	errs := make([]error, len(reqs))
	prog := c.newProgress(reqs)
	workers.Each(len(reqs), c.parallel, func(i int) {
		r := reqs[i]
		if err := ctx.Err(); err != nil {
			errs[i] = fmt.Errorf("download %s: %w", r.label(), err)
			return
		}
		tr := prog.track(r)
		paths[i], errs[i] = c.produce(ctx, r, nil, tr)
		tr.done(errs[i])
		if errs[i] != nil && !strings.Contains(errs[i].Error(), r.label()) {
			errs[i] = fmt.Errorf("%s: %w", r.label(), errs[i]) // which of several
		}
	})
	err := errors.Join(errs...)
	if serr := sweepLocks(filepath.Join(c.cacheDir, "archives")); serr != nil {
		c.log.Warn("could not sweep the download cache's lock files", "error", serr)
	}
	prog.finish(err)
	return paths, err
}

// Unpack downloads the archive (through the cache), verifies it and
// extracts it into destDir as Extract does, decompressing while the bytes
// arrive where the format allows. This is what a caller needs to read an
// archive's contents once, e.g. in a temporary directory.
func (c *Client) Unpack(ctx context.Context, req Request, destDir string) error {
	if err := req.validate(); err != nil {
		return err
	}
	prog := c.newProgress([]Request{req})
	tr := prog.track(req)
	err := intoNewDir(destDir, func(dir string) (extracted, error) {
		return c.fetchInto(ctx, req, dir, tr)
	})
	if abs, aerr := filepath.Abs(destDir); aerr == nil {
		err = spaceIn(err, filepath.Dir(abs))
	}
	tr.done(err)
	prog.finish(err)
	return err
}

// fetchInto brings the archive in and extracts it into dir (existing, empty).
// Formats that can be read as a stream are extracted while they download,
// and the result is thrown away if the bytes fail verification at the end.
// Zip needs the whole file; the pure-Go xz decoder only reads verified bytes.
func (c *Client) fetchInto(ctx context.Context, req Request, dir string, tr *tracker) (extracted, error) {
	res, err := c.fetchIntoOnce(ctx, req, dir, tr)
	var fault *archiveFault
	if errors.As(err, &fault) {
		// Verified bytes that extraction refuses would only be refused
		// again: the cache does not keep them (a file:// archive is the
		// user's own and stays).
		if cached := c.cachePath(req.SHA256); c.localPath(req) == cached {
			if rerr := os.Remove(cached); rerr == nil {
				c.log.Info("refused archive removed from the download cache", "name", req.label(), "path", cached)
			}
		}
	}
	var se *SpaceError
	if errors.As(err, &se) && se.Dir == dir {
		// The archive is kept in the cache, and what it needs is known now
		// where its format declares it: say that rather than which file
		// did not fit.
		if d, ok := declaredSize(c.localPath(req)); ok {
			free, ferr := freeSpace(filepath.Dir(dir))
			if ferr != nil {
				free = -1
			}
			return res, &SpaceError{Dir: dir, What: "the archive unpacks to", Need: d, Free: free}
		}
	}
	return res, err
}

func (c *Client) fetchIntoOnce(ctx context.Context, req Request, dir string, tr *tracker) (extracted, error) {
	var res extracted
	streamable := false
	switch formatOfName(req.URL) {
	case formatXZ:
		streamable = c.dec.xz != ""
	case formatGzip, formatTar, formatZstd:
		streamable = true
	}
	if streamable {
		// A copy on disk (cached, or a file URL) tells its size up front;
		// it may be damaged, but then verification fails and wins.
		size := archiveSize{compressed: req.Size, declared: -1}
		if d, ok := declaredSize(c.localPath(req)); ok {
			size.declared = d
		}
		consume := func(r io.ReadCloser) error {
			if err := resetDir(dir); err != nil {
				return err
			}
			var err error
			res, err = extractStream(ctx, r, dir, c.lim, c.dec, req.label(), size)
			return err
		}
		_, err := c.produce(ctx, req, consume, tr)
		return res, err
	}
	p, err := c.produce(ctx, req, nil, tr)
	if err != nil {
		return res, err
	}
	if err := resetDir(dir); err != nil {
		return res, err
	}
	return extractFile(ctx, p, dir, c.lim, c.dec, req.label())
}

// localPath is where the archive is, or will be, on this machine: the
// file:// path or the cache's file.
func (c *Client) localPath(req Request) string {
	if u, err := url.Parse(req.URL); err == nil && u.Scheme == "file" {
		if p, err := fileURLPath(u); err == nil {
			return p
		}
	}
	return c.cachePath(req.SHA256)
}

// resetDir empties dir: a consumer may run more than once (a damaged cache
// file, a download restarted from zero).
func resetDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Mkdir(dir, 0o755)
}

func (c *Client) cachePath(sha string) string {
	return filepath.Join(c.cacheDir, "archives", sha)
}

// produce runs the archive's bytes through consume (nil: none) as they become
// available, verifies size and sha256, and returns the verified file's path.
func (c *Client) produce(ctx context.Context, req Request, consume consumer, tr *tracker) (string, error) {
	u, err := url.Parse(req.URL)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", req.URL, err)
	}
	if u.Scheme == "file" {
		p, err := fileURLPath(u)
		if err != nil {
			return "", err
		}
		tr.start(false)
		return p, c.fromFile(ctx, req, p, consume, tr)
	}
	if u.Scheme != "https" && u.Scheme != "http" && c.locate != nil {
		// Content-addressed: the bytes of this sha256, wherever they lie.
		loc, err := c.locate(ctx, req.URL, req.SHA256)
		if err != nil {
			return "", fmt.Errorf("download %s: %w", req.label(), err)
		}
		if u, err = url.Parse(loc); err != nil {
			return "", fmt.Errorf("download %s: %w", req.label(), err)
		}
		req.URL = loc
	}
	if err := urlpolicy.Check(u, c.allowHTTP, urlpolicy.Configured); err != nil {
		return "", err
	}
	cached := c.cachePath(req.SHA256)
	if ok, err := c.fromCache(ctx, req, cached, consume, tr); ok || err != nil {
		return cached, err
	}
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		return "", fmt.Errorf("download cache: %w", err)
	}
	unlock, err := lockFile(ctx, cached+".lock", c.log, "download of "+req.label())
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have finished it while we waited for the lock.
	if ok, err := c.fromCache(ctx, req, cached, consume, tr); ok || err != nil {
		return cached, err
	}
	for attempt := 0; ; attempt++ {
		resumed, err := c.download(ctx, req, cached, consume, tr)
		var ve *VerifyError
		var re *refusedError
		if err != nil && (errors.As(err, &ve) || errors.As(err, &re)) && resumed && attempt == 0 {
			// Resuming trusts that the bytes on disk and the server's agree;
			// a resumed download that fails its checks, or that the
			// extractor refuses before it could be verified, may be two
			// halves that do not belong together. One clean download from
			// the start settles it.
			c.log.Warn("resumed download failed its checks; downloading it again from the start", "name", req.label(), "error", err)
			tr.set(0)
			continue
		}
		if errors.As(err, &re) {
			err = re.err
		}
		if err != nil {
			return "", err
		}
		return cached, nil
	}
}

// refusedError is a consumer's refusal of bytes that were never verified.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// fromCache uses a cached archive when there is one. ok reports that it was
// used; a damaged one is deleted so that the caller downloads it again.
func (c *Client) fromCache(ctx context.Context, req Request, cached string, consume consumer, tr *tracker) (ok bool, err error) {
	if _, err := os.Lstat(cached); regfile.Absent(err) {
		return false, nil
	}
	tr.start(false)
	err = c.fromFile(ctx, req, cached, consume, tr)
	var ve *VerifyError
	if errors.As(err, &ve) {
		c.log.Warn("cached archive is damaged; deleting it and downloading again", "path", cached, "error", err)
		if rerr := os.Remove(cached); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return false, fmt.Errorf("remove damaged cached archive: %w", rerr)
		}
		tr.set(0)
		return false, nil
	}
	return err == nil, err
}

func fileURLPath(u *url.URL) (string, error) {
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("%s: a file URL must name a local path (file:///...)", u.Redacted())
	}
	if !filepath.IsAbs(u.Path) {
		return "", fmt.Errorf("%s: a file URL needs an absolute path", u.Redacted())
	}
	return filepath.Clean(u.Path), nil
}

// fromFile verifies a local archive while consume reads it. A consumer that
// fails on a local file does not stop the hashing: a damaged file is then
// reported as such (and can be fetched again) rather than as a broken archive.
func (c *Client) fromFile(ctx context.Context, req Request, p string, consume consumer, tr *tracker) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("open archive: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open archive: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", p)
	}
	if fi.Size() != req.Size {
		return &VerifyError{URL: req.URL, WantSize: req.Size, GotSize: fi.Size(), WantSHA256: req.SHA256}
	}
	open := func(ctx context.Context) io.Reader { return &ctxReader{ctx: ctx, r: f} }
	_, err = c.runSource(ctx, req, open, consume, tr, true)
	return err
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// download fetches the archive into cached+".part" (resuming what an earlier
// run left there) while consume reads the same bytes back from the file as
// it grows, then renames the verified file into the cache. resumed reports
// that bytes from before a break were kept. A verified file is kept even
// when the consumer failed (a full prefix): the next run needs no download.
// A file that cannot be completed (a full cache) is deleted.
func (c *Client) download(ctx context.Context, req Request, cached string, consume consumer, tr *tracker) (resumed bool, err error) {
	part, meta := cached+".part", cached+".part.json"
	f, have, err := c.openPart(req, part, meta)
	if err != nil {
		return false, err
	}
	defer f.Close()
	tr.resume(have)
	tr.start(true)
	g := newGrowth(have)
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ranged bool
	tdone := make(chan error, 1)
	go func() {
		err := c.transfer(tctx, req, f, meta, g, &ranged)
		g.finish(err)
		if tctx.Err() != nil {
			err = nil // stopped by us, not a failure of its own
		}
		tdone <- err
	}()
	open := func(ctx context.Context) io.Reader { return &followReader{ctx: ctx, f: f, g: g} }
	verified, err := c.runSource(ctx, req, open, consume, tr, false)
	cancel()
	terr := <-tdone
	return have > 0 || ranged, c.settle(ctx, req, f, cached, verified, err, terr)
}

// openPart opens the partial download (a new one, or what an earlier run
// left: have bytes of it), refusing at once a download the cache has no
// room for.
func (c *Client) openPart(req Request, part, meta string) (f *os.File, have int64, err error) {
	f, err = os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, c.cacheError(req, part, 0, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() > req.Size {
		err = f.Truncate(0)
	} else if err == nil {
		have = fi.Size()
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("download cache: %w", err)
	}
	if free, err := freeSpace(filepath.Dir(part)); err == nil && blockSize(req.Size-have) > free {
		f.Close()
		removeFiles(part, meta)
		return nil, 0, &SpaceError{Dir: c.cacheDir, What: "the download of " + req.label() + " needs", Need: req.Size, Free: free + blockSize(have)}
	}
	if have > 0 {
		c.log.Info("resuming a partial download", "name", req.label(), "have", have, "size", req.Size)
	}
	return f, have, nil
}

// settle decides what becomes of the partial download once the transfer
// (terr) and the consumer (err) are done: verified, it enters the cache;
// refused or proved wrong, it goes; interrupted, it stays for the next run.
func (c *Client) settle(ctx context.Context, req Request, f *os.File, cached string, verified bool, err, terr error) error {
	part, meta := cached+".part", cached+".part.json"
	var ve *VerifyError
	switch {
	case verified:
		if rerr := os.Rename(part, cached); rerr != nil {
			return fmt.Errorf("download cache: %w", rerr)
		}
		os.Remove(meta)
		return err
	case errors.As(err, &ve):
		removeFiles(part, meta)
		return fmt.Errorf("%w (download deleted)", err)
	case terr != nil && isNoSpace(terr):
		// What cannot be completed only keeps the file system full. The
		// room it held is free once it is gone (it is still open here):
		// count it as free.
		var held int64
		if fi, err := f.Stat(); err == nil {
			held = blockSize(fi.Size())
		}
		removeFiles(part, meta)
		return c.cacheError(req, part, held, terr)
	case terr != nil:
		// The network failed: keep what arrived for the next run.
		if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
			removeFiles(part, meta)
		}
		return terr
	case ctx.Err() != nil:
		return fmt.Errorf("download %s: %w", req.label(), ctx.Err())
	case errors.Is(err, errDecoderStopped):
		// Interrupted, not refused: keep what arrived for the next run.
		return err
	default:
		// The consumer refused the bytes before they could be verified:
		// do not resume from them.
		removeFiles(part, meta)
		return &refusedError{err}
	}
}

// cacheError explains a write to the cache that failed; a full file system
// says how much the archive needs, and how much is free once the bytes
// freed (our own deleted partial file) are counted.
func (c *Client) cacheError(req Request, part string, freed int64, err error) error {
	if !isNoSpace(err) {
		return fmt.Errorf("download cache: %w", err)
	}
	free, ferr := freeSpace(filepath.Dir(part))
	if ferr != nil {
		free = -1
	} else {
		free += freed
	}
	return &SpaceError{Dir: c.cacheDir, What: "the download of " + req.label() + " needs", Need: req.Size, Free: free}
}

func removeFiles(paths ...string) {
	for _, p := range paths {
		os.Remove(p)
	}
}

// runSource reads the archive once from the reader open returns, hashing it
// and handing it to consume (if any) through a pipe, then checks size and
// sha256. A consumer that stops early is fine: the rest is still hashed.
// verified reports that all the bytes arrived and match; err is then the
// consumer's error, if any.
func (c *Client) runSource(ctx context.Context, req Request, open func(context.Context) io.Reader, consume consumer, tr *tracker, local bool) (verified bool, err error) {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	src := open(sctx)
	h := sha256.New()
	var pr *io.PipeReader
	var pw *io.PipeWriter
	if consume != nil {
		pr, pw = io.Pipe()
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := pump(src, req.Size, h, pw, tr)
		done <- result{n, err}
	}()
	var cerr error
	if consume != nil {
		cerr = consume(pr)
		pr.CloseWithError(errors.New("consumer finished"))
		// No need to download the rest of an archive that was refused; but
		// one that did not fit in its destination is worth keeping, and a
		// local file is hashed to tell damage from a bad archive.
		if cerr != nil && !local && !isNoSpace(cerr) {
			stop()
		}
	}
	res := <-done
	var se *sourceError
	switch {
	case errors.As(cerr, &se):
		return false, se.err
	case res.err != nil && cerr != nil:
		return false, cerr
	case res.err != nil:
		return false, res.err
	}
	if got := hex.EncodeToString(h.Sum(nil)); res.n != req.Size || got != req.SHA256 {
		ve := &VerifyError{URL: req.URL, WantSize: req.Size, GotSize: res.n, WantSHA256: req.SHA256}
		if res.n == req.Size {
			ve.GotSHA256 = got
		}
		return false, ve
	}
	return true, cerr
}

// pump copies src into the hash and, while the consumer reads, into pw.
func pump(src io.Reader, size int64, h hash.Hash, pw *io.PipeWriter, tr *tracker) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	deliver := pw != nil
	for {
		m, err := src.Read(buf)
		if m > 0 {
			if n+int64(m) > size {
				err = fmt.Errorf("more than the expected %d bytes", size)
				m = int(size - n)
			}
			h.Write(buf[:m])
			n += int64(m)
			tr.set(n)
			if deliver {
				if _, werr := pw.Write(buf[:m]); werr != nil {
					deliver = false // the consumer has what it needs
				}
			}
		}
		if err == io.EOF {
			if pw != nil {
				pw.Close()
			}
			return n, nil
		}
		if err != nil {
			if pw != nil {
				pw.CloseWithError(&sourceError{err})
			}
			return n, err
		}
	}
}

// growth tracks how much of a file being downloaded is on disk, so that a
// reader can follow it: the consumer never waits on the network directly and
// the network never waits on a slow consumer.
type growth struct {
	mu   sync.Mutex
	n    int64
	done bool
	err  error
	wake chan struct{} // closed and replaced at every change
}

func newGrowth(n int64) *growth { return &growth{n: n, wake: make(chan struct{})} }

func (g *growth) advance(d int64) {
	g.mu.Lock()
	g.n += d
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

func (g *growth) finish(err error) {
	g.mu.Lock()
	g.done, g.err = true, err
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

func (g *growth) size() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// wait returns once more than off bytes exist, or the transfer has ended
// (with io.EOF when it succeeded).
func (g *growth) wait(ctx context.Context, off int64) (int64, error) {
	for {
		g.mu.Lock()
		n, done, err, wake := g.n, g.done, g.err, g.wake
		g.mu.Unlock()
		if n > off {
			return n, nil
		}
		if done {
			if err == nil {
				err = io.EOF
			}
			return n, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
}

// followReader reads a file that a transfer is still writing.
type followReader struct {
	ctx context.Context
	f   *os.File
	g   *growth
	off int64
}

func (r *followReader) Read(p []byte) (int, error) {
	n, err := r.g.wait(r.ctx, r.off)
	if n <= r.off {
		return 0, err
	}
	m, err := r.f.ReadAt(p[:min(int64(len(p)), n-r.off)], r.off)
	r.off += int64(m)
	if err == io.EOF && m > 0 {
		err = nil
	}
	return m, err
}

// validator identifies the version of a resource a partial file holds, for
// If-Range. Only a strong ETag or a Last-Modified date qualifies.
type validator struct {
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
}

func validatorOf(u string, resp *http.Response) validator {
	v := validator{URL: u}
	if et := resp.Header.Get("ETag"); et != "" && !strings.HasPrefix(et, "W/") {
		v.ETag = et
	} else {
		v.LastModified = resp.Header.Get("Last-Modified")
	}
	return v
}

func (v validator) ifRange() string {
	if v.ETag != "" {
		return v.ETag
	}
	return v.LastModified
}

func readValidator(path, u string) validator {
	var v validator
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &v) != nil || v.URL != u {
		return validator{}
	}
	return v
}

func writeValidator(path string, v validator) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// transfer downloads the bytes f lacks, reporting each write to g. A body
// that breaks resumes with Range from where it stopped; a break without any
// progress counts against the retry budget, so a flaky link that keeps
// delivering never gives up while a dead one does.
func (c *Client) transfer(ctx context.Context, req Request, f *os.File, meta string, g *growth, ranged *bool) error {
	have := g.size()
	val := readValidator(meta, req.URL)
	failures := 0
	for have < req.Size {
		if have > 0 {
			*ranged = true
		}
		n, next, err := c.fetchFrom(ctx, req, f, have, val, g)
		have += n
		if next != val {
			val = next
			if werr := writeValidator(meta, val); werr != nil {
				c.log.Debug("cannot save the resume validator", "path", meta, "error", werr)
			}
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("download %s: %w", req.label(), ctx.Err())
		}
		var pe *permanentError
		if errors.As(err, &pe) {
			return pe.err
		}
		if n > 0 {
			failures = 0
		} else {
			failures++
		}
		if failures > c.retries {
			return fmt.Errorf("%w (giving up after %s without progress)", err, attempts(failures))
		}
		wait := backoff(c.waitMin, c.waitMax, failures, nil, time.Now())
		c.log.Warn("download interrupted; resuming", "name", req.label(), "at", have, "size", req.Size, "reason", err, "attempt", fmt.Sprintf("%d/%d", failures+1, c.retries+1), "retry_in", wait)
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("download %s: %w", req.label(), err)
		}
	}
	return nil
}

// fetchFrom makes one request for the bytes from off on and writes what the
// body delivers to f. It returns how many bytes it wrote and the response's
// validator. Errors wrapped in permanentError end the download.
func (c *Client) fetchFrom(ctx context.Context, req Request, f *os.File, off int64, val validator, g *growth) (int64, validator, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	resp, err := c.requestFrom(rctx, req, off, val)
	if err != nil {
		return 0, val, err
	}
	defer resp.Body.Close()
	// The validator describes the bytes on disk: a 200 starts them anew, a
	// 206 continues them (and may name them when nothing did yet).
	next := val
	if resp.StatusCode == http.StatusOK || (resp.StatusCode == http.StatusPartialContent && val.ifRange() == "") {
		next = validatorOf(req.URL, resp)
	}
	body := newStallReader(resp.Body, c.stall, func() { cancel(errStalled) })
	defer body.stop()
	if err := c.checkAnswer(rctx, req, resp, body, off); err != nil {
		return 0, next, err
	}
	n, err := c.copyBody(rctx, req, resp, body, f, off, g)
	return n, next, err
}

// requestFrom asks for the archive's bytes from off on (with If-Range, so
// that a changed file comes whole). The client has already retried what
// was worth retrying: its errors are permanent.
func (c *Client) requestFrom(ctx context.Context, req Request, off int64, val validator) (*http.Response, error) {
	where := urlpolicy.Redact(req.URL)
	hreq, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	if err != nil {
		return nil, &permanentError{fmt.Errorf("download %s: %w", where, err)}
	}
	hreq.Header.Set("User-Agent", "cudadeps")
	if off > 0 {
		hreq.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-")
		if v := val.ifRange(); v != "" {
			hreq.Header.Set("If-Range", v)
		}
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		var se *StatusError
		if !errors.As(err, &se) {
			err = fmt.Errorf("download %s: %w", where, err)
		}
		return nil, &permanentError{err}
	}
	return resp, nil
}

// checkAnswer accepts a 206 for exactly the bytes asked for, or a 200 of
// the archive's size (whose first off bytes, already on disk, it skips).
func (c *Client) checkAnswer(rctx context.Context, req Request, resp *http.Response, body io.Reader, off int64) error {
	where := urlpolicy.Redact(req.URL)
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		switch {
		case err != nil:
			return &permanentError{fmt.Errorf("download %s: %w", where, err)}
		case total >= 0 && total != req.Size:
			return &permanentError{&VerifyError{URL: req.URL, WantSize: req.Size, GotSize: total}}
		case start != off:
			return &permanentError{fmt.Errorf("download %s: asked for bytes from %d on, the server sent them from %d", where, off, start)}
		}
		return nil
	case http.StatusOK:
		if resp.ContentLength >= 0 && resp.ContentLength != req.Size {
			return &permanentError{&VerifyError{URL: req.URL, WantSize: req.Size, GotSize: resp.ContentLength}}
		}
		if off > 0 {
			// The server ignored Range (or its validator changed): the body
			// starts at byte 0. Skip what we have; the sha256 check at the
			// end tells whether the two halves belong together.
			c.log.Info("server ignored the range request; reading its answer from the start", "name", req.label(), "skip", off)
			if _, err := io.CopyN(io.Discard, body, off); err != nil {
				return c.bodyError(rctx, where, err)
			}
		}
		return nil
	}
	return &permanentError{&StatusError{URL: where, Status: resp.Status, Code: resp.StatusCode, Tries: 1}}
}

// copyBody writes the body to f from off on, reporting each write to g,
// and refuses a body longer than the archive.
func (c *Client) copyBody(rctx context.Context, req Request, resp *http.Response, body io.Reader, f *os.File, off int64, g *growth) (int64, error) {
	where := urlpolicy.Redact(req.URL)
	want := req.Size - off
	buf := make([]byte, 256<<10)
	var n int64
	for n < want {
		m, err := body.Read(buf[:min(int64(len(buf)), want-n)])
		if m > 0 {
			if _, werr := f.WriteAt(buf[:m], off+n); werr != nil {
				return n, &permanentError{fmt.Errorf("download cache: %w", werr)}
			}
			n += int64(m)
			g.advance(int64(m))
		}
		if err == io.EOF && n < want {
			err = fmt.Errorf("body ended after %d of %d bytes: %w", off+n, req.Size, io.ErrUnexpectedEOF)
		}
		if err != nil && err != io.EOF {
			return n, c.bodyError(rctx, where, err)
		}
		if err == io.EOF {
			break
		}
	}
	if resp.ContentLength < 0 {
		// No declared length: a body longer than the archive is a wrong file.
		if m, _ := body.Read(buf[:1]); m > 0 {
			return n, &permanentError{fmt.Errorf("download %s: the server sent more than the expected %d bytes", where, req.Size)}
		}
	}
	return n, nil
}

func (c *Client) bodyError(rctx context.Context, where string, err error) error {
	if errors.Is(context.Cause(rctx), errStalled) {
		return fmt.Errorf("download %s: no data for %s", where, c.stall)
	}
	return fmt.Errorf("download %s: %w", where, err)
}

// stallReader cancels the request when one Read waits longer than d. Only
// time spent waiting for the network counts, never time the consumer takes.
type stallReader struct {
	r io.Reader
	d time.Duration
	t *time.Timer
}

func newStallReader(r io.Reader, d time.Duration, fire func()) *stallReader {
	t := time.AfterFunc(d, fire)
	t.Stop()
	return &stallReader{r: r, d: d, t: t}
}

func (s *stallReader) Read(p []byte) (int, error) {
	s.t.Reset(s.d)
	n, err := s.r.Read(p)
	s.t.Stop()
	return n, err
}

func (s *stallReader) stop() { s.t.Stop() }

// parseContentRange reads "bytes START-END/TOTAL" (TOTAL may be "*": -1).
func parseContentRange(v string) (start, total int64, err error) {
	bad := fmt.Errorf("malformed Content-Range %q", v)
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, 0, bad
	}
	span, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, bad
	}
	first, last, ok := strings.Cut(span, "-")
	if !ok {
		return 0, 0, bad
	}
	start, err1 := strconv.ParseInt(strings.TrimSpace(first), 10, 64)
	end, err2 := strconv.ParseInt(strings.TrimSpace(last), 10, 64)
	if err1 != nil || err2 != nil || start < 0 || end < start {
		return 0, 0, bad
	}
	total = -1
	if tot = strings.TrimSpace(tot); tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total <= end {
			return 0, 0, bad
		}
	}
	return start, total, nil
}
