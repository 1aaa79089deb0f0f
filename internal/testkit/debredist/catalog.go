package debredist

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
)

// Catalog does what `cudadeps catalog import` does with the manifests the
// mirror at url (on 127.0.0.1) serves by name: it imports them with the
// curated soname table, for platform only. The catalog stands alone (the
// embedded one would offer newer CUDA 12 releases the mirror lacks), its
// products' base URL the mirror's.
func Catalog(ctx context.Context, url, platform string, names ...string) (*catalog.Catalog, error) {
	var manifests []*catalog.Manifest
	for _, n := range names {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+n, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s%s: %s", url, n, resp.Status)
		}
		m, err := catalog.ParseManifest(data, n)
		if err != nil {
			return nil, err
		}
		manifests = append(manifests, m)
	}
	cat, err := catalog.Import(ctx, manifests, catalog.ImportOptions{Platforms: []string{platform}})
	if err != nil {
		return nil, err
	}
	for _, m := range manifests {
		if p, ok := cat.Product(m.Product); ok {
			p.BaseURL = url
		}
	}
	return cat, nil
}

// PackageFiles lists the regular files a .deb installs (its md5sums),
// as paths relative to the root.
func PackageFiles(t testing.TB, deb string) []string {
	t.Helper()
	out, err := exec.Command("dpkg-deb", "-I", deb, "md5sums").Output()
	if err != nil {
		t.Fatalf("dpkg-deb -I %s md5sums: %v", deb, err)
	}
	var files []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			files = append(files, f[1])
		}
	}
	return files
}
