package gpuarch

import (
	"strings"
	"testing"
)

func cc(t *testing.T, s string) CC {
	t.Helper()
	c, err := ParseCC(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func target(t *testing.T, s string) Target {
	t.Helper()
	x, err := ParseTarget(s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestParse(t *testing.T) {
	for in, want := range map[string]CC{"9.0": {9, 0}, "90": {9, 0}, "sm_90": {9, 0}, "12.1": {12, 1}, "121": {12, 1}, "8.7": {8, 7}, "110": {11, 0}} {
		if got, err := ParseCC(in); err != nil || got != want {
			t.Errorf("ParseCC(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "9", "sm_90a", "9.10", "abc", "1234", "-1.0", "0.5"} {
		if _, err := ParseCC(bad); err == nil {
			t.Errorf("ParseCC(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{"sm_90a": "sm_90a", "compute_100f": "sm_100f", "120": "sm_120", "sm_87": "sm_87"} {
		if got, err := ParseTarget(in); err != nil || got.SASS() != want {
			t.Errorf("ParseTarget(%q) = %v, %v", in, got.SASS(), err)
		}
	}
	for in, want := range map[string]Version{"13.0": {13, 0}, "13000": {13, 0}, "12080": {12, 8}, "12.9": {12, 9}} {
		if got, err := ParseVersion(in); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v", in, got, err)
		}
	}
}

// TestSASSRules: binary compatibility within a major only, upwards in the
// minor; arch-specific code on its exact device; family code across its
// family.
func TestSASSRules(t *testing.T) {
	cases := []struct {
		code, dev string
		runs      bool
	}{
		{"sm_86", "8.9", true},    // same major, higher minor
		{"sm_80", "8.7", true},    // Orin runs sm_80 code
		{"sm_89", "8.6", false},   // never downwards
		{"sm_80", "9.0", false},   // never across majors
		{"sm_90", "9.0", true},    // exact
		{"sm_100", "11.0", false}, // Thor is not 10.x
		{"sm_100", "10.3", true},
		{"sm_120", "12.1", true}, // GB10 runs RTX 50 code
		{"sm_90a", "9.0", true},  // arch-specific, exact device
		{"sm_100a", "10.3", false},
		{"sm_120a", "12.1", false},
		{"sm_100f", "10.3", true}, // family
		{"sm_100f", "11.0", false},
		{"sm_101f", "10.3", false}, // a family of its own
		{"sm_101f", "10.1", true},
		{"sm_120f", "12.1", true},
	}
	for _, c := range cases {
		if got := SASSRuns(target(t, c.code), cc(t, c.dev)); got != c.runs {
			t.Errorf("SASSRuns(%s, %s) = %v, want %v", c.code, c.dev, got, c.runs)
		}
	}
}

// TestPTXRules: PTX compiles for its own and every later device, across
// majors; arch- and family-specific PTX as their SASS.
func TestPTXRules(t *testing.T) {
	cases := []struct {
		code, dev string
		jits      bool
	}{
		{"compute_80", "9.0", true},
		{"compute_80", "11.0", true},
		{"compute_80", "12.1", true},
		{"compute_90", "8.9", false},
		{"compute_120", "11.0", false},
		{"compute_90a", "9.0", true},
		{"compute_90a", "10.0", false},
		{"compute_100f", "10.3", true},
		{"compute_100f", "12.0", false},
	}
	for _, c := range cases {
		if got := PTXJITs(target(t, c.code), cc(t, c.dev)); got != c.jits {
			t.Errorf("PTXJITs(%s, %s) = %v, want %v", c.code, c.dev, got, c.jits)
		}
	}
}

// carried builds what a library carries: one container per list of
// entries, written "sm_80", "compute_80@8.7" (PTX of ISA 8.7), "sm_100a!"
// (variant named by the header); sizes 1000 bytes each.
func carried(t *testing.T, containers ...[]string) *Carried {
	t.Helper()
	c := &Carried{}
	for _, list := range containers {
		var es []Entry
		for _, s := range list {
			known := strings.HasSuffix(s, "!")
			s = strings.TrimSuffix(s, "!")
			e := Entry{Kind: KindELF, Bytes: 1000, Size: 1000, VariantKnown: known}
			if name, isa, ok := strings.Cut(s, "@"); ok {
				v, err := ParseVersion(isa)
				if err != nil {
					t.Fatal(err)
				}
				e.Kind, e.ISA, s = KindPTX, v, name
			}
			e.Target = target(t, s)
			es = append(es, e)
		}
		c.AddContainer(es)
	}
	return c
}

func irOnly() *Carried {
	c := &Carried{}
	c.AddContainer([]Entry{{Kind: KindIR, Target: Target{SM: 90}}})
	return c
}

func TestJudge(t *testing.T) {
	torch := []string{"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"} // libtorch_cuda.so of torch 2.11 cu130
	cu128 := []string{"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"} // a cu128 wheel: no sm_110, no PTX
	cases := []struct {
		name    string
		dev     string
		driver  Version
		c       *Carried
		builder bool
		want    Verdict
		uses    string
		reason  string
	}{
		{"sm_80 only on H100", "9.0", Version{}, carried(t, []string{"sm_80"}), false, None, "", "nothing runs on 9.0: carries sm_80"},
		{"sm_80 and PTX on H100", "9.0", Version{13, 0}, carried(t, []string{"sm_80", "compute_80@9.0"}), false, JIT, "compute_80", "the driver compiles its compute_80 PTX (ISA 9.0, 1000 B)"},
		{"sm_90 on H100", "9.0", Version{}, carried(t, []string{"sm_90"}), false, Native, "sm_90", "native code for 9.0: sm_90"},
		{"torch on H100", "9.0", Version{}, carried(t, torch, torch), false, Native, "sm_90", ""},
		{"torch on L4", "8.9", Version{}, carried(t, torch), false, Native, "sm_86", ""},
		{"cu128 torch on Thor", "11.0", Version{}, carried(t, cu128), false, None, "", "nothing runs on 11.0"},
		{"sm_101 code on Thor", "11.0", Version{}, carried(t, []string{"sm_101"}), false, None, "", "CUDA 13 renamed"},
		{"cuFFT on H100", "9.0", Version{}, carried(t, []string{"sm_75"}), true, RuntimeCompiled, "", "NVRTC"},
		{"cuFFT on Turing", "7.5", Version{}, carried(t, []string{"sm_75"}), true, Native, "sm_75", ""},
		{"PTX newer than the driver", "9.0", Version{12, 8}, carried(t, []string{"sm_80", "compute_90@9.0"}), false, None, "", "needs a driver for CUDA 13.0 or newer, and this one runs CUDA 12.8"},
		{"PTX with the driver unknown", "9.0", Version{}, carried(t, []string{"compute_90@9.0"}), false, JIT, "compute_90", "with a driver for CUDA 13.0 or newer"},
		{"the newest PTX the driver runs", "9.0", Version{12, 8}, carried(t, []string{"compute_80@8.7", "compute_90@9.0"}), false, JIT, "compute_80", "ISA 8.7"},
		{"arch-specific PTX elsewhere", "10.0", Version{}, carried(t, []string{"compute_90a@8.0!"}), false, None, "", ""},
		{"arch-specific code named", "10.3", Version{}, carried(t, []string{"sm_100a!"}), false, None, "", ""},
		{"NVVM IR only", "9.0", Version{}, irOnly(), false, None, "", "carries only NVVM IR for link-time optimisation"},
		{"no fat binary", "9.0", Version{}, &Carried{}, false, NoCode, "", "carries no GPU code"},
		{"no fat binary, a builder", "9.0", Version{}, &Carried{}, true, RuntimeCompiled, "", "carries no GPU code; it builds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b *Builder
			if c.builder {
				b = &Builder{How: "it builds kernels with NVRTC"}
			}
			j := Judge(cc(t, c.dev), c.driver, c.c, b)
			t.Log(j.Verdict, j.Reason)
			if j.Verdict != c.want || j.Uses != c.uses || !strings.Contains(j.Reason, c.reason) {
				t.Errorf("got %s (uses %q): %s", j.Verdict, j.Uses, j.Reason)
			}
		})
	}
}

// TestJudgeAssumed: an sm_100 entry whose header names no variant runs on
// 10.3 only if it is not an sm_100a build; the verdict says so, and stops
// saying so once an entry settles it.
func TestJudgeAssumed(t *testing.T) {
	if j := Judge(CC{8, 9}, Version{}, carried(t, []string{"sm_86"}), nil); j.Assumed {
		t.Errorf("sm_86 has no arch-specific build: %+v", j)
	}
	j := Judge(CC{10, 3}, Version{}, carried(t, []string{"sm_100"}), nil)
	if j.Verdict != Native || !j.Assumed || !strings.Contains(j.Reason, "if sm_100 is not an arch-specific build") {
		t.Errorf("%+v", j)
	}
	for _, c := range []*Carried{carried(t, []string{"sm_100!"}), carried(t, []string{"sm_100", "sm_103"})} {
		if j := Judge(CC{10, 3}, Version{}, c, nil); j.Verdict != Native || j.Assumed {
			t.Errorf("%+v", j)
		}
	}
	if j := Judge(CC{9, 0}, Version{}, carried(t, []string{"sm_90"}), nil); j.Assumed {
		t.Errorf("exact match assumed: %+v", j)
	}
}

// TestJudgeContainers: the driver picks code per container, so a library
// with native code for most kernels and PTX for others says both.
func TestJudgeContainers(t *testing.T) {
	c := carried(t, []string{"sm_80", "sm_90"}, []string{"sm_80", "sm_90"}, []string{"sm_80", "compute_80@8.0"}, []string{"sm_75"})
	j := Judge(CC{9, 0}, Version{13, 0}, c, nil)
	want := ContainerCount{Total: 4, Native: 2, JIT: 1, None: 1}
	if j.Verdict != Native || j.Containers == nil || *j.Containers != want || j.JITBytes != 1000 ||
		!strings.Contains(j.Reason, "1 of 4 containers have only PTX") || !strings.Contains(j.Reason, "1 of 4 containers carry nothing") {
		t.Errorf("%+v %+v", j, j.Containers)
	}
	if len(c.groups) != 3 {
		t.Errorf("%d groups, want 3 (two containers carry the same)", len(c.groups))
	}
}

func TestToolkitOfISA(t *testing.T) {
	// Every ISA maps to a release no older than the previous ISA's.
	prev := Version{}
	for _, p := range ptxToolkits {
		if p.cuda.Less(prev) {
			t.Errorf("ISA %s → CUDA %s, older than %s", p.isa, p.cuda, prev)
		}
		prev = p.cuda
	}
	if v, ok := ToolkitOfISA(Version{9, 0}); !ok || v != (Version{13, 0}) {
		t.Errorf("ISA 9.0 → %v %v", v, ok)
	}
	if _, ok := ToolkitOfISA(Version{99, 0}); ok {
		t.Error("ISA 99.0 known")
	}
}
