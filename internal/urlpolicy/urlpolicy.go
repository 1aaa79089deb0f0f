// Package urlpolicy decides which URLs cudadeps may read (https anywhere, plain http to loopback or when allowed, file:// where a local path was configured) and how a URL is shown without its credentials.
package urlpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Source says where a URL came from, which decides whether file:// is
// allowed: a mirror or index the user configured may be a local
// directory; a URL a server handed us (a redirect, a link on a page it
// served over the network) may not point into this machine's files.
type Source int

const (
	// Configured is a URL the user named (a mirror, an index, a file:// path).
	Configured Source = iota
	// Remote is a URL a server sent: a redirect target.
	Remote
)

// Check enforces the policy on u: https anywhere; plain http to a loopback
// host, or anywhere when allowHTTP; file:// only when src is Configured.
func Check(u *url.URL, allowHTTP bool, src Source) error {
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if allowHTTP || IsLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%s: plain http is refused for hosts other than loopback (use https, or pass --allow-http)", u.Redacted())
	case "file":
		if src == Configured {
			return nil
		}
		return fmt.Errorf("%s: a server may not send us to a local file", u.Redacted())
	}
	return fmt.Errorf("%s: unsupported URL scheme %q (want https, http or file)", u.Redacted(), u.Scheme)
}

// IsLoopback reports whether host (a name or an IP literal, without port)
// is this machine: "localhost" or a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Redact is s with the password of its user info hidden (an index or
// mirror URL may carry a token); s itself when it does not parse.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// CheckRedirect is an http.Client's CheckRedirect under the policy: at most
// ten redirects, each to a URL Check allows from a server. A local
// directory's own redirect (file:///d to file:///d/) stays local and is
// followed.
func CheckRedirect(allowHTTP bool) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		src := Remote
		if via[len(via)-1].URL.Scheme == "file" {
			src = Configured
		}
		return Check(req.URL, allowHTTP, src)
	}
}

// Transport fetches https and http through the environment's proxy, and
// file:// URLs from the local file system, so that a mirror or index
// written to a shared directory is read in place: a directory reads as a
// page that links its entries (or as its index.html), a missing file as 404.
func Transport() *http.Transport {
	t := &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext}
	t.RegisterProtocol("file", http.NewFileTransport(http.Dir("/")))
	return t
}
