// Package registryclients measures how fast each candidate client library
// pulls one large blob from a registry that wants a login over TLS
// (Debian's docker-registry on 127.0.0.1): the figures behind the choice
// of library in docs/fleet.md. It is a module of its own so that the
// libraries not chosen never enter cudadeps' module.
//
//	cd bench/registry-clients && go test -run '^$' -bench Pull -benchtime 5x
//
// BENCH_BLOB_MIB sets the blob's size (default 256).
package registryclients

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrremote "github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	orasremote "oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/registry"
	"github.com/cudadeps/cudadeps/internal/testkit/registrytest"
)

const repo = "bench/blob"

// blob is what every client pulls.
type blob struct {
	reg    *registrytest.Registry
	desc   ocispec.Descriptor
	sha256 string
}

// upload sends size random bytes as a blob, monolithically.
func upload(b *testing.B, reg *registrytest.Registry, size int) blob {
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	client := reg.HTTPClient()
	client.Timeout = 0
	req, _ := http.NewRequest(http.MethodPost, reg.URL()+"/v2/"+repo+"/blobs/uploads/", nil)
	req.SetBasicAuth(reg.User, reg.Password)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		b.Fatalf("start upload: %v %v", err, resp)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		b.Fatal(err)
	}
	q := loc.Query()
	q.Set("digest", "sha256:"+hexSum)
	loc.RawQuery = q.Encode()
	req, _ = http.NewRequest(http.MethodPut, loc.String(), bytes.NewReader(data))
	req.SetBasicAuth(reg.User, reg.Password)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err = client.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		b.Fatalf("upload: %v %v", err, resp)
	}
	resp.Body.Close()
	return blob{reg: reg, sha256: hexSum, desc: ocispec.Descriptor{MediaType: "application/octet-stream", Digest: digest.Digest("sha256:" + hexSum), Size: int64(size)}}
}

func tlsTransport(reg *registrytest.Registry) *http.Transport {
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: reg.CA.Pool}, ForceAttemptHTTP2: true, DisableCompression: true}
}

// save copies r into a new file of dir, hashing it, and checks the hash
// (verify false: the library checked it itself).
func save(b *testing.B, dir string, r io.Reader, bl blob, verify bool) {
	f, err := os.CreateTemp(dir, "blob-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := sha256.New()
	w := io.Writer(f)
	if verify {
		w = io.MultiWriter(f, h)
	}
	n, err := io.Copy(w, r)
	if err != nil || n != bl.desc.Size {
		b.Fatalf("copied %d of %d bytes: %v", n, bl.desc.Size, err)
	}
	if verify && hex.EncodeToString(h.Sum(nil)) != bl.sha256 {
		b.Fatal("sha256 mismatch")
	}
}

func BenchmarkPull(b *testing.B) {
	mib := 256
	if v, err := strconv.Atoi(os.Getenv("BENCH_BLOB_MIB")); err == nil && v > 0 {
		mib = v
	}
	reg := registrytest.Start(b, registrytest.Options{})
	bl := upload(b, reg, mib<<20)
	ctx := context.Background()
	dir := b.TempDir()
	ref := reg.Host + "/" + repo + "@" + bl.desc.Digest.String()

	b.Run("net-http", func(b *testing.B) {
		client := &http.Client{Transport: tlsTransport(reg)}
		b.SetBytes(bl.desc.Size)
		for range b.N {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, reg.URL()+"/v2/"+repo+"/blobs/"+bl.desc.Digest.String(), nil)
			req.SetBasicAuth(reg.User, reg.Password)
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("GET: %v %v", err, resp)
			}
			save(b, dir, resp.Body, bl, true)
			resp.Body.Close()
		}
	})

	b.Run("oras-go", func(b *testing.B) {
		r, err := orasremote.NewRepository(reg.Host + "/" + repo)
		if err != nil {
			b.Fatal(err)
		}
		r.Client = &auth.Client{Client: &http.Client{Transport: tlsTransport(reg)}, Cache: auth.NewCache(),
			Credential: auth.StaticCredential(reg.Host, auth.Credential{Username: reg.User, Password: reg.Password})}
		b.SetBytes(bl.desc.Size)
		for range b.N {
			rc, err := r.Blobs().Fetch(ctx, bl.desc)
			if err != nil {
				b.Fatal(err)
			}
			vr := content.NewVerifyReader(rc, bl.desc)
			save(b, dir, vr, bl, false)
			if err := vr.Verify(); err != nil {
				b.Fatal(err)
			}
			rc.Close()
		}
	})

	b.Run("go-containerregistry", func(b *testing.B) {
		d, err := name.NewDigest(ref)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(bl.desc.Size)
		for range b.N {
			l, err := ggcrremote.Layer(d, ggcrremote.WithAuth(&authn.Basic{Username: reg.User, Password: reg.Password}), ggcrremote.WithTransport(tlsTransport(reg)))
			if err != nil {
				b.Fatal(err)
			}
			rc, err := l.Compressed() // verified against the digest at EOF
			if err != nil {
				b.Fatal(err)
			}
			save(b, dir, rc, bl, false)
			if err := rc.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("containerd", func(b *testing.B) {
		client := &http.Client{Transport: tlsTransport(reg)}
		resolver := docker.NewResolver(docker.ResolverOptions{Hosts: docker.ConfigureDefaultRegistries(
			docker.WithClient(client),
			docker.WithAuthorizer(docker.NewDockerAuthorizer(docker.WithAuthClient(client), docker.WithAuthCreds(func(string) (string, string, error) {
				return reg.User, reg.Password, nil
			}))),
		)})
		f, err := resolver.Fetcher(ctx, ref)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(bl.desc.Size)
		for range b.N {
			rc, err := f.Fetch(ctx, bl.desc)
			if err != nil {
				b.Fatal(err)
			}
			save(b, dir, rc, bl, true)
			rc.Close()
		}
	})

	b.Run("cudadeps-fetch", func(b *testing.B) {
		login := reg.DockerConfig(b)
		r, err := registry.ParseReference("oci://" + reg.Host + "/" + repo)
		if err != nil {
			b.Fatal(err)
		}
		rem, err := registry.Open(r, registry.Options{RootCAs: reg.CA.Pool, DockerConfig: login})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(bl.desc.Size)
		for i := range b.N {
			cache := filepath.Join(dir, fmt.Sprint("cache", i))
			c, err := fetch.NewClient(rem.FetchOptions(fetch.Options{CacheDir: cache}))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Download(ctx, fetch.Request{URL: "oci://" + reg.Host + "/" + repo + "/blob", SHA256: bl.sha256, Size: bl.desc.Size}); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(cache)
		}
	})
}
