package pyenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const metadata = "Metadata-Version: 2.1\nName: gpupkg\nVersion: 1.0\n"

// rootSite is a root with an empty site-packages in it.
func rootSite(t *testing.T) (root, site string) {
	t.Helper()
	root = t.TempDir()
	site = filepath.Join(root, "opt/venv/lib/python3.12/site-packages")
	if err := os.MkdirAll(filepath.Join(site, "gpupkg-1.0.dist-info"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, site
}

// findWithin looks gpupkg up in the site under root, failing after 10 s.
func findWithin(t *testing.T, site, root string) (*Dist, error) {
	t.Helper()
	env, err := FromSiteDir(site, root)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		d   *Dist
		err error
	}
	done := make(chan res, 1)
	go func() { d, err := env.Find("gpupkg"); done <- res{d, err} }()
	select {
	case r := <-done:
		return r.d, r.err
	case <-time.After(10 * time.Second):
		t.Fatal("reading the distribution still runs after 10s")
	}
	return nil, nil
}

// TestSiteUnderRoot reads a site-packages of another system's tree as that
// system would: a dist-info file that is a link out of the root (absolute,
// or by more ".." than the root is deep) is not this host's file; a FIFO
// or a device is refused in one line naming it; and the integrity check
// counts a RECORD file that links out of the root as missing.
func TestSiteUnderRoot(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "METADATA"), []byte(metadata), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "libx.so"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{filepath.Join(outside, "METADATA"), "../../../../../../../../.." + outside + "/METADATA"} {
		root, site := rootSite(t)
		if err := os.Symlink(link, filepath.Join(site, "gpupkg-1.0.dist-info/METADATA")); err != nil {
			t.Fatal(err)
		}
		if _, err := findWithin(t, site, root); err == nil || !strings.Contains(err.Error(), site+"/gpupkg-1.0.dist-info/METADATA") {
			t.Errorf("METADATA linked to %s: %v; want it not found in the root, named", link, err)
		}
		// The same site read as this host's follows the link.
		if _, err := findWithin(t, site, ""); err != nil && !strings.Contains(err.Error(), "RECORD") {
			t.Errorf("on this host the link is followed: %v", err)
		}
	}

	root, site := rootSite(t)
	info := filepath.Join(site, "gpupkg-1.0.dist-info")
	if err := os.WriteFile(filepath.Join(info, "METADATA"), []byte(metadata), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(info, "RECORD"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := findWithin(t, site, root)
	if want := info + "/RECORD: not a regular file (a FIFO)"; err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("RECORD a FIFO: %v; want one line with %q", err, want)
	}
	if err := os.Remove(filepath.Join(info, "RECORD")); err != nil {
		t.Fatal(err)
	}
	record := "gpupkg/libx.so,,1\ngpupkg/liby.so,,1\n"
	if err := os.WriteFile(filepath.Join(info, "RECORD"), []byte(record), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(site, "gpupkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "libx.so"), filepath.Join(site, "gpupkg/libx.so")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(site, "gpupkg/liby.so"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := findWithin(t, site, root)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Check(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Missing) != 1 || !strings.HasSuffix(res.Missing[0], "gpupkg/libx.so") || len(res.WrongSize) != 0 {
		t.Errorf("integrity under the root: missing %v, wrong size %v; want libx.so missing (its link leaves the root)", res.Missing, res.WrongSize)
	}

	dev := filepath.Join(root, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(dev, "zero"), syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
		t.Logf("the device case needs CAP_MKNOD: %v", err)
		return
	}
	if err := os.Remove(filepath.Join(info, "METADATA")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(info, "METADATA")); err != nil {
		t.Fatal(err)
	}
	_, err = findWithin(t, site, root)
	if want := info + "/METADATA (a link to /dev/zero): not a regular file (a character device)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("METADATA → the root's /dev/zero: %v; want %q", err, want)
	}
}
