package runtimeopen

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cudadeps/cudadeps/loader/ldso"
)

// TestMatchUnderRoot finds a run-time library of a --root system as the
// root's own loader would: a link in the root that leads out of it (by an
// absolute target or by more ".." than the root is deep) names the root's
// file, never this host's.
func TestMatchUnderRoot(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "libnvrtc-builtins.so.13.0"), []byte("host file"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "opt/cuda/lib")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"libabs.so.1":    filepath.Join(outside, "libnvrtc-builtins.so.13.0"),
		"libdotdot.so.1": "../../../../../../../.." + filepath.Join(outside, "libnvrtc-builtins.so.13.0"),
		"libinside.so.1": "/opt/cuda/lib/libreal.so.1",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "libreal.so.1"), []byte("root file"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := ldso.New(context.Background(), ldso.Options{Root: root, NoPreloadFile: true, PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver(&Table{}, l)
	for name, want := range map[string]string{
		"libabs.so.1":    "",
		"libdotdot.so.1": "",
		"libinside.so.1": "/opt/cuda/lib/libinside.so.1",
		"libreal.so.1":   "/opt/cuda/lib/libreal.so.1",
	} {
		if got := r.match("/opt/cuda/lib", name); got != want {
			t.Errorf("match(/opt/cuda/lib, %s) = %q, want %q", name, got, want)
		}
	}
}
