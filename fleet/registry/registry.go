// Package registry carries plans through OCI registries: it pushes a plan, with every archive and wheel it takes, as an artifact of content-addressed blobs, and brings one platform's share of it into a node's download cache.
//
// The shape of what it pushes to oci://HOST/REPO:TAG (docs/fleet.md):
//
//	TAG ─► image index (artifactType application/vnd.cudadeps.plan.v1)
//	         one entry per platform and target, with its OCI platform and
//	         annotations naming the target, platform and CUDA major
//	         ─► image manifest (artifactType application/vnd.cudadeps.plan.v1)
//	              config  the contents (what each blob is, and where a
//	                      directory mirror keeps it)
//	              layers  the plan (resolve --json), the catalog layer of
//	                      its archives, then each archive and wheel as the
//	                      blob of its own sha256 (the digest NVIDIA's
//	                      manifest or the index gives)
//
// A node pulls the entry for its platform: blobs go into the download
// cache of package fetch (verified, resumed, locked: fetched once per
// node), and a directory mirror of links to them is what apply reads.
package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	orasregistry "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/urlpolicy"
)

// Scheme starts every reference this package reads.
const Scheme = "oci://"

// IsReference reports whether s names a registry (oci://...).
func IsReference(s string) bool { return strings.HasPrefix(s, Scheme) }

// Reference names a repository of a registry, and in it a tag or a
// digest (or neither, for a mirror: blobs belong to the repository).
type Reference struct {
	Host       string // host[:port]
	Repository string
	Tag        string
	Digest     string // sha256:...
}

// ParseReference reads oci://HOST/REPOSITORY[:TAG|@sha256:DIGEST]; a
// trailing "/" (a mirror URL's) is allowed.
func ParseReference(s string) (Reference, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Reference{}, fmt.Errorf("%q is not an OCI reference: want oci://HOST/REPOSITORY:TAG", s)
	}
	ref, err := orasregistry.ParseReference(strings.TrimSuffix(rest, "/"))
	if err != nil {
		return Reference{}, fmt.Errorf("%s: %w (want oci://HOST/REPOSITORY[:TAG|@sha256:DIGEST])", s, err)
	}
	out := Reference{Host: ref.Registry, Repository: ref.Repository}
	if ref.Reference != "" {
		if d, err := ref.Digest(); err == nil {
			out.Digest = d.String()
		} else {
			out.Tag = ref.Reference
		}
	}
	return out, nil
}

func (r Reference) String() string {
	s := Scheme + r.Host + "/" + r.Repository
	switch {
	case r.Digest != "":
		s += "@" + r.Digest
	case r.Tag != "":
		s += ":" + r.Tag
	}
	return s
}

// Options configure Open.
type Options struct {
	// AllowHTTP lets a registry beyond loopback speak plain HTTP. A
	// loopback registry may always, and is asked over TLS first.
	AllowHTTP bool
	// RootCAs are the certificate authorities trusted; nil for the
	// system's, which SSL_CERT_FILE and SSL_CERT_DIR replace.
	RootCAs *x509.CertPool
	// DockerConfig is the directory whose config.json holds the logins
	// and credential helpers; "" for $DOCKER_CONFIG, else ~/.docker.
	DockerConfig string
	// Logger receives debug details; nil discards them.
	Logger *slog.Logger
}

// Remote is one repository of a registry, with the login and transport
// to reach it. It is safe for concurrent use.
type Remote struct {
	ref   Reference
	oref  orasregistry.Reference
	repo  *remote.Repository
	auth  *auth.Client
	base  *http.Transport // the registry's, under the guard
	other *http.Transport // for hosts the user names (a mirror's, NVIDIA's)
	guard *guard
	log   *slog.Logger

	mu    sync.Mutex
	ready bool // the scheme is known (repo.PlainHTTP set)
}

// Open prepares a Remote for ref; nothing is sent until it is used.
func Open(ref Reference, opts Options) (*Remote, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	oref := orasregistry.Reference{Registry: ref.Host, Repository: ref.Repository}
	if err := oref.ValidateRepository(); err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	cred, err := dockerCredentials(opts.DockerConfig, log)
	if err != nil {
		return nil, err
	}
	g := &guard{host: oref.Host(), allowHTTP: opts.AllowHTTP, realms: map[string]bool{}}
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           g.dialer(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}),
		TLSClientConfig:       &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Blobs are compressed already, and their digests are of the bytes
		// as stored.
		DisableCompression: true,
	}
	g.base = base
	other := base.Clone()
	other.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	r := &Remote{ref: ref, oref: oref, base: base, other: other, guard: g, log: log}
	r.auth = &auth.Client{
		// The guard keeps the login with the registry.
		Client: &http.Client{Transport: g, CheckRedirect: g.checkRedirect},
		Cache:  auth.NewCache(),
		Header: http.Header{"User-Agent": {"cudadeps"}},
		// The login is looked up by host only when the registry asks.
		Credential: cred,
	}
	r.repo = &remote.Repository{Client: r.auth, Reference: oref}
	return r, nil
}

// dockerCredentials reads logins as docker does: config.json of dir, of
// $DOCKER_CONFIG, or of ~/.docker, and the credential helpers it names
// (credsStore, credHelpers). No config file means no login; with no home
// directory either, the same.
func dockerCredentials(dir string, log *slog.Logger) (auth.CredentialFunc, error) {
	if dir == "" {
		dir = os.Getenv("DOCKER_CONFIG")
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			log.Debug("no home directory and no DOCKER_CONFIG: registries are asked without a login", "error", err)
			return nil, nil
		}
		dir = filepath.Join(home, ".docker")
	}
	file := filepath.Join(dir, "config.json")
	store, err := credentials.NewStore(file, credentials.StoreOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker config %s: %w", file, err)
	}
	return credentials.Credential(store), nil
}

// plainAllowed reports whether the registry may be reached over plain
// HTTP: on loopback, or where allowed.
func (r *Remote) plainAllowed() bool {
	return r.guard.allowHTTP || urlpolicy.IsLoopback(r.guard.registry().Hostname())
}

// prepare finds the scheme and checks the login, once: https, except
// that a registry that may speak plain HTTP and answers TLS with plain
// HTTP is spoken to in plain; then the registry's base endpoint (/v2/)
// through the login, so that a missing login or an untrusted certificate
// is said once, with what to do, before any blob is asked for.
func (r *Remote) prepare(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if r.plainAllowed() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.oref.Host()+"/v2/", nil)
		if err != nil {
			return err
		}
		probe := &http.Client{Transport: r.base, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := probe.Do(req)
		switch {
		case err == nil:
			resp.Body.Close()
		case errors.Is(err, http.ErrSchemeMismatch):
			r.log.Debug("the registry speaks plain HTTP", "host", r.ref.Host)
			r.repo.PlainHTTP = true
			r.guard.plain.Store(true)
		default:
			return r.explain(err)
		}
	}
	req, err := http.NewRequestWithContext(auth.AppendRepositoryScope(ctx, r.oref, auth.ActionPull), http.MethodGet, r.scheme()+"://"+r.oref.Host()+"/v2/", nil)
	if err != nil {
		return err
	}
	resp, err := r.auth.Do(req)
	if err != nil {
		return r.explain(err)
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return r.explain(&errcode.ErrorResponse{Method: req.Method, URL: req.URL, StatusCode: resp.StatusCode})
	default:
		return r.explain(fmt.Errorf("GET %s: %s: not an OCI registry's answer", req.URL.Redacted(), resp.Status))
	}
	r.ready = true
	return nil
}

// scheme is "http" or "https", once prepare has run.
func (r *Remote) scheme() string {
	if r.repo.PlainHTTP {
		return "http"
	}
	return "https"
}

// explain adds to a registry's error what to do about it. No credential is
// ever part of it.
func (r *Remote) explain(err error) error {
	var resp *errcode.ErrorResponse
	var unknownCA x509.UnknownAuthorityError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, auth.ErrBasicCredentialNotFound),
		errors.As(err, &resp) && resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%s: the registry asks for a login it was not given: run 'docker login %s' (or 'oras login'), or set DOCKER_CONFIG to a directory whose config.json holds one: %w", r.ref, r.ref.Host, err)
	case errors.As(err, &resp) && resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: the login is not allowed this: %w", r.ref, err)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("%s: %w (trust the registry's certificate authority: SSL_CERT_FILE=CA.pem)", r.ref, err)
	}
	return fmt.Errorf("%s: %w", r.ref, err)
}

// blobURL is where the registry serves the blob of digest d.
func (r *Remote) blobURL(d string) string {
	return r.scheme() + "://" + r.oref.Host() + "/v2/" + r.ref.Repository + "/blobs/" + d
}

// mirrorURL is the repository as a mirror URL ends: what Locate accepts,
// followed by any path.
func (r *Remote) mirrorURL() string {
	return Scheme + r.ref.Host + "/" + r.ref.Repository + "/"
}

// Locate is fetch.Options.Locate for this repository: an oci:// URL of it
// (any tag, any path after it) with a sha256 is the blob of that sha256.
func (r *Remote) Locate(ctx context.Context, rawURL, sha256 string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	p := strings.TrimPrefix(u.Path, "/")
	rest, ok := strings.CutPrefix(p, r.ref.Repository)
	if u.Scheme != "oci" || u.Host != r.ref.Host || !ok || rest != "" && !strings.ContainsRune(":@/", rune(rest[0])) {
		return "", fmt.Errorf("%s is not in the registry's repository %s", rawURL, r.mirrorURL())
	}
	if err := r.prepare(ctx); err != nil {
		return "", err
	}
	return r.blobURL("sha256:" + sha256), nil
}

// FetchOptions returns o with what a download client needs to fetch this
// repository's blobs: the transport, which logs in to the registry (and
// to no other host), and Locate.
func (r *Remote) FetchOptions(o fetch.Options) fetch.Options {
	o.Transport = loginTransport{r}
	o.Locate = r.Locate
	return o
}

// loginTransport sends requests for the registry through its login (and
// the guard), and others, to hosts the user named (the mirror or NVIDIA a
// push downloads from), as they are. A blob's redirect (to an object
// store) is followed inside the login client, under the guard.
type loginTransport struct{ r *Remote }

func (t loginTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.r.oref.Host() {
		return t.r.other.RoundTrip(req)
	}
	// The scope up front spares a bearer-token registry's challenge on
	// every blob.
	ctx := auth.AppendRepositoryScope(req.Context(), t.r.oref, auth.ActionPull)
	resp, err := t.r.auth.Do(req.WithContext(ctx))
	// Errors go back as they are, the download client telling by their
	// type which are worth another try; the guard's refusals are not.
	if rf := asRefusal(err); rf != nil {
		return nil, fetch.Refusal(rf)
	}
	return resp, err
}
