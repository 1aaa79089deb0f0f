package doctor

import (
	"fmt"
	"strconv"

	"github.com/cudadeps/cudadeps/internal/dotted"
)

// version is a dotted numeric NVIDIA driver version ("580.95.05"); the
// zero version is none.
type version struct{ s string }

func parseVersion(s string) (version, bool) {
	if !dotted.Numeric(s) {
		return version{}, false
	}
	return version{s: s}, true
}

func mustVersion(s string) version {
	v, ok := parseVersion(s)
	if !ok {
		panic("doctor: bad version literal " + s)
	}
	return v
}

func (v version) ok() bool       { return v.s != "" }
func (v version) String() string { return v.s }
func (v version) major() int {
	n, _ := strconv.Atoi(dotted.Major(v.s))
	return n
}

// less orders driver versions as dotted version numbers.
func (v version) less(o version) bool { return dotted.Less(v.s, o.s) }

func (v version) equal(o version) bool { return !v.less(o) && !o.less(v) }

// The driver versions below are NVIDIA's, from the CUDA Toolkit Release
// Notes, section "CUDA Driver" (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html):
// Table 3 "CUDA Toolkit and Corresponding Driver Versions" gives the
// Linux x86_64 "Toolkit Driver Version" of each release, and Table 2
// "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor Version
// Compatibility" gives, per major, the oldest driver that runs every minor
// release of it (CUDA 13.x >= 580, 12.x >= 525.60.13, 11.x >= 450.80.02).
// The same floors appear in "CUDA Compatibility", section "Minor Version
// Compatibility", Table 1
// (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html).

// toolkitRelease is a CUDA toolkit GA release and the driver it shipped with.
type toolkitRelease struct {
	major, minor int
	driver       version
}

// toolkitReleases lists GA releases, newest first.
func toolkitReleases() []toolkitRelease {
	r := func(major, minor int, drv string) toolkitRelease {
		return toolkitRelease{major, minor, mustVersion(drv)}
	}
	return []toolkitRelease{
		r(13, 1, "590.44.01"),
		r(13, 0, "580.65.06"),
		r(12, 9, "575.51.03"),
		r(12, 8, "570.26"),
		r(12, 6, "560.28.03"),
		r(12, 5, "555.42.02"),
		r(12, 4, "550.54.14"),
		r(12, 3, "545.23.06"),
		r(12, 2, "535.54.03"),
		r(12, 1, "530.30.02"),
		r(12, 0, "525.60.13"),
		r(11, 8, "520.61.05"),
		r(11, 7, "515.43.04"),
		r(11, 6, "510.39.01"),
		r(11, 5, "495.29.05"),
		r(11, 4, "470.42.01"),
		r(11, 3, "465.19.01"),
		r(11, 2, "460.27.03"),
		r(11, 1, "455.23"),
		r(11, 0, "450.51.05"),
	}
}

// minorCompatFloor is the oldest driver that runs every minor release of a
// CUDA major (minor version compatibility); ok is false for a major the
// table does not know.
func minorCompatFloor(major int) (version, bool) {
	switch major {
	case 13:
		return mustVersion("580"), true
	case 12:
		return mustVersion("525.60.13"), true
	case 11:
		return mustVersion("450.80.02"), true
	}
	return version{}, false
}

// maxCUDA is the newest CUDA release a driver is the toolkit driver of (or
// newer than): the version nvidia-smi prints as "CUDA Version".
func maxCUDA(drv version) (major, minor int, ok bool) {
	for _, r := range toolkitReleases() {
		if !drv.less(r.driver) {
			return r.major, r.minor, true
		}
	}
	return 0, 0, false
}

// releaseDriver is the toolkit driver of CUDA major.minor.
func releaseDriver(major, minor int) (version, bool) {
	for _, r := range toolkitReleases() {
		if r.major == major && r.minor == minor {
			return r.driver, true
		}
	}
	return version{}, false
}

// newestKnownMajor is the newest CUDA major of the tables.
func newestKnownMajor() int { return toolkitReleases()[0].major }

// driverRuns says whether a driver runs code built with CUDA major (and,
// when minor >= 0, that minor release); how explains on which terms.
type compatVerdict struct {
	runs bool
	// minorCompat is set when the driver is older than the release's own
	// driver: it runs through minor version compatibility, without the
	// features that need the newer driver (PTX of that release does not JIT).
	minorCompat bool
	floor       version
	max         string // "13.0": the newest CUDA of the driver
}

func driverRuns(drv version, major, minor int) compatVerdict {
	v := compatVerdict{}
	if m, n, ok := maxCUDA(drv); ok {
		v.max = fmt.Sprintf("%d.%d", m, n)
	}
	floor, ok := minorCompatFloor(major)
	if !ok {
		return v
	}
	v.floor = floor
	if drv.less(floor) {
		return v
	}
	v.runs = true
	if minor >= 0 {
		if rd, ok := releaseDriver(major, minor); ok && drv.less(rd) {
			v.minorCompat = true
		}
	}
	return v
}
