package activation

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// rootFixture is an arm64 system tree with its own ldconfig, a program in
// it whose NEEDED libcudss.so.0 nothing in the tree provides, and a store
// entry holding that library.
type rootFixture struct {
	sr    *lddtest.Sysroot
	p     *Prefix
	key   fetch.Key
	lib   string // the store's library directory, on this machine
	exe   string // the needing object, as the tree names it
	cache []byte // the tree's ld.so.cache before anything
}

func newRootFixture(t *testing.T) *rootFixture {
	t.Helper()
	sr := lddtest.ArmSysroot(t)
	sr.InstallLdconfig(t)
	p, err := OpenIn("", sr.Root)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(sr.Root, "opt", "cudadeps"); p.Dir() != want || p.Unseen() != "" {
		t.Fatalf("the prefix of a root is %s (unseen: %q), want %s", p.Dir(), p.Unseen(), want)
	}
	f := &rootFixture{sr: sr, p: p, key: fetch.Key{Component: "libcudss", Version: "0.8.0.10", Platform: "linux-sbsa", Variant: "cuda12"}, exe: "/opt/app/libapp.so"}
	dir, err := p.Store().EntryDir(f.key)
	if err != nil {
		t.Fatal(err)
	}
	f.lib = filepath.Join(dir, "lib")
	arm := elf.EM_AARCH64
	if err := elfwrite.Write(filepath.Join(f.lib, "libcudss.so.0"), elfwrite.Spec{Machine: arm, Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	// No RPATH: only LD_LIBRARY_PATH or the cache can find its library.
	if err := elfwrite.Write(filepath.Join(sr.Root, f.exe), elfwrite.Spec{Machine: arm, Soname: "libapp.so", Needed: []string{"libcudss.so.0", "libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	if f.cache, err = os.ReadFile(filepath.Join(sr.Root, "etc", "ld.so.cache")); err != nil {
		t.Fatal(err)
	}
	return f
}

// found runs the tree's own loader, inside the tree, on the needing object
// and says where it finds libcudss.so.0 ("" when not).
func (f *rootFixture) found(t *testing.T, env []string) string {
	t.Helper()
	out, err := f.sr.List(context.Background(), f.exe, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range out.Lines {
		if l.Name == "libcudss.so.0" {
			return l.Path
		}
	}
	t.Fatalf("the loader did not list libcudss.so.0:\n%s", out.Raw)
	return ""
}

// TestRootActivationThroughLdConf: under --root, a store directory that the
// needing object searches through no entry of its own is activated as the
// root's packages are: an entry in its /etc/ld.so.conf.d names it as the
// root sees it, and the root's own ldconfig (arm64, under qemu) writes it
// into the root's cache. The tree's loader, run inside the tree with no
// environment, then finds the library there; undo removes the entry and
// rebuilds the cache, byte for byte as it was.
func TestRootActivationThroughLdConf(t *testing.T) {
	f := newRootFixture(t)
	ctx := context.Background()
	if got := f.found(t, nil); got != "" {
		t.Fatalf("before: found at %s", got)
	}
	c, err := f.p.Begin(ctx, "dir:"+f.sr.Root+"/opt/app", "app")
	if err != nil {
		t.Fatal(err)
	}
	how := c.AddScriptDir(f.key, f.lib)
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(f.sr.Root, "etc", "ld.so.conf.d", "cudadeps.conf")
	if !strings.HasPrefix(how, conf) || c.ConfRefused() != "" {
		t.Fatalf("activated by %q (refused: %q), want %s", how, c.ConfRefused(), conf)
	}
	guestLib := strings.TrimPrefix(f.lib, f.sr.Root)
	data, err := os.ReadFile(conf)
	if err != nil || !strings.Contains(string(data), "\n"+guestLib+"\n") || strings.Contains(string(data), f.sr.Root) {
		t.Fatalf("%s: %v\n%s\nwant %s, as the root sees it", conf, err, data, guestLib)
	}
	if exists(f.p.EnvScript()) {
		t.Errorf("an activation script was written too")
	}
	if got, want := f.found(t, nil), guestLib+"/libcudss.so.0"; got != want {
		t.Errorf("after: the tree's loader finds libcudss.so.0 at %q, want %q", got, want)
	}
	if _, err := f.p.Undo(ctx, []string{"app"}, nil); err != nil {
		t.Fatal(err)
	}
	if exists(conf) {
		t.Errorf("undo left %s", conf)
	}
	after, err := os.ReadFile(filepath.Join(f.sr.Root, "etc", "ld.so.cache"))
	if err != nil || !bytes.Equal(after, f.cache) {
		t.Errorf("undo: the tree's ld.so.cache is not as it was (%d bytes, was %d; %v)", len(after), len(f.cache), err)
	}
	if got := f.found(t, nil); got != "" {
		t.Errorf("after undo: found at %s", got)
	}
}

// TestRootActivationFallsBackToEnvScript: a root whose ld.so.conf does not
// include /etc/ld.so.conf.d gets the activation script instead, naming the
// store as the root sees it, and the change says why; the tree's loader
// finds the library with the script's LD_LIBRARY_PATH.
func TestRootActivationFallsBackToEnvScript(t *testing.T) {
	f := newRootFixture(t)
	mustWrite(t, filepath.Join(f.sr.Root, "etc", "ld.so.conf"), "/lib/aarch64-linux-gnu\n")
	c, err := f.p.Begin(context.Background(), "dir:"+f.sr.Root+"/opt/app", "app")
	if err != nil {
		t.Fatal(err)
	}
	how := c.AddScriptDir(f.key, f.lib)
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(how, f.p.EnvScript()) || !strings.Contains(c.ConfRefused(), "does not include /etc/ld.so.conf.d/*.conf") {
		t.Fatalf("activated by %q, refused %q", how, c.ConfRefused())
	}
	guestLib := strings.TrimPrefix(f.lib, f.sr.Root)
	dirs, err := f.p.EnvDirs()
	if err != nil || len(dirs) != 1 || dirs[0] != guestLib {
		t.Fatalf("script directories %v %v, want %s", dirs, err, guestLib)
	}
	data, _ := os.ReadFile(f.p.EnvScript())
	if strings.Contains(string(data), f.sr.Root) || !strings.Contains(string(data), "(. /opt/cudadeps/env.sh)") {
		t.Errorf("env.sh names paths of this machine, not the root's:\n%s", data)
	}
	if got, want := f.found(t, []string{"LD_LIBRARY_PATH=" + guestLib}), guestLib+"/libcudss.so.0"; got != want {
		t.Errorf("with env.sh: found at %q, want %q", got, want)
	}
}

// TestRootRebuildFinishedByRecover: a run killed between writing the entry
// and rebuilding the cache leaves its mark; the next run's recovery
// rebuilds the cache.
func TestRootRebuildFinishedByRecover(t *testing.T) {
	f := newRootFixture(t)
	ctx := context.Background()
	c, err := f.p.Begin(ctx, "dir:"+f.sr.Root+"/opt/app", "app")
	if err != nil {
		t.Fatal(err)
	}
	c.AddScriptDir(f.key, f.lib)
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	// As if killed before ldconfig ran: the mark, and the old cache.
	mustWrite(t, f.p.pendingFile(f.sr.Root), f.sr.Root+"\n")
	if err := os.WriteFile(filepath.Join(f.sr.Root, "etc", "ld.so.cache"), f.cache, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := f.found(t, nil); got != "" {
		t.Fatalf("the old cache finds it at %s", got)
	}
	if _, err := f.p.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.found(t, nil); got == "" {
		t.Errorf("recovery did not rebuild the cache")
	}
	if exists(f.p.pendingFile(f.sr.Root)) {
		t.Errorf("the mark stayed")
	}
}

// TestPrefixOutsideRoot: a prefix outside the root says the root cannot
// see it, and its directories are not written into the root's entry.
func TestPrefixOutsideRoot(t *testing.T) {
	f := newRootFixture(t)
	p, err := OpenIn(filepath.Join(t.TempDir(), "elsewhere"), f.sr.Root)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Unseen(), "cannot see") {
		t.Errorf("unseen: %q", p.Unseen())
	}
	c, err := p.Begin(context.Background(), "dir:x", "x")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := p.Store().EntryDir(f.key)
	how := c.AddScriptDir(f.key, dir)
	if !strings.Contains(how, "LD_LIBRARY_PATH") || !strings.Contains(c.ConfRefused(), "cannot see") {
		t.Errorf("activated by %q, refused %q", how, c.ConfRefused())
	}
}
