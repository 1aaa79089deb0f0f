// Package registrytest starts Debian's docker-registry on 127.0.0.1, with TLS from a certificate authority made for the test and a bcrypt htpasswd login, for tests.
package registrytest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// Binary is where Debian's docker-registry package installs the registry.
const Binary = "/usr/bin/docker-registry"

// CA is a certificate authority made for one test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File holds the CA certificate (PEM), for SSL_CERT_FILE.
	File string
	// Pool trusts the CA alone.
	Pool *x509.CertPool
}

// NewCA makes a certificate authority and writes its certificate into dir.
func NewCA(t testing.TB, dir string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cudadeps test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, File: filepath.Join(dir, "ca.pem"), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	writeFile(t, ca.File, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Issue makes a server certificate for the names (IP addresses or DNS
// names) and returns it and its key in PEM.
func (ca *CA) Issue(t testing.TB, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// ServerTLS is a server configuration with a certificate for the names.
func (ca *CA) ServerTLS(t testing.TB, names ...string) *tls.Config {
	t.Helper()
	c, k := ca.Issue(t, names...)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}}
}

// Options shape the registry Start runs.
type Options struct {
	// Plain serves plain HTTP instead of TLS.
	Plain bool
	// Anonymous asks for no login.
	Anonymous bool
	// Names are more DNS names the certificate holds (127.0.0.1 always).
	Names []string
}

// Registry is a running docker-registry.
type Registry struct {
	// Host is 127.0.0.1:PORT.
	Host string
	// CA signed the registry's certificate (nil with Options.Plain).
	CA *CA
	// User and Password are the login htpasswd holds.
	User, Password string
	// Storage is the registry's storage root directory.
	Storage string
	// Log is the registry's own log (its access log included).
	Log *SyncBuffer
}

// SyncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Need skips the test (fails it under CUDADEPS_REQUIRE_ORACLES=1) when
// docker-registry is not installed.
func Need(t testing.TB) {
	t.Helper()
	_, err := os.Stat(Binary)
	lddtest.Need(t, err == nil, "%s is not installed (Debian package docker-registry)", Binary)
}

// Start runs docker-registry on a free port of 127.0.0.1 until the test
// ends, and waits until it answers.
func Start(t testing.TB, opts Options) *Registry {
	t.Helper()
	Need(t)
	dir := t.TempDir()
	r := &Registry{User: "fleet", Password: "s3cret-" + randomWord(t), Storage: filepath.Join(dir, "storage"), Log: &SyncBuffer{}}
	var tlsConf string
	if !opts.Plain {
		r.CA = NewCA(t, dir)
		c, k := r.CA.Issue(t, append([]string{"127.0.0.1"}, opts.Names...)...)
		writeFile(t, filepath.Join(dir, "cert.pem"), c)
		writeFile(t, filepath.Join(dir, "key.pem"), k)
		tlsConf = fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	}
	var authConf string
	if !opts.Anonymous {
		hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "htpasswd"), []byte(r.User+":"+string(hash)+"\n"))
		authConf = fmt.Sprintf("auth:\n  htpasswd:\n    realm: cudadeps-test\n    path: %s\n", filepath.Join(dir, "htpasswd"))
	}
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		r.Host = fmt.Sprintf("127.0.0.1:%d", port)
		conf := fmt.Sprintf(`version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
  secret: %s
%s%s`, r.Storage, r.Host, randomWord(t), tlsConf, authConf)
		confFile := filepath.Join(dir, "config.yml")
		writeFile(t, confFile, []byte(conf))
		cmd := exec.Command(Binary, "serve", confFile)
		cmd.Stdout, cmd.Stderr = r.Log, r.Log
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", Binary, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		stop := func() {
			_ = cmd.Process.Kill()
			<-done
		}
		if r.waitReady(done) {
			t.Cleanup(stop)
			return r
		}
		stop()
		if attempt == 4 {
			t.Fatalf("docker-registry did not start on %s:\n%s", r.Host, r.Log.String())
		}
	}
}

// waitReady polls /v2/ until the registry answers, for up to 20 s; false
// when it ended or never answered.
func (r *Registry) waitReady(done <-chan struct{}) bool {
	client := r.HTTPClient()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return false
		default:
		}
		resp, err := client.Get(r.URL() + "/v2/")
		if err == nil {
			resp.Body.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// URL is the registry's base URL: https://127.0.0.1:PORT (http:// when
// plain).
func (r *Registry) URL() string {
	if r.CA == nil {
		return "http://" + r.Host
	}
	return "https://" + r.Host
}

// HTTPClient trusts the registry's CA.
func (r *Registry) HTTPClient() *http.Client {
	tr := &http.Transport{}
	if r.CA != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: r.CA.Pool}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// DockerConfig writes a Docker config directory (for DOCKER_CONFIG) whose
// config.json holds the registry's login for each host (Host when none is
// given), and returns it.
func (r *Registry) DockerConfig(t testing.TB, hosts ...string) string {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{r.Host}
	}
	auths := map[string]any{}
	for _, h := range hosts {
		auths[h] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password))}
	}
	data, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.json"), data)
	return dir
}

// BlobFile is where the registry stores the blob of a sha256 (hex).
func (r *Registry) BlobFile(sha256 string) string {
	return filepath.Join(r.Storage, "docker", "registry", "v2", "blobs", "sha256", sha256[:2], sha256, "data")
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomWord(t testing.TB) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
