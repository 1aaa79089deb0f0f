package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/urlpolicy"
)

// guard is the transport and the redirect policy under oras-go's login
// client (auth.Client). It keeps the registry's login with the registry:
// oras-go v2.6.0 lacks the checks its later releases add, and those
// declare a go line above ours (docs/fleet.md, "The credential guard").
//
//   - A credential (an Authorization header, a token request's body) goes
//     to the registry's own origin (scheme, host, port), or to a token
//     service (realm) the registry named that passed checkRealm; a redirect
//     to any other origin loses its Authorization header.
//   - Off the registry's origin a request is a read (GET, HEAD), unless it
//     is a token request: an upload the registry places elsewhere is
//     refused.
//   - A login challenge from another origin (where a redirect led) is
//     refused: oras-go would answer it with the registry's login.
//   - No request goes to an IP literal in a range where the request itself
//     does harm (refusedAddress), and no connection is made to a link-local
//     or unspecified address, however it was named.
type guard struct {
	base      http.RoundTripper
	host      string // the registry's host[:port], as the reference names it
	allowHTTP bool
	plain     atomic.Bool // the registry is spoken to in plain HTTP

	mu     sync.Mutex
	realms map[string]bool // token services (origin and path) that passed checkRealm
}

// refusal is a request the guard does not send, or an answer it does not
// pass on. Its message names origins and paths, never a credential.
type refusal struct{ msg string }

func (e *refusal) Error() string { return e.msg }

func refuse(format string, args ...any) error {
	return &refusal{fmt.Sprintf(format, args...)}
}

// origin is scheme://host:port with the port made explicit and the host
// in lower case, so that https://Registry and https://registry:443 are one
// origin and https://registry:5001 another.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// registry is the registry's own URL, its scheme as prepare found it.
func (g *guard) registry() *url.URL {
	scheme := "https"
	if g.plain.Load() {
		scheme = "http"
	}
	return &url.URL{Scheme: scheme, Host: g.host}
}

// endpoint names a token service: its origin and path.
func endpoint(u *url.URL) string { return origin(u) + u.EscapedPath() }

func (g *guard) isRealm(u *url.URL) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.realms[endpoint(u)]
}

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	reg := g.registry()
	to := origin(req.URL)
	home := to == origin(reg)
	if !home {
		if err := g.checkAway(req, reg); err != nil {
			return nil, err
		}
	}
	resp, err := g.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	challenge := resp.Header.Get("Www-Authenticate")
	switch {
	case challenge == "":
		return resp, nil
	case !home && g.isRealm(req.URL):
		// The token service refuses the login: the caller says so.
		return resp, nil
	case !home:
		resp.Body.Close()
		return nil, refuse("%s, where a request for the registry %s was sent, asks for a login: refused (the login goes to the registry and its token service alone)", to, origin(reg))
	}
	scheme, params := parseChallenge(challenge)
	if scheme != "bearer" {
		return resp, nil
	}
	if len(params["realm"]) == 0 {
		resp.Body.Close()
		return nil, refuse("the registry %s asks for a bearer token and names no token service (realm)", origin(reg))
	}
	var vetted []string
	for _, realm := range params["realm"] {
		u, err := checkRealm(realm, reg)
		if err != nil {
			resp.Body.Close()
			return nil, err
		}
		vetted = append(vetted, endpoint(u))
	}
	g.mu.Lock()
	for _, e := range vetted {
		g.realms[e] = true
	}
	g.mu.Unlock()
	return resp, nil
}

// checkAway holds a request to another origin than the registry's: a read
// a redirect leads to, without a credential; or a request to a token
// service that passed checkRealm.
func (g *guard) checkAway(req *http.Request, reg *url.URL) error {
	to := origin(req.URL)
	if why := refusedAddress(req.URL.Hostname(), reg.Hostname()); why != "" {
		return refuse("a request for the registry %s led to %s, %s: refused", origin(reg), to, why)
	}
	if g.isRealm(req.URL) && (req.Method == http.MethodGet || req.Method == http.MethodPost) {
		return nil
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return refuse("the registry %s sent a %s to %s, another origin: refused (uploads and the login go to the registry alone)", origin(reg), req.Method, to)
	}
	if req.Header.Get("Authorization") != "" {
		return refuse("a request to %s would carry the login for the registry %s: refused", to, origin(reg))
	}
	return nil
}

// checkRedirect is the redirect policy: at most 10, to https (plain http
// only to loopback, or where allowed), and a redirect to another origin
// than the registry's loses its Authorization header (Go's client keeps it
// across ports and schemes of one host name, and to its subdomains).
func (g *guard) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return refuse("stopped after 10 redirects")
	}
	if err := urlpolicy.Check(req.URL, g.allowHTTP, urlpolicy.Remote); err != nil {
		return &refusal{err.Error()}
	}
	if origin(req.URL) != origin(g.registry()) {
		req.Header.Del("Authorization")
	}
	return nil
}

// checkRealm reads the token service (realm) of the registry's bearer
// challenge, and refuses one that the login must not reach:
//
//   - not an absolute http or https URL, or one with a user name in it;
//   - plain http while the registry is reached over https: the login and
//     the token would travel in clear;
//   - an IP literal that refusedAddress refuses.
//
// A token service on another DNS name is allowed (Docker Hub's registry
// sends logins to auth.docker.io): the login sent there is the one for
// this registry, which the registry could ask for itself with a basic
// challenge, so the name leaks nothing more; the name is not resolved
// here, and dialControl refuses the addresses a name must not lead to.
func checkRealm(realm string, reg *url.URL) (*url.URL, error) {
	u, err := url.Parse(realm)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return nil, refuse("the registry %s names %q as its token service, not an absolute URL: refused", origin(reg), realm)
	}
	if u.User != nil {
		return nil, refuse("the registry %s names %s as its token service, with a user name in it: refused", origin(reg), u.Redacted())
	}
	shown := u.Redacted()
	switch u.Scheme {
	case "https":
	case "http":
		if reg.Scheme == "https" {
			return nil, refuse("the registry %s names %s as its token service, plain http while the registry is reached over https: refused (the login would travel in clear)", origin(reg), shown)
		}
	default:
		return nil, refuse("the registry %s names %s as its token service, neither https nor http: refused", origin(reg), shown)
	}
	if why := refusedAddress(u.Hostname(), reg.Hostname()); why != "" {
		return nil, refuse("the registry %s names %s as its token service, %s: refused", origin(reg), shown, why)
	}
	return u, nil
}

// refusedAddress says why no request goes to host when it is an IP
// literal where a request does harm by itself: link-local (the metadata
// services of clouds answer on 169.254.169.254 and fe80::/10, with
// credentials of their own), unspecified (0.0.0.0 and :: reach this
// machine), loopback (this machine's services) unless the registry itself
// is on loopback. "" when it may, and for a DNS name.
func refusedAddress(host, registryHost string) string {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return ""
	}
	ip = ip.Unmap()
	switch {
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "a link-local address (where cloud metadata services answer)"
	case ip.IsUnspecified():
		return "the unspecified address"
	case ip.IsLoopback() && !urlpolicy.IsLoopback(registryHost):
		return "a loopback address, and the registry is not on loopback"
	}
	return ""
}

// dialControl refuses a connection to a link-local or unspecified address
// (unless the registry is named by that very address), however the host
// was named: a DNS name of a token service or of a redirect that leads
// there is refused as its IP literal would be.
func (g *guard) dialControl(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return nil
	}
	ip = ip.Unmap()
	if !ip.IsLinkLocalUnicast() && !ip.IsLinkLocalMulticast() && !ip.IsUnspecified() {
		return nil
	}
	if reg, err := netip.ParseAddr(g.registry().Hostname()); err == nil && reg.Unmap() == ip {
		return nil
	}
	return refuse("a connection to %s, a link-local or unspecified address: refused", address)
}

// dialer is net.Dialer's DialContext with dialControl.
func (g *guard) dialer(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	d.Control = g.dialControl
	return d.DialContext
}

// parseChallenge reads a WWW-Authenticate challenge: its scheme in lower
// case and its parameters, every value of each (a parameter named twice
// has both checked). Names are compared in lower case and quoted values
// unquoted as oras-go unquotes them (strconv), so that the realm checked
// is the one it uses; the guard's hold on requests does not depend on it.
func parseChallenge(h string) (string, map[string][]string) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	params := map[string][]string{}
	for {
		rest = strings.TrimLeft(rest, " \t,")
		name, after, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		name = strings.ToLower(strings.TrimSpace(name))
		after = strings.TrimLeft(after, " \t")
		var value string
		if strings.HasPrefix(after, `"`) {
			quoted, err := strconv.QuotedPrefix(after)
			if err != nil {
				// Unterminated: the rest is the value, as far as anyone
				// could read it.
				value, rest = after[1:], ""
			} else {
				value, _ = strconv.Unquote(quoted)
				rest = after[len(quoted):]
			}
		} else {
			value, rest, _ = strings.Cut(after, ",")
			value = strings.TrimSpace(value)
		}
		params[name] = append(params[name], value)
	}
	return strings.ToLower(scheme), params
}

// asRefusal is err's refusal, or nil.
func asRefusal(err error) *refusal {
	var r *refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}
