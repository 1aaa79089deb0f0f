package registry

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/cudadeps/cudadeps/fetch"
)

// The login the hostile registries want, and that must reach none of the
// attacker's endpoints.
const (
	hostileUser   = "fleet"
	hostileSecret = "the-registry-secret-7f3a"
)

var hostileBasic = "Basic " + base64.StdEncoding.EncodeToString([]byte(hostileUser+":"+hostileSecret))

// spy is a server on 127.0.0.1 playing a hostile registry or the endpoint
// it points the client at: it records every request, then answers as the
// test says. The TLS ones share httptest's certificate.
type spy struct {
	URL  string
	Host string
	srv  *httptest.Server

	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct {
	Method, Path, Authorization string
	Body                        int
}

func newSpy(t *testing.T, withTLS bool, answer http.HandlerFunc) *spy {
	t.Helper()
	s := &spy{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.seen = append(s.seen, seenRequest{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Body: len(body)})
		s.mu.Unlock()
		answer(w, r)
	})
	if withTLS {
		s.srv = httptest.NewTLSServer(h)
	} else {
		s.srv = httptest.NewServer(h)
	}
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL
	s.Host = strings.TrimPrefix(strings.TrimPrefix(s.URL, "https://"), "http://")
	return s
}

func (s *spy) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

// noCredential fails the test if any request to s carried a credential.
func (s *spy) noCredential(t *testing.T) {
	t.Helper()
	for _, r := range s.requests() {
		if r.Authorization != "" {
			t.Errorf("%s %s%s reached the attacker with Authorization %q", r.Method, s.URL, r.Path, r.Authorization)
		}
	}
}

// hostileRemote opens oci://HOST/fleet/app:TAG on the hostile registry
// reg, trusting httptest's certificate, with the login for it in a Docker
// config.
func hostileRemote(t *testing.T, reg *spy, tag string) *Remote {
	t.Helper()
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "config.json"), map[string]any{"auths": map[string]any{
		reg.Host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(hostileUser + ":" + hostileSecret))},
	}})
	ref, err := ParseReference("oci://" + reg.Host + "/fleet/app:" + tag)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(reg.srv.Certificate())
	rem, err := Open(ref, Options{RootCAs: pool, DockerConfig: dir, Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return rem
}

// refused checks that err is the one-line error of a refusal, with want
// in it and no credential.
func refused(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("no error; want one saying %q", want)
	case strings.Contains(err.Error(), "\n"):
		t.Errorf("the error takes several lines: %q", err)
	case strings.Contains(err.Error(), hostileSecret) || strings.Contains(err.Error(), hostileBasic[len("Basic "):]):
		t.Errorf("the error shows the login: %v", err)
	case !strings.Contains(err.Error(), want):
		t.Errorf("error %q; want one saying %q", err, want)
	}
}

// withLogin answers 401 with a basic challenge unless the request has the
// login, else as next says.
func withLogin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != hostileBasic {
			w.Header().Set("Www-Authenticate", `Basic realm="hostile"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next(w, r)
	}
}

// TestGuardRealm: a registry on https whose bearer challenge names a token
// service the login must not reach. Plain http: the attacker's token
// service, listening, gets no request at all. Link-local (the cloud
// metadata address, also as an IPv4-mapped and an IPv6 literal),
// unspecified, other schemes, none: refused in one line, before any
// connection.
func TestGuardRealm(t *testing.T) {
	token := newSpy(t, false, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"token":"stolen"}`)
	})
	for _, c := range []struct{ realm, want string }{
		{token.URL + "/token", "plain http while the registry is reached over https: refused"},
		{"https://169.254.169.254/latest/api/token", "a link-local address (where cloud metadata services answer): refused"},
		{"https://[::ffff:169.254.169.254]/latest/api/token", "a link-local address"},
		{"https://[fe80::a9fe:a9fe]/token", "a link-local address"},
		{"https://0.0.0.0:8443/token", "the unspecified address: refused"},
		{"file:///etc/passwd", "not an absolute URL: refused"},
		{"gopher://auth.example/token", "neither https nor http: refused"},
		{"https://user:pw@auth.example/token", "https://user:xxxxx@auth.example/token as its token service, with a user name in it: refused"},
	} {
		t.Run(c.realm, func(t *testing.T) {
			reg := newSpy(t, true, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer stolen" {
					w.Header().Set("Www-Authenticate", fmt.Sprintf(`Bearer realm=%q,service="hostile"`, c.realm))
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				w.WriteHeader(http.StatusNotFound)
			})
			rem := hostileRemote(t, reg, "1")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := rem.Read(ctx, Select{Platform: "linux-x86_64"})
			refused(t, err, c.want)
		})
	}
	if n := len(token.requests()); n != 0 {
		t.Errorf("the plain-http token service was asked %d times: %+v", n, token.requests())
	}
	t.Run("none", func(t *testing.T) {
		reg := newSpy(t, true, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Www-Authenticate", `Bearer service="hostile"`)
			w.WriteHeader(http.StatusUnauthorized)
		})
		_, err := hostileRemote(t, reg, "1").Read(context.Background(), Select{})
		refused(t, err, "names no token service (realm)")
	})
	t.Run("named twice", func(t *testing.T) {
		// Each value is checked, whichever one a client would take.
		reg := newSpy(t, true, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Www-Authenticate", fmt.Sprintf(`Bearer realm=%q,realm=%q`, "https://"+token.Host+"/token", token.URL+"/token"))
			w.WriteHeader(http.StatusUnauthorized)
		})
		_, err := hostileRemote(t, reg, "1").Read(context.Background(), Select{})
		refused(t, err, "plain http while the registry is reached over https")
	})
}

// TestGuardRealmAllowed: a token service on https (on loopback, as the
// registry is) gets the login, and the registry the token: the guard lets
// the protocol work.
func TestGuardRealmAllowed(t *testing.T) {
	token := newSpy(t, true, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != hostileBasic || r.URL.Query().Get("service") != "reg" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"token":"issued"}`)
	})
	reg := newSpy(t, true, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer issued":
			w.Header().Set("Www-Authenticate", fmt.Sprintf(`Bearer realm=%q,service="reg"`, token.URL+"/token"))
			w.WriteHeader(http.StatusUnauthorized)
		case r.URL.Path != "/v2/":
			w.WriteHeader(http.StatusNotFound)
		}
	})
	_, err := hostileRemote(t, reg, "1").Read(context.Background(), Select{})
	if err == nil || !strings.Contains(err.Error(), "no such tag or digest") {
		t.Fatalf("with a token from an allowed token service, the registry should only lack the tag: %v", err)
	}
	if got := len(token.requests()); got != 1 {
		t.Errorf("the token service was asked %d times, want 1", got)
	}
}

// TestGuardRedirect: a registry that wants a login redirects to another
// port of the same host. Go's client would keep the Authorization there;
// the guard strips it: a blob redirected to an object store comes without
// the login, and an endpoint that then asks for a login is refused in one
// line (oras-go v2.6.0 would answer it with the registry's login), by
// oras-go's calls and by the download client's alike, the latter without
// trying again.
func TestGuardRedirect(t *testing.T) {
	blob := []byte("the bytes of a blob an object store serves")
	sum := sha256.Sum256(blob)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	store := newSpy(t, true, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/objects/blob" {
			w.Write(blob)
			return
		}
		w.Header().Set("Www-Authenticate", `Basic realm="give me the registry's login"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	reg := newSpy(t, true, withLogin(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/":
		case "/v2/fleet/app/manifests/1":
			http.Redirect(w, r, store.URL+"/objects/manifest", http.StatusTemporaryRedirect)
		case "/v2/fleet/app/blobs/" + digest:
			http.Redirect(w, r, store.URL+"/objects/blob", http.StatusTemporaryRedirect)
		default:
			http.Redirect(w, r, store.URL+"/objects/private", http.StatusTemporaryRedirect)
		}
	}))
	rem := hostileRemote(t, reg, "1")
	ctx := context.Background()
	_, err := rem.Read(ctx, Select{Platform: "linux-x86_64"})
	refused(t, err, "where a request for the registry https://"+reg.Host+" was sent, asks for a login: refused")
	if len(store.requests()) == 0 {
		t.Fatal("the redirect was not followed")
	}

	client, err := fetch.NewClient(rem.FetchOptions(fetch.Options{CacheDir: t.TempDir(), Logger: logger(t), RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := client.Download(ctx, fetch.Request{Name: "blob", URL: rem.mirrorURL() + "blob.bin", SHA256: digest[len("sha256:"):], Size: int64(len(blob))})
	if err != nil {
		t.Fatalf("a blob redirected to an object store: %v", err)
	}
	if got := sha256Of(t, p); got != digest[len("sha256:"):] {
		t.Fatalf("the blob has sha256 %s", got)
	}
	other := sha256.Sum256([]byte("another blob"))
	before := len(store.requests())
	_, err = client.Download(ctx, fetch.Request{Name: "private", URL: rem.mirrorURL() + "private.bin", SHA256: hex.EncodeToString(other[:]), Size: 12})
	refused(t, err, "asks for a login: refused")
	if n := len(store.requests()) - before; n != 1 {
		t.Errorf("the object store was asked %d times for the refused blob, want once (a refusal is not tried again)", n)
	}
	store.noCredential(t)
}

// TestGuardUploadLocation: a registry that places a blob's upload on
// another port (an endpoint of the attacker's) makes the push fail in one
// line; the endpoint gets no request, so neither the login nor the blob.
func TestGuardUploadLocation(t *testing.T) {
	f := newFixture(t)
	elsewhere := newSpy(t, true, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	reg := newSpy(t, true, withLogin(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
		case r.Method == http.MethodPost && r.URL.Path == "/v2/fleet/app/blobs/uploads/":
			w.Header().Set("Location", elsewhere.URL+"/v2/fleet/app/blobs/uploads/1?state=x")
			w.WriteHeader(http.StatusAccepted)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	rem := hostileRemote(t, reg, "1")
	client, err := fetch.NewClient(rem.FetchOptions(fetch.Options{CacheDir: t.TempDir(), Logger: logger(t)}))
	if err != nil {
		t.Fatal(err)
	}
	p := makePlan(t, "app", "linux-x86_64", f.step(t, 0))
	_, err = rem.Push(context.Background(), p, PushOptions{Catalog: f.cat, Client: client})
	refused(t, err, "sent a PUT to https://"+elsewhere.Host+", another origin: refused")
	if got := elsewhere.requests(); len(got) != 0 {
		t.Errorf("the upload's other origin was sent %+v", got)
	}
}

// TestGuardDeclaredSize: an image index whose entry declares a manifest of
// 1 GiB is refused before the manifest is asked for, and so is an answer
// for the tag that declares 1 GiB, before it is read.
func TestGuardDeclaredSize(t *testing.T) {
	manifest := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}`)
	sum := sha256.Sum256(manifest)
	mdigest := "sha256:" + hex.EncodeToString(sum[:])
	index, err := json.Marshal(ocispec.Index{
		MediaType:    ocispec.MediaTypeImageIndex,
		ArtifactType: ArtifactType,
		Manifests: []ocispec.Descriptor{{
			MediaType: ocispec.MediaTypeImageManifest, Digest: digestOf(mdigest), Size: 1 << 30,
			Annotations: map[string]string{AnnotationPlatform: "linux-x86_64", AnnotationCUDAMajor: "13", AnnotationTarget: "app"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	isum := sha256.Sum256(index)
	reg := newSpy(t, true, withLogin(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v2/":
		case "/v2/fleet/app/manifests/1":
			w.Header().Set("Content-Type", ocispec.MediaTypeImageIndex)
			w.Header().Set("Docker-Content-Digest", "sha256:"+hex.EncodeToString(isum[:]))
			w.Write(index)
		case "/v2/fleet/app/manifests/" + mdigest:
			w.Header().Set("Content-Type", ocispec.MediaTypeImageManifest)
			w.Write(manifest)
		case "/v2/fleet/app/manifests/huge":
			w.Header().Set("Content-Type", ocispec.MediaTypeImageIndex)
			w.Header().Set("Docker-Content-Digest", mdigest)
			w.Header().Set("Content-Length", fmt.Sprint(1<<30))
			w.Write(index)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	rem := hostileRemote(t, reg, "1")
	_, err = rem.Read(context.Background(), Select{Platform: "linux-x86_64"})
	refused(t, err, "the manifest "+mdigest+" declares 1073741824 bytes, more than the 16777216 cudadeps reads of one: refused")
	for _, r := range reg.requests() {
		if strings.HasSuffix(r.Path, mdigest) {
			t.Errorf("the manifest the index declares 1 GiB of was asked for: %s %s", r.Method, r.Path)
		}
	}

	huge := hostileRemote(t, reg, "huge")
	_, err = huge.Read(context.Background(), Select{Platform: "linux-x86_64"})
	refused(t, err, "the image index huge declares 1073741824 bytes, more than the 16777216 cudadeps reads of one: refused")
}

// TestCheckRealm is the rule for token services, case by case.
func TestCheckRealm(t *testing.T) {
	for _, c := range []struct {
		registry, realm string
		ok              bool
	}{
		{"https://registry.internal", "https://auth.docker.io/token", true},
		{"https://registry.internal", "https://registry.internal/service/token", true},
		{"https://registry.internal", "https://10.1.2.3:5001/auth", true},
		{"https://registry.internal", "http://auth.example/token", false},
		{"http://registry.internal", "http://auth.example/token", true},
		{"https://registry.internal", "https://169.254.169.254/", false},
		{"https://169.254.10.1", "https://169.254.10.1/token", false},
		{"https://registry.internal", "https://[fe80::1%25eth0]/", false},
		{"https://registry.internal", "https://127.0.0.1:8080/token", false},
		{"https://registry.internal", "https://[::1]/token", false},
		{"https://127.0.0.1:5000", "https://127.0.0.1:5001/token", true},
		{"https://localhost:5000", "https://[::1]:5001/token", true},
		{"https://registry.internal", "https://0.0.0.0/", false},
		{"https://registry.internal", "https://[::]/", false},
		{"https://registry.internal", "/token", false},
		{"https://registry.internal", "https:auth.example", false},
	} {
		reg, err := url.Parse(c.registry)
		if err != nil {
			t.Fatal(err)
		}
		_, err = checkRealm(c.realm, reg)
		if (err == nil) != c.ok {
			t.Errorf("registry %s, token service %s: %v (want allowed %v)", c.registry, c.realm, err, c.ok)
		}
	}
}

// TestGuardDial: a connection to a link-local or unspecified address is
// refused whatever name led there, before anything is sent; one to the
// registry's own address literal, or to loopback, is made.
func TestGuardDial(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for _, c := range []struct {
		registry, address string
		ok                bool
	}{
		{"registry.internal", "169.254.169.254:80", false},
		{"registry.internal", "[fe80::1]:443", false},
		{"registry.internal", "[::ffff:169.254.169.254]:80", false},
		{"registry.internal", "0.0.0.0:443", false},
		{"registry.internal", l.Addr().String(), true},
	} {
		r, err := ParseReference("oci://" + c.registry + "/a")
		if err != nil {
			t.Fatal(err)
		}
		rem, err := Open(r, Options{DockerConfig: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := rem.base.DialContext(ctx, "tcp", c.address)
		cancel()
		if err == nil {
			conn.Close()
		}
		if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), "link-local or unspecified address: refused") {
			t.Errorf("a connection to %s: %v (want made %v)", c.address, err, c.ok)
		}
	}
	if err := (&guard{host: "169.254.3.4:5000"}).dialControl("tcp", "169.254.3.4:5000", nil); err != nil {
		t.Errorf("the registry's own link-local address: %v", err)
	}
}
