// Package pypi finds a project's wheel for this host on a Python package index (the PEP 503 and PEP 691 simple API) and installs it into the store.
//
// The index is the one the environment already uses: [PipIndexes] reads
// pip's configuration (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, pip.conf). A
// project's files are listed with [Client.Files], the wheel for the host is
// chosen by its tags with [Choose] (manylinux glibc level and machine), and
// [Client.Install] downloads it through the fetch package, verified by the
// sha256 the index gives, into a fetch.Store.
package pypi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/urlpolicy"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// File is one file of a project on an index.
type File struct {
	Filename string `json:"filename"`
	// URL is absolute, without the hash fragment.
	URL string `json:"url"`
	// SHA256 is the sha256 the index gives (lowercase hex), "" when none.
	SHA256 string `json:"sha256,omitempty"`
	// Size is the size the index gives (PEP 700), 0 when none.
	Size           int64  `json:"size,omitempty"`
	RequiresPython string `json:"requires_python,omitempty"`
	Yanked         bool   `json:"yanked,omitempty"`
	// CoreMetadata says whether the index serves the wheel's METADATA on
	// its own at URL+".metadata" (PEP 658, PEP 714): "" when not,
	// "sha256=HEX" with its hash, "true" without one.
	CoreMetadata string `json:"core_metadata,omitempty"`
	// Index is the index URL whose page lists the file, as configured
	// (credentials included, if it has any).
	Index string `json:"-"`
}

// Options configure a Client. The zero value is usable but for Indexes.
type Options struct {
	// Indexes are the simple index URLs to ask, in order (e.g.
	// https://pypi.org/simple/). See PipIndexes.
	Indexes []string
	// AllowHTTP permits plain http:// indexes on hosts other than loopback.
	AllowHTTP bool
	// Timeout bounds one request for an index page. Default 60 s.
	Timeout time.Duration
	// Logger receives debug details. Nil discards them.
	Logger *slog.Logger
}

// Client reads simple indexes. It is safe for concurrent use.
type Client struct {
	indexes   []string
	allowHTTP bool
	http      *http.Client
	log       *slog.Logger
}

// maxPage bounds an index page: the largest projects' pages on pypi.org
// take a few megabytes.
const maxPage = 64 << 20

// NewClient checks the index URLs and builds a Client.
func NewClient(opts Options) (*Client, error) {
	c := &Client{allowHTTP: opts.AllowHTTP, log: opts.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if len(opts.Indexes) == 0 {
		return nil, errors.New("no package index configured (set PIP_INDEX_URL or pass an index URL)")
	}
	for _, ix := range opts.Indexes {
		u, err := url.Parse(ix)
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", ix, err)
		}
		if err := urlpolicy.Check(u, c.allowHTTP, urlpolicy.Configured); err != nil {
			return nil, err
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		c.indexes = append(c.indexes, u.String())
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	c.http = &http.Client{
		Timeout:       timeout,
		Transport:     urlpolicy.Transport(),
		CheckRedirect: urlpolicy.CheckRedirect(c.allowHTTP),
	}
	return c, nil
}

// validName accepts PEP 508 project names only: they become URL paths.
var validName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// Media types of the simple API.
const (
	typeJSON = "application/vnd.pypi.simple.v1+json"
	typeHTML = "application/vnd.pypi.simple.v1+html"
)

// ErrNoProject is returned (wrapped) by Files when no index knows the project.
var ErrNoProject = errors.New("no such project on the index")

// Files lists the project's files on every index, in index order (pip
// merges its indexes the same way). An index that does not know the project
// (404) is skipped; other failures are errors.
func (c *Client) Files(ctx context.Context, project string) ([]File, error) {
	if !validName.MatchString(project) {
		return nil, fmt.Errorf("project name %q: not a valid Python project name", project)
	}
	var out []File
	found := false
	for _, ix := range c.indexes {
		files, err := c.page(ctx, ix+pymeta.NormalizeName(project)+"/")
		if errors.Is(err, ErrNoProject) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		for i := range files {
			files[i].Index = ix
		}
		out = append(out, files...)
	}
	if !found {
		return nil, fmt.Errorf("%s: %w (asked %s)", project, ErrNoProject, strings.Join(redactAll(c.indexes), ", "))
	}
	return out, nil
}

func redactAll(us []string) []string {
	out := make([]string, len(us))
	for i, s := range us {
		out[i] = urlpolicy.Redact(s)
	}
	return out
}

// page reads one project page, JSON or HTML as the server chooses.
func (c *Client) page(ctx context.Context, pageURL string) ([]File, error) {
	where := urlpolicy.Redact(pageURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, pageURL, nil)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", where, err)
	}
	req.Header.Set("Accept", typeJSON+", "+typeHTML+";q=0.2, text/html;q=0.01")
	req.Header.Set("User-Agent", "cudadeps")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", where, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, ErrNoProject
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("index %s: %s", where, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPage+1))
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", where, err)
	}
	if len(body) > maxPage {
		return nil, fmt.Errorf("index %s: the page is larger than %d bytes", where, maxPage)
	}
	base := resp.Request.URL
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var files []File
	switch mt {
	case typeJSON:
		files, err = parseJSON(body, base)
	case typeHTML, "text/html", "":
		files, err = parseHTML(body, base)
	default:
		err = fmt.Errorf("unexpected content type %q", mt)
	}
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", where, err)
	}
	return files, nil
}

// parseJSON reads a PEP 691 project page.
func parseJSON(body []byte, base *url.URL) ([]File, error) {
	var page struct {
		Meta struct {
			APIVersion string `json:"api-version"`
		} `json:"meta"`
		Files []struct {
			Filename       string            `json:"filename"`
			URL            string            `json:"url"`
			Hashes         map[string]string `json:"hashes"`
			RequiresPython *string           `json:"requires-python"`
			Yanked         json.RawMessage   `json:"yanked"`
			Size           *int64            `json:"size"`
			CoreMetadata   json.RawMessage   `json:"core-metadata"`
			DistInfoMeta   json.RawMessage   `json:"dist-info-metadata"`
		} `json:"files"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, err
	}
	if major, _, _ := strings.Cut(page.Meta.APIVersion, "."); major != "1" {
		return nil, fmt.Errorf("simple API version %q: this cudadeps reads 1.x", page.Meta.APIVersion)
	}
	var out []File
	for _, f := range page.Files {
		u, err := base.Parse(f.URL)
		if err != nil {
			return nil, fmt.Errorf("file %q: %w", f.Filename, err)
		}
		u.Fragment, u.RawFragment = "", ""
		file := File{Filename: f.Filename, URL: u.String(), SHA256: strings.ToLower(f.Hashes["sha256"])}
		if f.RequiresPython != nil {
			file.RequiresPython = *f.RequiresPython
		}
		// yanked is false, true, or a reason (a string: yanked).
		y := strings.TrimSpace(string(f.Yanked))
		file.Yanked = y != "" && y != "false" && y != "null"
		if f.Size != nil && *f.Size > 0 {
			file.Size = *f.Size
		}
		file.CoreMetadata = coreMetadataJSON(f.CoreMetadata)
		if file.CoreMetadata == "" {
			file.CoreMetadata = coreMetadataJSON(f.DistInfoMeta) // the name before PEP 714
		}
		out = append(out, file)
	}
	return out, nil
}

// withFragmentHash takes the sha256 from a PEP 503 URL fragment.
func withFragmentHash(f *File, u *url.URL) {
	if algo, sum, ok := strings.Cut(u.Fragment, "="); ok && algo == "sha256" {
		f.SHA256 = strings.ToLower(sum)
	}
	u.Fragment, u.RawFragment = "", ""
	f.URL = u.String()
}

// Install downloads the file through c, verified by the index's sha256,
// and installs it into s under key (as the fetch package installs a wheel:
// kept as laid out, Entry.Layout "wheel"). An index that does not give the
// file's size (HTML pages) is asked for it with a HEAD request.
func (c *Client) Install(ctx context.Context, s *fetch.Store, fc *fetch.Client, key fetch.Key, f File) (fetch.Entry, error) {
	f, err := c.Complete(ctx, f)
	if err != nil {
		return fetch.Entry{}, err
	}
	es, err := s.Install(ctx, fc, []fetch.Item{{Key: key, Request: fetch.Request{Name: f.Filename, URL: f.URL, SHA256: f.SHA256, Size: f.Size}}})
	if err != nil {
		return fetch.Entry{}, err
	}
	return es[0], nil
}

// Complete makes f ready to be downloaded and verified: it refuses a file
// the index gives no sha256 for, and asks the server for the size of one
// whose size the index does not give (HTML pages) with a HEAD request.
func (c *Client) Complete(ctx context.Context, f File) (File, error) {
	if len(f.SHA256) != 64 {
		return File{}, fmt.Errorf("%s: the index gives no sha256 for it: refused, since it could not be verified", f.Filename)
	}
	if f.Size <= 0 {
		n, err := c.size(ctx, f.URL)
		if err != nil {
			return File{}, fmt.Errorf("%s: %w", f.Filename, err)
		}
		f.Size = n
	}
	return f, nil
}

// size asks the server for a file's size.
func (c *Client) size(ctx context.Context, fileURL string) (int64, error) {
	u, err := url.Parse(fileURL)
	if err != nil {
		return 0, err
	}
	if err := urlpolicy.Check(u, c.allowHTTP, urlpolicy.Configured); err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, fileURL, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "cudadeps")
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("HEAD %s: %w", u.Redacted(), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HEAD %s: %s", u.Redacted(), resp.Status)
	}
	n, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("HEAD %s: no size given (Content-Length %q)", u.Redacted(), resp.Header.Get("Content-Length"))
	}
	return n, nil
}
