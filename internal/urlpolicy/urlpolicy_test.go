package urlpolicy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		url       string
		allowHTTP bool
		src       Source
		ok        bool
	}{
		{"https://developer.download.nvidia.com/compute/", false, Remote, true},
		{"http://127.0.0.1:8080/x", false, Remote, true},
		{"http://[::1]:8080/x", false, Remote, true},
		{"http://localhost/x", false, Configured, true},
		{"http://mirror.example/x", false, Configured, false},
		{"http://mirror.example/x", true, Configured, true},
		{"file:///srv/mirror/", false, Configured, true},
		{"file:///etc/passwd", true, Remote, false},
		{"ftp://mirror.example/x", true, Configured, false},
	}
	for _, c := range cases {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(u, c.allowHTTP, c.src); (err == nil) != c.ok {
			t.Errorf("Check(%s, allowHTTP=%v, src=%d) = %v, want ok=%v", c.url, c.allowHTTP, c.src, err, c.ok)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:secret@index.example/simple/": "https://user:xxxxx@index.example/simple/",
		"https://index.example/simple/":             "https://index.example/simple/",
		"%zz":                                       "%zz",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// A server may not redirect a client to this machine's files, even when
// the client reads file:// URLs it was configured with.
func TestRedirectToFileRefused(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.RedirectHandler("file://"+secret, http.StatusFound))
	defer srv.Close()
	c := &http.Client{Transport: Transport(), CheckRedirect: CheckRedirect(false)}
	resp, err := c.Get(srv.URL)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("followed a redirect to a local file: %q", b)
	}
	if !strings.Contains(err.Error(), "local file") {
		t.Errorf("err = %v", err)
	}
	// The same file, configured, is read.
	resp, err = c.Get("file://" + secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "token" {
		t.Errorf("file:// read %q", b)
	}
	// A local directory named without its slash is followed to its listing.
	resp, err = c.Get("file://" + filepath.Dir(secret))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `href="secret"`) {
		t.Errorf("directory listing %q does not link its file", b)
	}
}
