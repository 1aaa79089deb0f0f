package resolver

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cudadeps/cudadeps/loader/ldso"
)

// fakeDirs is a dirChecker over a made-up machine: directories usable (and
// whether they exist), and directories of other distributions.
type fakeDirs struct {
	usableDirs map[string]bool // dir → exists
	foreignDir map[string]bool
}

func (f *fakeDirs) host(dir string) string { return "/host" + dir }

func (f *fakeDirs) usable(dir string) (ok, exists bool) {
	exists, ok = f.usableDirs[dir]
	return ok, exists
}

func (f *fakeDirs) foreign(dir string, _ *Step) bool { return f.foreignDir[dir] }

func rpath(dirs ...string) []ldso.SearchDir {
	var out []ldso.SearchDir
	for _, d := range dirs {
		out = append(out, ldso.SearchDir{Via: ldso.ViaRunPath, Source: "RUNPATH", Entry: d, Dir: d})
	}
	return out
}

func decideOne(t *testing.T, s *Step, dc dirChecker) Decision {
	t.Helper()
	ds := Decide(&Plan{Steps: []*Step{s}}, dc)
	if len(ds) != 1 || ds[0].Step != s {
		t.Fatalf("Decide gave %d decisions for one step", len(ds))
	}
	return ds[0]
}

func placements(d Decision) map[string][]string {
	out := map[string][]string{}
	for _, p := range d.Placements {
		out[p.Dir] = p.For
	}
	return out
}

// TestDecideSharedDirectory checks that a directory every needing object
// searches is taken for all of them over each one's own best.
func TestDecideSharedDirectory(t *testing.T) {
	dc := &fakeDirs{usableDirs: map[string]bool{"/a/lib": true, "/b/lib": true, "/shared/lib": true}}
	need := &Need{Soname: "libx.so.1", Requests: []Request{
		{Object: "/a/liba.so", Searched: rpath("/a/lib", "/shared/lib")},
		{Object: "/b/libb.so", Searched: rpath("/b/lib", "/shared/lib")},
	}}
	d := decideOne(t, &Step{Component: "libx", needs: []*Need{need}}, dc)
	got := placements(d)
	if len(got) != 1 || !slices.Equal(got["/shared/lib"], []string{"/a/liba.so", "/b/libb.so"}) || d.Script != nil {
		t.Fatalf("placements %v, activation %v; want /shared/lib for both", got, d.Script)
	}
	p := d.Placements[0]
	if p.HostDir != "/host/shared/lib" || p.Rule != ldso.ViaRunPath || p.Create {
		t.Errorf("placement %+v", p)
	}
}

// TestDecidePreferences checks the order of preference among one object's
// directories: named after the component, then existing, then earlier in
// the search; LD_LIBRARY_PATH, relative, unusable and foreign directories
// never; and the activation script when nothing is left.
func TestDecidePreferences(t *testing.T) {
	dc := &fakeDirs{
		usableDirs: map[string]bool{"/first": false, "/exists": true, "/site/cusparselt/lib": false, "/other/lib": true},
		foreignDir: map[string]bool{"/other/lib": true},
	}
	step := func(searched ...ldso.SearchDir) *Step {
		return &Step{Component: "libcusparse_lt", Product: "cusparselt", needs: []*Need{{Soname: "libcusparseLt.so.0",
			Requests: []Request{{Object: "/pkg/lib.so", Searched: searched}}}}}
	}
	llp := ldso.SearchDir{Via: ldso.ViaLDLibraryPath, Source: "LD_LIBRARY_PATH", Entry: "/exists", Dir: "/exists"}
	for _, tc := range []struct {
		name     string
		searched []ldso.SearchDir
		want     string // "" for the activation script
		create   bool
	}{
		{"named for the component, even to create", rpath("/first", "/exists", "/site/cusparselt/lib"), "/site/cusparselt/lib", true},
		{"existing over earlier", rpath("/first", "/exists"), "/exists", false},
		{"earlier among the same", rpath("/first"), "/first", true},
		{"foreign skipped", rpath("/other/lib", "/first"), "/first", true},
		{"unusable, relative, LD_LIBRARY_PATH", append(rpath("/usr/lib/x86_64-linux-gnu", "lib"), llp), "", false},
		{"foreign alone", rpath("/other/lib"), "", false},
	} {
		d := decideOne(t, step(tc.searched...), dc)
		if tc.want == "" {
			if len(d.Placements) != 0 || d.Script == nil || !slices.Equal(d.Script.For, []string{"/pkg/lib.so"}) {
				t.Errorf("%s: placements %+v, activation %+v; want the activation script", tc.name, d.Placements, d.Script)
			}
			continue
		}
		if len(d.Placements) != 1 || d.Placements[0].Dir != tc.want || d.Placements[0].Create != tc.create || d.Script != nil {
			t.Errorf("%s: placements %+v; want %s (create %v)", tc.name, d.Placements, tc.want, tc.create)
		}
	}
}

// TestDecideOwned checks that a library a distribution's RECORD lists goes
// back where RECORD puts it, under RECORD's name, whatever the searches
// say; two such libraries of one directory share one placement.
func TestDecideOwned(t *testing.T) {
	site := t.TempDir()
	libDir := filepath.Join(site, "nvidia", "cu13", "lib")
	if err := os.MkdirAll(libDir, 0o755); err != nil {
		t.Fatal(err)
	}
	owned := func(name, by string) *Need {
		return &Need{Soname: name, NeededBy: []string{by},
			Requests: []Request{{Object: by, Searched: rpath("/elsewhere")}},
			Owner:    &OwnedLib{Name: name, Path: filepath.Join(libDir, name), Dist: "nvidia-x", Version: "13.0"}}
	}
	missingDir := filepath.Join(site, "nvidia", "absent", "lib")
	absent := &Need{Soname: "liby.so.1", NeededBy: []string{"/pkg/c.so"},
		Owner: &OwnedLib{Name: "liby.so.1", Path: filepath.Join(missingDir, "liby.so.1"), Dist: "nvidia-y", Version: "1"}}
	dc := &fakeDirs{usableDirs: map[string]bool{"/elsewhere": true}}
	d := decideOne(t, &Step{Component: "libx", needs: []*Need{owned("libx.so.13", "/pkg/a.so"), owned("libx_extra.so.13", "/pkg/b.so"), absent}}, dc)
	if len(d.Placements) != 2 || d.Script != nil {
		t.Fatalf("placements %+v, activation %+v", d.Placements, d.Script)
	}
	p := d.Placements[0]
	if p.Dir != libDir || p.HostDir != libDir || p.Owner != "nvidia-x" || p.Create ||
		!slices.Equal(p.Names, []string{"libx.so.13", "libx_extra.so.13"}) || !slices.Equal(p.For, []string{"/pkg/a.so", "/pkg/b.so"}) {
		t.Errorf("owned placement %+v", p)
	}
	if q := d.Placements[1]; q.Dir != missingDir || !q.Create || q.Owner != "nvidia-y" {
		t.Errorf("owned placement in a directory to create %+v", q)
	}
}
