package resolver

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/platform"
)

// planCatalog has: libfoo, whose one archive per platform provides two
// sonames; libbar in two CUDA variants for x86_64; a driver library; and
// libonlysbsa, with an archive for linux-sbsa alone.
const planCatalog = `format: 1
products:
  p:
    base_url: https://example.com/p/
drivers:
  libcuda.so.1:
    advice: install the NVIDIA driver
components:
  libfoo:
    product: p
    releases:
      - version: 2.0.1
        archives:
          - platform: linux-x86_64
            path: libfoo/libfoo-2.0.1-x86_64.tar.xz
            sha256: 1111111111111111111111111111111111111111111111111111111111111111
            size: 100
            sonames: [libfoo.so.2, libfoo_extra.so.2]
      - version: 1.5.0
        archives:
          - platform: linux-x86_64
            path: libfoo/libfoo-1.5.0-x86_64.tar.xz
            sha256: 2222222222222222222222222222222222222222222222222222222222222222
            size: 90
            sonames: [libfoo.so.2, libfoo_extra.so.2]
  libbar:
    product: p
    releases:
      - version: 3.0
        archives:
          - platform: linux-x86_64
            cuda_variant: cuda12
            path: libbar/libbar-3.0-cuda12.tar.xz
            sha256: 3333333333333333333333333333333333333333333333333333333333333333
            size: 7
            sonames: [libbar.so.3]
          - platform: linux-x86_64
            cuda_variant: cuda13
            path: libbar/libbar-3.0-cuda13.tar.xz
            sha256: 4444444444444444444444444444444444444444444444444444444444444444
            size: 8
            sonames: [libbar.so.3]
  libonlysbsa:
    product: p
    releases:
      - version: 1.0
        archives:
          - platform: linux-sbsa
            path: libonlysbsa/libonlysbsa-1.0.tar.xz
            sha256: 5555555555555555555555555555555555555555555555555555555555555555
            size: 5
            sonames: [libonlysbsa.so.1]
`

func planNeeds(names ...string) []*Need {
	var out []*Need
	for _, n := range names {
		out = append(out, &Need{Soname: n, NeededBy: []string{"/pkg/lib/user_of_" + n}})
	}
	return out
}

// TestMakePlan checks the plan against what the catalog itself answers for
// each need: one step per archive, carrying every need it provides; the
// rest unresolved with the catalog's reason and advice that fits it.
func TestMakePlan(t *testing.T) {
	cat, err := catalog.Parse([]byte(planCatalog), "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	needs := planNeeds("libfoo.so.2", "libbar.so.3", "libfoo_extra.so.2", "libcuda.so.1", "libonlysbsa.so.1", "libnowhere.so.9")
	plan := MakePlan(needs, cat, platform.LinuxX86_64, 13)
	if plan.Platform != platform.LinuxX86_64 || plan.CUDAMajor != 13 {
		t.Errorf("plan for %s CUDA %d", plan.Platform, plan.CUDAMajor)
	}

	// Steps: libfoo's archive once for both its sonames, then libbar's.
	if len(plan.Steps) != 2 {
		t.Fatalf("%d steps, want 2: %+v", len(plan.Steps), plan.Steps)
	}
	for i, want := range []struct {
		soname   string
		provides []string
	}{{"libfoo.so.2", []string{"libfoo.so.2", "libfoo_extra.so.2"}}, {"libbar.so.3", []string{"libbar.so.3"}}} {
		m, err := cat.Which(want.soname, catalog.Query{Platform: platform.LinuxX86_64, CUDAMajor: 13})
		if err != nil {
			t.Fatal(err)
		}
		s := plan.Steps[i]
		if s.Component != m.Component || s.Version != m.Version || s.CUDAVariant != m.CUDAVariant || s.URL != m.URL || s.SHA256 != m.SHA256 || s.Size != m.Size || !slices.Equal(s.Sonames, m.Sonames) {
			t.Errorf("step %d = %+v, want the catalog's match %+v", i, s, m)
		}
		if !slices.Equal(s.Provides, want.provides) || len(s.needs) != len(want.provides) {
			t.Errorf("step %d provides %v (%d needs), want %v", i, s.Provides, len(s.needs), want.provides)
		}
	}
	if plan.Steps[1].CUDAVariant != "cuda13" {
		t.Errorf("libbar for CUDA 13 came as %q", plan.Steps[1].CUDAVariant)
	}

	// Unresolved, in the order of the needs.
	byName := map[string]Unresolved{}
	var order []string
	for _, u := range plan.Unresolved {
		byName[u.Soname] = u
		order = append(order, u.Soname)
	}
	if !slices.Equal(order, []string{"libcuda.so.1", "libonlysbsa.so.1", "libnowhere.so.9"}) {
		t.Fatalf("unresolved %v", order)
	}
	if u := byName["libcuda.so.1"]; u.Kind != UnresolvedDriver || u.Advice != "install the NVIDIA driver" || !slices.Equal(u.NeededBy, []string{"/pkg/lib/user_of_libcuda.so.1"}) {
		t.Errorf("driver library: %+v", u)
	}
	for _, name := range []string{"libonlysbsa.so.1", "libnowhere.so.9"} {
		_, err := cat.Which(name, catalog.Query{Platform: platform.LinuxX86_64, CUDAMajor: 13})
		nf, ok := err.(*catalog.NotFoundError)
		if !ok {
			t.Fatalf("%s: the catalog says %v", name, err)
		}
		if u := byName[name]; u.Kind != UnresolvedMissing || u.Reason != nf.Reason || u.Advice == "" {
			t.Errorf("%s: %+v, want the catalog's reason %q and advice", name, u, nf.Reason)
		}
	}
	if a := byName["libnowhere.so.9"].Advice; !strings.Contains(a, "--catalog") {
		t.Errorf("a soname no catalog knows: advice %q does not name --catalog", a)
	}
	if a := byName["libonlysbsa.so.1"].Advice; !strings.Contains(a, "libonlysbsa") {
		t.Errorf("a component without an archive here: advice %q does not name it", a)
	}

	// The download size counts what the store does not hold yet.
	if got, want := plan.Bytes(), plan.Steps[0].Size+plan.Steps[1].Size; got != want {
		t.Errorf("Bytes() = %d, want %d", got, want)
	}
	plan.Steps[0].Installed = true
	if got, want := plan.Bytes(), plan.Steps[1].Size; got != want {
		t.Errorf("Bytes() with a step installed = %d, want %d", got, want)
	}
}

// TestMakePlanAmbiguousAndPinned checks the advice for an answer that needs
// --cuda, and that a pin chooses the pinned release or explains its
// absence.
func TestMakePlanAmbiguousAndPinned(t *testing.T) {
	cat, err := catalog.Parse([]byte(planCatalog), "plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plan := MakePlan(planNeeds("libbar.so.3"), cat, platform.LinuxX86_64, 0)
	if len(plan.Steps) != 0 || len(plan.Unresolved) != 1 || !strings.Contains(plan.Unresolved[0].Advice, "--cuda") {
		t.Errorf("libbar without a CUDA major: steps %+v, unresolved %+v; want advice naming --cuda", plan.Steps, plan.Unresolved)
	}

	pinned := planNeeds("libfoo.so.2")
	pinned[0].Pin = catalog.Pin{Version: "1.5", By: "foo-wheel 1.5"}
	plan = MakePlan(pinned, cat, platform.LinuxX86_64, 13)
	if len(plan.Steps) != 1 || plan.Steps[0].Version != "1.5.0" || plan.Steps[0].Pin == "" {
		t.Errorf("libfoo pinned to 1.5: %+v", plan.Steps)
	}

	pinned[0].Pin = catalog.Pin{Version: "9.9", By: "foo-wheel 9.9"}
	plan = MakePlan(pinned, cat, platform.LinuxX86_64, 13)
	if len(plan.Steps) != 0 || len(plan.Unresolved) != 1 {
		t.Fatalf("libfoo pinned to an absent 9.9: steps %+v, unresolved %+v", plan.Steps, plan.Unresolved)
	}
	if u := plan.Unresolved[0]; !strings.Contains(u.Advice, "libfoo 9.9") || !strings.Contains(u.Advice, "9.x") {
		t.Errorf("absent pinned release: advice %q, want it to name libfoo 9.9 and a newer 9.x", u.Advice)
	}
}

// TestMakePlanKeepsTheToolkitRelease: libnvrtc-builtins is pinned (its
// wheel's version) and libnvrtc.so.13 is not (no installed distribution owns
// it); both come from the one archive of the pinned release, not libnvrtc
// from the newest toolkit, whose NVRTC would open builtins of another minor.
func TestMakePlanKeepsTheToolkitRelease(t *testing.T) {
	cat, err := catalog.Load(context.Background(), catalog.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pinned := &Need{Soname: "libnvrtc-builtins.so.13.0", NeededBy: []string{"libnvrtc.so.13"}, Pin: catalog.Pin{Version: "13.0.88", By: "nvidia-cuda-nvrtc==13.0.88"}}
	free := &Need{Soname: "libnvrtc.so.13", NeededBy: []string{"cupy/cuda/jitify.so"}}
	for _, order := range [][]*Need{{pinned, free}, {free, pinned}} {
		p := MakePlan(order, cat, platform.LinuxX86_64, 13)
		if len(p.Steps) != 1 || p.Steps[0].Version != "13.0.88" || len(p.Steps[0].Provides) != 2 {
			for _, s := range p.Steps {
				t.Logf("step %s %s for %v", s.Component, s.Version, s.Provides)
			}
			t.Fatalf("want one cuda_nvrtc 13.0.88 step for both needs, got %d step(s)", len(p.Steps))
		}
	}
	// Without the pin, the newest NVRTC of CUDA 13.
	newest, err := cat.Which("libnvrtc.so.13", catalog.Query{Platform: platform.LinuxX86_64, CUDAMajor: 13})
	if err != nil {
		t.Fatal(err)
	}
	if p := MakePlan([]*Need{free}, cat, platform.LinuxX86_64, 13); len(p.Steps) != 1 || p.Steps[0].Version != newest.Version {
		t.Fatalf("unpinned alone: %+v, want %s", p.Steps, newest.Version)
	}
}
