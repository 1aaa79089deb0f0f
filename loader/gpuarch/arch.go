// Package gpuarch reads which GPU architectures the CUDA fat binaries of a library carry code for, and judges whether that code runs on a device.
package gpuarch

import (
	"fmt"
	"strconv"
	"strings"
)

// CC is a compute capability, major.minor: 9.0 for an H100, 12.1 for a GB10.
type CC struct{ Major, Minor int }

// String writes 9.0.
func (c CC) String() string { return fmt.Sprintf("%d.%d", c.Major, c.Minor) }

// SM is the architecture number NVIDIA's tools write: 90, 121.
func (c CC) SM() int { return c.Major*10 + c.Minor }

// IsZero reports an unknown compute capability.
func (c CC) IsZero() bool { return c == CC{} }

// ccOfSM splits an architecture number: 87 is 8.7, 121 is 12.1. The minor
// is always one digit (NVIDIA's numbering).
func ccOfSM(sm int) CC { return CC{Major: sm / 10, Minor: sm % 10} }

// MarshalText writes the JSON form, "9.0".
func (c CC) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// ParseCC reads a compute capability as users and tools write it: "9.0",
// "12.1", "90", "121", "sm_90". Variants ("sm_90a") name code, not
// devices, and are refused.
func ParseCC(s string) (CC, error) {
	in := s
	s = strings.TrimPrefix(strings.TrimSpace(s), "sm_")
	bad := func() (CC, error) {
		return CC{}, fmt.Errorf("%q is not a compute capability: write it as 9.0, 90 or sm_90", in)
	}
	if maj, min, ok := strings.Cut(s, "."); ok {
		a, err1 := strconv.Atoi(maj)
		b, err2 := strconv.Atoi(min)
		if err1 != nil || err2 != nil || len(min) != 1 || a < 1 || a > 99 || b < 0 {
			return bad()
		}
		return CC{a, b}, nil
	}
	if len(s) < 2 || len(s) > 3 {
		return bad()
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 10 {
		return bad()
	}
	return ccOfSM(n), nil
}

// Variant says which devices of its major a compiled target is meant for.
type Variant uint8

const (
	// Plain code (sm_90, compute_80) follows the ordinary rules; it is
	// also what an entry whose header names no variant is taken to be.
	Plain Variant = iota
	// ArchSpecific code (sm_90a, sm_100a) runs on that exact device only.
	ArchSpecific
	// FamilySpecific code (sm_100f, CUDA 12.9 and later) runs on the
	// devices of its family.
	FamilySpecific
)

func (v Variant) suffix() string {
	switch v {
	case ArchSpecific:
		return "a"
	case FamilySpecific:
		return "f"
	}
	return ""
}

// Target is the architecture one fat binary entry was compiled for.
type Target struct {
	SM      int // 90 for sm_90
	Variant Variant
}

// CC is the compute capability the target names.
func (t Target) CC() CC { return ccOfSM(t.SM) }

// SASS names the target as native code: sm_90a.
func (t Target) SASS() string { return "sm_" + strconv.Itoa(t.SM) + t.Variant.suffix() }

// PTX names the target as PTX: compute_90a.
func (t Target) PTX() string { return "compute_" + strconv.Itoa(t.SM) + t.Variant.suffix() }

// ParseTarget reads "sm_90a", "compute_100f", "90", "120a".
func ParseTarget(s string) (Target, error) {
	in := s
	s = strings.TrimPrefix(strings.TrimPrefix(s, "sm_"), "compute_")
	t := Target{}
	switch {
	case strings.HasSuffix(s, "a"):
		t.Variant, s = ArchSpecific, strings.TrimSuffix(s, "a")
	case strings.HasSuffix(s, "f"):
		t.Variant, s = FamilySpecific, strings.TrimSuffix(s, "f")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 10 || n > 999 {
		return Target{}, fmt.Errorf("%q is not a GPU architecture (sm_90, compute_80, sm_100a)", in)
	}
	t.SM = n
	return t, nil
}

// Version is a CUDA release or a PTX ISA version, major.minor.
type Version struct{ Major, Minor int }

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// IsZero reports an unknown version.
func (v Version) IsZero() bool { return v == Version{} }

// Less orders versions.
func (v Version) Less(o Version) bool {
	return v.Major < o.Major || v.Major == o.Major && v.Minor < o.Minor
}

// MarshalText writes the JSON form, "13.0".
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// ParseVersion reads "13.0" or the driver API's integer form, 13000.
func ParseVersion(s string) (Version, error) {
	if maj, min, ok := strings.Cut(s, "."); ok {
		a, err1 := strconv.Atoi(maj)
		b, err2 := strconv.Atoi(min)
		if err1 != nil || err2 != nil || a < 1 || b < 0 {
			return Version{}, fmt.Errorf("%q is not a CUDA version (13.0)", s)
		}
		return Version{a, b}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1000 {
		return Version{}, fmt.Errorf("%q is not a CUDA version (13.0)", s)
	}
	return Version{n / 1000, n % 1000 / 10}, nil
}

// ptxToolkits maps each PTX ISA version to the CUDA release that
// introduced it: a driver runs PTX of an ISA only if it is at least that
// release's driver. From the PTX ISA documentation, "Release Notes",
// table "PTX Release History"
// (https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes).
// CUDA 12.6 kept ISA 8.5 of CUDA 12.5.
var ptxToolkits = []struct{ isa, cuda Version }{
	{Version{6, 0}, Version{9, 0}}, {Version{6, 1}, Version{9, 1}}, {Version{6, 2}, Version{9, 2}},
	{Version{6, 3}, Version{10, 0}}, {Version{6, 4}, Version{10, 1}}, {Version{6, 5}, Version{10, 2}},
	{Version{7, 0}, Version{11, 0}}, {Version{7, 1}, Version{11, 1}}, {Version{7, 2}, Version{11, 2}},
	{Version{7, 3}, Version{11, 3}}, {Version{7, 4}, Version{11, 4}}, {Version{7, 5}, Version{11, 5}},
	{Version{7, 6}, Version{11, 6}}, {Version{7, 7}, Version{11, 7}}, {Version{7, 8}, Version{11, 8}},
	{Version{8, 0}, Version{12, 0}}, {Version{8, 1}, Version{12, 1}}, {Version{8, 2}, Version{12, 2}},
	{Version{8, 3}, Version{12, 3}}, {Version{8, 4}, Version{12, 4}}, {Version{8, 5}, Version{12, 5}},
	{Version{8, 6}, Version{12, 7}}, {Version{8, 7}, Version{12, 8}}, {Version{8, 8}, Version{12, 9}},
	{Version{9, 0}, Version{13, 0}}, {Version{9, 1}, Version{13, 1}},
}

// ToolkitOfISA is the CUDA release that introduced a PTX ISA version; ok
// is false for a version the table does not know (newer than it).
func ToolkitOfISA(isa Version) (Version, bool) {
	for _, p := range ptxToolkits {
		if p.isa == isa {
			return p.cuda, true
		}
	}
	return Version{}, false
}
