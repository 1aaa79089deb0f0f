package debredist

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUpstreamVersion(t *testing.T) {
	for _, c := range []struct{ deb, version, release string }{
		{"12.4.5.8~12.4.1-2", "12.4.5.8", "12.4.1"},
		{"11.1.1+~10.3.5.147~12.4.1-2", "10.3.5.147", "12.4.1"},
		{"11.8.89~11.8.0-5~deb12u1", "11.8.89", "11.8.0"},
		{"1:12.4.127~12.4.1-2", "12.4.127", "12.4.1"},
	} {
		v, r, err := UpstreamVersion(c.deb)
		if err != nil || v != c.version || r != c.release {
			t.Errorf("UpstreamVersion(%q) = %q, %q, %v; want %q, %q", c.deb, v, r, err, c.version, c.release)
		}
	}
	for _, bad := range []string{"550.163.01-2", "~12.4.1-2"} {
		if v, r, err := UpstreamVersion(bad); err == nil {
			t.Errorf("UpstreamVersion(%q) = %q, %q; want an error", bad, v, r)
		}
	}
}

func TestFilePins(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, n := range []string{"libcap2_1%3a2.75-10_arm64.deb", "libcudart12_12.4.127~12.4.1-2_arm64.deb", "tzdata_2025b-4_all.deb", "libc6_2.41-12_amd64.deb"} {
		f := filepath.Join(dir, n)
		if err := os.WriteFile(f, []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pins, debs, err := FilePins("arm64", files)
	if err != nil {
		t.Fatal(err)
	}
	if len(pins.List) != 3 || pins.Version("libcap2") != "1:2.75-10" || pins.Version("tzdata") != "2025b-4" || pins.Version("libc6") != "" {
		t.Errorf("pins: %+v", pins.List)
	}
	if debs["libcudart12"] != files[1] || pins.List[1].Size != int64(len("libcudart12_12.4.127~12.4.1-2_arm64.deb")) {
		t.Errorf("debs %v, pins %+v", debs, pins.List)
	}
	if _, _, err := FilePins("arm64", []string{filepath.Join(dir, "notadeb.txt")}); err == nil {
		t.Error("a file not named PACKAGE_VERSION_ARCH.deb: no error")
	}
}

// TestSamePackages: a re-resolved list must hold the pinned packages, all
// of them and no other, for the same architecture; versions may differ.
func TestSamePackages(t *testing.T) {
	pins := func(arch string, pv ...string) *Pins {
		p := &Pins{Arch: arch}
		for i := 0; i+1 < len(pv); i += 2 {
			p.List = append(p.List, Pin{Package: pv[i], Version: pv[i+1], Arch: arch})
		}
		return p
	}
	pinned := pins("arm64", "libfoo1", "1.0-1", "libbar", "2.0-1")
	if err := samePackages(pinned, pins("arm64", "libbar", "2.0-1", "libfoo1", "1.0-2")); err != nil {
		t.Errorf("a replaced version: %v", err)
	}
	for name, b := range map[string]*Pins{
		"one fewer":  pins("arm64", "libfoo1", "1.0-1"),
		"one more":   pins("arm64", "libfoo1", "1.0-1", "libbar", "2.0-1", "libbaz", "1"),
		"another":    pins("arm64", "libfoo1", "1.0-1", "libbaz", "2.0-1"),
		"other arch": pins("amd64", "libfoo1", "1.0-1", "libbar", "2.0-1"),
	} {
		if err := samePackages(pinned, b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
