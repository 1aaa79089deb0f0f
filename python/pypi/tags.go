package pypi

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// Host is what a wheel's tags are matched against.
type Host struct {
	// Machine is the machine as wheel tags name it: x86_64, aarch64.
	Machine string
	// Glibc is the host's glibc version ("2.35"); "" when its C library is
	// not glibc.
	Glibc string
	// Musl is the host's musl version ("1.2") when its C library is musl.
	Musl string
	// Python is the interpreter's version ("3.12"); "" accepts only wheels
	// for any Python 3 (py3-none), as NVIDIA's library wheels are.
	Python string
	// JetsonL4T names the host when it is a Jetson whose CUDA is NVIDIA's
	// L4T build (CUDA 12 or older): NVIDIA's aarch64 wheels (nvidia-*) are
	// SBSA builds that do not run there, under the very tags the host
	// accepts ("Jetson Orin (Tegra234) with L4T R36.4.7").
	JetsonL4T string
}

func (h Host) String() string {
	libc := "unknown C library"
	switch {
	case h.Glibc != "":
		libc = "glibc " + h.Glibc
	case h.Musl != "":
		libc = "musl " + h.Musl
	}
	s := "linux " + h.Machine + ", " + libc
	if h.Python != "" {
		s += ", Python " + h.Python
	}
	if h.JetsonL4T != "" {
		s += ", " + h.JetsonL4T
	}
	return s
}

// Wheel is a wheel file name's parts (PEP 427 with compressed tag sets).
type Wheel struct {
	Name, Version, Build  string
	Python, ABI, Platform []string // each tag set split at "."
}

// ParseWheel reads a wheel's file name.
func ParseWheel(filename string) (Wheel, error) {
	stem, ok := strings.CutSuffix(filename, ".whl")
	if !ok {
		return Wheel{}, fmt.Errorf("%s: not a wheel", filename)
	}
	parts := strings.Split(stem, "-")
	var w Wheel
	switch len(parts) {
	case 5:
	case 6:
		w.Build = parts[2]
		parts = append(parts[:2], parts[3:]...)
	default:
		return Wheel{}, fmt.Errorf("%s: a wheel's name has 5 or 6 parts separated by '-'", filename)
	}
	w.Name, w.Version = parts[0], parts[1]
	w.Python = strings.Split(parts[2], ".")
	w.ABI = strings.Split(parts[3], ".")
	w.Platform = strings.Split(parts[4], ".")
	if w.Name == "" || w.Version == "" {
		return Wheel{}, fmt.Errorf("%s: no name or version", filename)
	}
	if len(w.Version) > dotted.MaxLen {
		return Wheel{}, fmt.Errorf("%s...: a version of %d characters (at most %d)", filename[:min(len(filename), 80)], len(w.Version), dotted.MaxLen)
	}
	return w, nil
}

// Key is the store key of a wheel: the project, its version, its tags
// (with its build tag, which tells two files of the same tags apart).
func (w Wheel) Key() fetch.Key {
	platform := strings.Join(w.Platform, ".")
	if len(platform) > 128 {
		platform = w.Platform[0]
	}
	variant := strings.Join(w.Python, ".") + "-" + strings.Join(w.ABI, ".")
	if len(variant) > 128 {
		variant = w.Python[0] + "-" + w.ABI[0]
	}
	if w.Build != "" {
		variant = w.Build + "-" + variant
	}
	return fetch.Key{Component: pymeta.NormalizeName(w.Name), Version: w.Version, Platform: platform, Variant: variant}
}

// legacy manylinux tags and the glibc they stand for (PEP 600).
var legacyManylinux = map[string][2]int{"manylinux1": {2, 5}, "manylinux2010": {2, 12}, "manylinux2014": {2, 17}}

// platformRank says how well a platform tag fits the host: 0 does not fit;
// higher is more specific (a newer manylinux level ranks above an older
// one, any platform lowest).
func platformRank(tag string, h Host) (int, string) {
	if tag == "any" {
		return 1, ""
	}
	for _, kind := range []string{"manylinux", "musllinux"} {
		rest, ok := strings.CutPrefix(tag, kind)
		if !ok {
			continue
		}
		var major, minor int
		var machine string
		if lv, ok := legacyManylinux[strings.SplitN(tag, "_", 2)[0]]; ok && kind == "manylinux" {
			major, minor = lv[0], lv[1]
			machine = strings.SplitN(tag, "_", 2)[1]
		} else {
			f := strings.SplitN(strings.TrimPrefix(rest, "_"), "_", 3)
			if len(f) != 3 {
				return 0, "malformed tag"
			}
			var err1, err2 error
			major, err1 = strconv.Atoi(f[0])
			minor, err2 = strconv.Atoi(f[1])
			if err1 != nil || err2 != nil {
				return 0, "malformed tag"
			}
			machine = f[2]
		}
		if machine != h.Machine {
			return 0, "for " + machine
		}
		have := h.Glibc
		if kind == "musllinux" {
			have = h.Musl
		}
		if have == "" {
			if kind == "musllinux" {
				return 0, "for musl, and this host's C library is glibc"
			}
			return 0, "for glibc, and this host's C library is not glibc"
		}
		hmaj, hmin := splitVersion(have)
		if hmaj < major || hmaj == major && hmin < minor {
			return 0, fmt.Sprintf("needs %s %d.%d", map[string]string{"manylinux": "glibc", "musllinux": "musl"}[kind], major, minor)
		}
		return 1000 + major*100 + minor, ""
	}
	if m, ok := strings.CutPrefix(tag, "linux_"); ok {
		if m == h.Machine {
			return 2, ""
		}
		return 0, "for " + m
	}
	return 0, "not for Linux"
}

// sbsaRefusal says why an NVIDIA wheel for aarch64 does not run on an L4T
// Jetson, or "" when it may: PyPI's aarch64 nvidia-* wheels are built for
// Arm servers (SBSA) and tagged manylinux_2_28_aarch64 like any other.
func sbsaRefusal(w Wheel, h Host) string {
	if h.JetsonL4T == "" || !strings.HasPrefix(pymeta.NormalizeName(w.Name), "nvidia-") {
		return ""
	}
	for _, p := range w.Platform {
		if strings.HasSuffix(p, "_aarch64") {
			return "an SBSA build, for Arm servers: it does not run on this " + h.JetsonL4T + ", whose CUDA libraries are JetPack's or NVIDIA's linux-aarch64 archives"
		}
	}
	return ""
}

func splitVersion(v string) (int, int) {
	a, b, _ := strings.Cut(v, ".")
	b, _, _ = strings.Cut(b, ".")
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return x, y
}

// pythonRank says how well a python and ABI tag pair fits the host.
func pythonRank(py, abi string, h Host) int {
	hmaj, hmin := splitVersion(h.Python)
	cp := fmt.Sprintf("cp%d%d", hmaj, hmin)
	switch {
	case h.Python != "" && py == cp && abi == cp:
		return 4
	case h.Python != "" && strings.HasPrefix(py, "cp3") && abi == "abi3":
		if m, err := strconv.Atoi(py[3:]); err == nil && hmaj == 3 && m <= hmin {
			return 3
		}
	case abi == "none" && (py == "py3" || h.Python != "" && (py == cp || py == fmt.Sprintf("py%d%d", hmaj, hmin))):
		return 2
	}
	return 0
}

// Choose picks, among an index's files, the wheel of project at version
// that fits the host best: the most specific platform (the highest
// manylinux level the host's glibc allows), then the most specific Python
// tags. Versions compare as written, which is how pins name them. The error
// names what the index has when nothing fits.
func Choose(files []File, project, version string, h Host) (File, Wheel, error) {
	type cand struct {
		f     File
		w     Wheel
		score int
	}
	var fits []cand
	var why []string
	for _, f := range files {
		w, err := ParseWheel(f.Filename)
		if err != nil || pymeta.NormalizeName(w.Name) != pymeta.NormalizeName(project) || !strings.EqualFold(w.Version, version) {
			continue
		}
		best, reason := 0, ""
		for _, p := range w.Platform {
			r, rs := platformRank(p, h)
			if r > best {
				best = r
			} else if r == 0 && reason == "" {
				reason = rs
			}
		}
		if best == 0 {
			why = append(why, fmt.Sprintf("%s (%s)", f.Filename, reason))
			continue
		}
		if r := sbsaRefusal(w, h); r != "" {
			why = append(why, fmt.Sprintf("%s (%s)", f.Filename, r))
			continue
		}
		py := 0
		for _, p := range w.Python {
			for _, a := range w.ABI {
				py = max(py, pythonRank(p, a, h))
			}
		}
		if py == 0 {
			why = append(why, fmt.Sprintf("%s (for another Python)", f.Filename))
			continue
		}
		fits = append(fits, cand{f, w, best*10 + py})
	}
	if len(fits) == 0 {
		if len(why) == 0 {
			return File{}, Wheel{}, fmt.Errorf("%s %s: the index has no wheel of this version", project, version)
		}
		sort.Strings(why)
		if len(why) > 8 {
			why = append(why[:8], fmt.Sprintf("and %d more", len(why)-8))
		}
		return File{}, Wheel{}, fmt.Errorf("%s %s: no wheel for this host (%s); the index has %s", project, version, h, strings.Join(why, ", "))
	}
	sort.SliceStable(fits, func(i, j int) bool { return fits[i].score > fits[j].score })
	return fits[0].f, fits[0].w, nil
}
