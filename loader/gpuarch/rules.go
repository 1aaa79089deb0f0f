package gpuarch

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/internal/humansize"
)

// The compatibility rules, from NVIDIA's CUDA C++ Programming Guide
// (https://docs.nvidia.com/cuda/cuda-c-programming-guide/):
//
//   - "Binary Compatibility": a cubin for compute capability X.y runs on
//     devices of compute capability X.z with z >= y only: never on an
//     older minor, never on another major (sm_86 code runs on 8.9, sm_100
//     code does not run on 11.0).
//   - "PTX Compatibility": PTX for compute_XY is compiled by the driver at
//     first use for any device of compute capability X.Y or higher.
//   - "Feature Set Compiler Targets" (CUDA 12.9): arch-specific targets
//     (sm_90a, compute_100a) run on that exact compute capability only;
//     family-specific targets (sm_100f) run on the later devices of their
//     family, the same major with an equal or higher minor.
//
// And from NVIDIA's CUDA Compatibility guide, "Application Compatibility"
// (https://docs.nvidia.com/deploy/cuda-compatibility/): PTX of a PTX ISA
// version is compiled only by a driver at least as new as the CUDA release
// that introduced the ISA (an older driver fails with
// CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222).
//
// CUDA 13.0 renamed Jetson Thor's sm_101 to sm_110 (CUDA 13.0 release
// notes); sm_101f forms a family of its own (the family table of LLVM's
// NVPTX target, NVPTX.td, following NVIDIA's).

// SASSRuns reports whether native code for t runs on a device.
func SASSRuns(t Target, dev CC) bool {
	tc := t.CC()
	switch t.Variant {
	case ArchSpecific:
		return tc == dev
	case FamilySpecific:
		return inFamily(tc, dev)
	}
	return tc.Major == dev.Major && tc.Minor <= dev.Minor
}

// PTXJITs reports whether the driver compiles PTX for t for a device
// (the driver's own version aside).
func PTXJITs(t Target, dev CC) bool {
	tc := t.CC()
	switch t.Variant {
	case ArchSpecific:
		return tc == dev
	case FamilySpecific:
		return inFamily(tc, dev)
	}
	return tc.SM() <= dev.SM()
}

func inFamily(tc, dev CC) bool {
	if tc.Major != dev.Major || dev.Minor < tc.Minor {
		return false
	}
	if tc == (CC{10, 1}) {
		return dev == tc
	}
	return true
}

// Verdict is what a device can do with a library's GPU code.
type Verdict string

const (
	// Native: the library carries native code (SASS) that runs there.
	Native Verdict = "native"
	// JIT: no native code, but PTX the driver compiles at first use.
	JIT Verdict = "jit"
	// RuntimeCompiled: nothing that runs as it is, but the library is
	// known to build its kernels at run time (NVRTC).
	RuntimeCompiled Verdict = "runtime-compiled"
	// None: nothing that can run there.
	None Verdict = "none"
	// NoCode: the library carries no GPU code at all.
	NoCode Verdict = "no-gpu-code"
)

// Judgement is a verdict with its reason.
type Judgement struct {
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
	// Uses names the code the driver takes: sm_86 on an 8.9 device, or
	// the PTX it compiles.
	Uses string `json:"uses,omitempty"`
	// JITBytes is the PTX compiled at first use (uncompressed where the
	// headers say), for JIT, or for the containers of a native library
	// that rely on PTX.
	JITBytes int64 `json:"jit_bytes,omitempty"`
	// NeedsDriver is the CUDA release the driver must run for that PTX.
	NeedsDriver *Version `json:"needs_driver_cuda,omitempty"`
	// Assumed marks a verdict that holds if entries whose headers name no
	// variant are plain, not arch-specific, builds.
	Assumed bool `json:"assumed,omitempty"`
	// Containers counts the fat binary containers by what runs of each:
	// the driver picks code per container.
	Containers *ContainerCount `json:"by_container,omitempty"`
}

// ContainerCount splits a library's containers by verdict.
type ContainerCount struct {
	Total  int `json:"total"`
	Native int `json:"native"`
	JIT    int `json:"jit"`
	None   int `json:"none"`
}

// Builder says how a library builds kernels at run time (see the runtime
// table), for libraries that carry no code for the device.
type Builder struct {
	How    string
	Source string
}

// Judge decides what a device of compute capability dev, with a driver
// that runs CUDA driver (zero when unknown), can do with what a library
// carries. rt is non-nil for a library known to build kernels at run time.
func Judge(dev CC, driver Version, c *Carried, rt *Builder) Judgement {
	if c.Empty() {
		if rt != nil {
			return Judgement{Verdict: RuntimeCompiled, Reason: "carries no GPU code; " + rt.How}
		}
		return Judgement{Verdict: NoCode, Reason: "carries no GPU code"}
	}
	t := tallyGroups(dev, driver, c)
	best := t.best
	j := Judgement{Verdict: best.verdict, Uses: best.uses, Containers: t.count}
	j.Assumed = best.verdict != None && (t.bestSure == nil || t.bestSure.rank() < best.rank())
	switch best.verdict {
	case Native:
		t.native(&j, dev)
	case JIT:
		t.jit(&j, dev, driver, c)
	default:
		t.none(&j, dev, driver, c, rt)
	}
	if j.Assumed {
		j.Reason += fmt.Sprintf(" (if %s is not an arch-specific build: the entry headers do not say)", best.uses)
	}
	return j
}

// tally is what the groups of a library's containers come to together.
type tally struct {
	count          *ContainerCount
	best, bestSure *groupVerdict // the best verdict, and the best not assumed
	jitBytes       int64
	needs          Version
	tooOld         map[string]Version // PTX the driver is too old for
}

// tallyGroups judges each group of c's containers and adds them up.
func tallyGroups(dev CC, driver Version, c *Carried) *tally {
	t := &tally{count: &ContainerCount{Total: c.Containers}, tooOld: map[string]Version{}}
	for _, g := range c.groups {
		v := judgeGroup(dev, driver, g)
		switch v.verdict {
		case Native:
			t.count.Native += g.containers
		case JIT:
			t.count.JIT += g.containers
			t.jitBytes += v.jitBytes
			if t.needs.Less(v.needs) {
				t.needs = v.needs
			}
		default:
			t.count.None += g.containers
			for k, ver := range v.tooOld {
				t.tooOld[k] = ver
			}
		}
		if t.best == nil || v.rank() > t.best.rank() {
			t.best = v
		}
		if !v.assumed && (t.bestSure == nil || v.rank() > t.bestSure.rank()) {
			t.bestSure = v
		}
	}
	return t
}

// native gives j the reason of a library with native code for dev.
func (t *tally) native(j *Judgement, dev CC) {
	count := t.count
	j.Reason = fmt.Sprintf("native code for %s: %s", dev, t.best.uses)
	if count.JIT > 0 {
		j.JITBytes = t.jitBytes
		j.Reason += fmt.Sprintf("; %d of %d containers have only PTX for it (%s compiled at first use)", count.JIT, count.Total, humansize.Bytes(t.jitBytes))
	}
	if count.None > 0 {
		j.Reason += fmt.Sprintf("; %d of %d containers carry nothing for it", count.None, count.Total)
	}
}

// jit gives j the reason and needs of a library whose best for dev is PTX
// the driver compiles.
func (t *tally) jit(j *Judgement, dev CC, driver Version, c *Carried) {
	j.JITBytes = t.jitBytes
	if !t.needs.IsZero() {
		n := t.needs
		j.NeedsDriver = &n
	}
	j.Reason = fmt.Sprintf("no native code for %s%s; the driver compiles its %s PTX (ISA %s, %s) at first use",
		dev, carriedSASS(c), t.best.uses, t.best.isa, humansize.Bytes(t.jitBytes))
	if driver.IsZero() && !t.needs.IsZero() {
		j.Reason += fmt.Sprintf(", with a driver for CUDA %s or newer", t.needs)
	}
	if t.count.None > 0 {
		j.Reason += fmt.Sprintf("; %d of %d containers carry nothing for it", t.count.None, t.count.Total)
	}
}

// none gives j the verdict and reason of a library with nothing dev runs.
func (t *tally) none(j *Judgement, dev CC, driver Version, c *Carried, rt *Builder) {
	if rt != nil {
		j.Verdict = RuntimeCompiled
		j.Reason = fmt.Sprintf("no code for %s (carries %s); %s", dev, carriedAll(c), rt.How)
		return
	}
	j.Reason = fmt.Sprintf("nothing runs on %s: carries %s", dev, carriedAll(c))
	for _, k := range slices.Sorted(maps.Keys(t.tooOld)) {
		j.Reason += fmt.Sprintf("; its %s needs a driver for CUDA %s or newer, and this one runs CUDA %s", k, t.tooOld[k], driver)
	}
	if len(t.tooOld) == 0 && len(c.SASS) == 0 && len(c.PTX) == 0 {
		j.Reason = fmt.Sprintf("nothing runs on %s: carries only %s, which the driver does not load by itself", dev, otherText(c.Other))
	}
	if renamed := thorRename(dev, c); renamed != "" {
		j.Reason += "; " + renamed
	}
}

// groupVerdict is the verdict for one group of containers.
type groupVerdict struct {
	verdict  Verdict
	uses     string
	isa      Version // of the PTX compiled
	jitBytes int64
	needs    Version
	assumed  bool
	tooOld   map[string]Version
}

func (v *groupVerdict) rank() int {
	switch v.verdict {
	case Native:
		return 2
	case JIT:
		return 1
	}
	return 0
}

func judgeGroup(dev CC, driver Version, g *group) *groupVerdict {
	// The driver takes the newest native code that runs, then the newest
	// PTX it can compile.
	var pick *Entry
	sure := false
	for i := range g.sass {
		e := &g.sass[i]
		if !SASSRuns(e.Target, dev) {
			continue
		}
		// An entry of another minor runs only if it is not arch-specific;
		// the header may not say.
		certain := variantSettled(e, dev)
		if pick == nil || e.Target.SM > pick.Target.SM || e.Target.SM == pick.Target.SM && certain {
			pick = e
		}
		sure = sure || certain
	}
	if pick != nil {
		return &groupVerdict{verdict: Native, uses: pick.Target.SASS(), assumed: !sure}
	}
	v := &groupVerdict{verdict: None}
	for i := range g.ptx {
		e := &g.ptx[i]
		if !PTXJITs(e.Target, dev) {
			continue
		}
		need, known := ToolkitOfISA(e.ISA)
		if !driver.IsZero() && (!known || driver.Less(need)) {
			if v.tooOld == nil {
				v.tooOld = map[string]Version{}
			}
			if !known {
				need = e.ISA // shown as the ISA; no driver this table knows runs it
			}
			v.tooOld[e.Target.PTX()+" PTX (ISA "+e.ISA.String()+")"] = need
			continue
		}
		if pick == nil || e.Target.SM > pick.Target.SM || e.Target.SM == pick.Target.SM && pick.ISA.Less(e.ISA) {
			pick = e
		}
	}
	if pick == nil {
		return v
	}
	size := pick.Size
	if size == 0 {
		size = pick.Bytes
	}
	need, _ := ToolkitOfISA(pick.ISA)
	return &groupVerdict{verdict: JIT, uses: pick.Target.PTX(), isa: pick.ISA, jitBytes: size, needs: need, assumed: !variantSettled(pick, dev)}
}

// variantSettled reports an entry that runs on dev whatever its variant:
// its header named it, it is for dev exactly, or it predates arch-specific
// targets (sm_90a was the first).
func variantSettled(e *Entry, dev CC) bool {
	return e.VariantKnown || e.Target.SM == dev.SM() || e.Target.SM < 90
}

// thorRename explains sm_101 code on an 11.0 device.
func thorRename(dev CC, c *Carried) string {
	if dev != (CC{11, 0}) {
		return ""
	}
	for _, s := range c.SASS {
		if s.Target.SM == 101 {
			return "CUDA 13 renamed this device's sm_101 to sm_110: sm_101 code built by CUDA 12.8 or 12.9 is not sm_110 code"
		}
	}
	return ""
}

// carriedSASS writes " (carries sm_80, sm_86)", or nothing for a library
// without native code.
func carriedSASS(c *Carried) string {
	if len(c.SASS) == 0 {
		return ""
	}
	var names []string
	for _, s := range c.SASS {
		names = append(names, s.Target.SASS())
	}
	return " (carries " + strings.Join(names, ", ") + ")"
}

func carriedAll(c *Carried) string {
	var names []string
	for _, s := range c.SASS {
		names = append(names, s.Target.SASS())
	}
	for _, p := range c.PTX {
		n := p.Target.PTX() + " PTX"
		if len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return otherText(c.Other)
	}
	return strings.Join(names, ", ")
}

func otherText(other map[Kind]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(other)) {
		switch k {
		case KindIR:
			parts = append(parts, "NVVM IR for link-time optimisation")
		default:
			parts = append(parts, fmt.Sprintf("entries of kind %#x", uint16(k)))
		}
	}
	return strings.Join(parts, " and ")
}
