package resolver

import (
	"embed"
	"regexp"
	"strings"

	"github.com/cudadeps/cudadeps/python/pymeta"
)

// The probes make a framework open what it opens lazily (cuDNN's
// sub-libraries, cuFFT, cuSOLVER, cuSPARSE, NVRTC and its builtins, the
// driver); each prints "ok: STEP", "FAILED: STEP: ERROR" or "no GPU:
// skipped STEP" and exits 1 when a step failed.
//
//go:embed probes/*.py
var probeFiles embed.FS

// probeFor maps a distribution (normalised name) to its probe. JAX is
// probed through its CUDA plugin: jax without one has no GPU to check.
var probeFor = map[string]string{
	"torch":             "torch",
	"jax-cuda13-plugin": "jax",
	"jax-cuda12-plugin": "jax",
	"jax-cuda13-pjrt":   "jax",
	"jax-cuda12-pjrt":   "jax",
	"onnxruntime-gpu":   "onnxruntime",
	"onnxruntime":       "onnxruntime",
	"tensorflow":        "tensorflow",
	"tensorflow-gpu":    "tensorflow",
}

// probeName is the probe for a distribution, if there is one.
func probeName(distName string) (string, bool) {
	n := pymeta.NormalizeName(distName)
	if name, ok := probeFor[n]; ok {
		return name, true
	}
	if strings.HasPrefix(n, "cupy") {
		return "cupy", true // cupy-cuda13x, cupy-cuda12x, cupy-rocm-...
	}
	return "", false
}

// ProbeScript returns the Python probe for a distribution: a script to run
// with the target's interpreter after its import check.
func ProbeScript(distName string) (script string, ok bool) {
	name, ok := probeName(distName)
	if !ok {
		return "", false
	}
	return probeScript(name)
}

// probeScript is a probe by its name: the shared part, then its own.
func probeScript(name string) (string, bool) {
	common, err := probeFiles.ReadFile("probes/common.py")
	if err != nil {
		return "", false
	}
	body, err := probeFiles.ReadFile("probes/" + name + ".py")
	if err != nil {
		return "", false
	}
	return string(common) + "\n" + string(body), true
}

// ProbeFailure is a library a probe's output blames.
type ProbeFailure struct {
	// Library is the soname (or file) that failed: not found, too old, or
	// lacking a symbol.
	Library string `json:"library"`
	// Kind is "not_found", "undefined_symbol", "version" (a symbol version
	// node absent) or "incompatible" (a library found at the wrong
	// version).
	Kind string `json:"kind"`
	// Object is the object that asked for it, when the message says.
	Object string `json:"object,omitempty"`
	Symbol string `json:"symbol,omitempty"`
	// Version is the symbol version, or the version wanted.
	Version string `json:"version,omitempty"`
	// Found is the version found, for an incompatible library.
	Found string `json:"found,omitempty"`
	// Line is the message it was read from.
	Line string `json:"line"`
}

const soChars = `[A-Za-z0-9_.+-]*\.so[A-Za-z0-9_.+-]*`

// pathChars is a file path ending in a library name.
const pathChars = `[A-Za-z0-9_./+-]*\.so[A-Za-z0-9_.+-]*`

var (
	// reCannotOpen is the loader's "cannot open shared object file", with the
	// path of the object that asked when the message names it: the import
	// check and the probes read it alike.
	reCannotOpen      = regexp.MustCompile(`(?:(` + pathChars + `): )?(` + soChars + `): cannot open shared object file`)
	reProbeFailedOpen = regexp.MustCompile(`(?i)(?:failed to open|could not load (?:dynamic )?library|unable to load|cannot load) '?(` + soChars + `)'?`)
	reProbeAnyOf      = regexp.MustCompile(`Unable to load any of \{([^}]*)\}`)
	reProbeUndefined  = regexp.MustCompile(`(?:(` + pathChars + `): )?undefined symbol: ([A-Za-z0-9_.@$]+)(?:, version (` + soChars + `|[A-Za-z0-9_.]+))?`)
	reProbeVersion    = regexp.MustCompile("([^\\s:'`]+): version [`']([^'`]+)' not found \\(required by ([^)]+)\\)")
	reProbeCuDNN      = regexp.MustCompile(`cuDNN version incompatibility: .*?compiled\s+against \((\d+), (\d+), (\d+)\) but found runtime version \((\d+), (\d+), (\d+)\)`)
)

// parseProbeOutput extracts the libraries a probe's (or any Python
// program's) output blames, in order of appearance, each once.
func parseProbeOutput(out string) []ProbeFailure {
	var res []ProbeFailure
	seen := map[string]bool{}
	add := func(f ProbeFailure) {
		k := f.Kind + "\x00" + f.Library + "\x00" + f.Symbol
		if f.Library == "" || seen[k] {
			return
		}
		seen[k] = true
		res = append(res, f)
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if m := reProbeCuDNN.FindStringSubmatch(line); m != nil {
			add(ProbeFailure{Library: "libcudnn.so." + m[1], Kind: "incompatible",
				Version: m[1] + "." + m[2] + "." + m[3], Found: m[4] + "." + m[5] + "." + m[6], Line: line})
			continue
		}
		if m := reProbeUndefined.FindStringSubmatch(line); m != nil {
			f := ProbeFailure{Kind: "undefined_symbol", Object: m[1], Symbol: m[2], Version: m[3], Line: line}
			// The version node of a library is named after its soname
			// (libnvJitLink.so.12); otherwise the object lacking the
			// symbol's provider is all the message names.
			switch {
			case strings.Contains(m[3], ".so"):
				f.Library = m[3]
			default:
				f.Library = m[1]
			}
			add(f)
			continue
		}
		if m := reProbeVersion.FindStringSubmatch(line); m != nil {
			add(ProbeFailure{Library: baseName(m[1]), Kind: "version", Version: m[2], Object: m[3], Line: line})
			continue
		}
		if m := reProbeAnyOf.FindStringSubmatch(line); m != nil {
			names := strings.Split(m[1], ",")
			best := ""
			for _, n := range names {
				n = strings.TrimSpace(n)
				// The soname proper: one version number after .so.
				if strings.Count(n[strings.Index(n, ".so")+3:], ".") == 1 {
					best = n
				}
			}
			if best == "" && len(names) > 0 {
				best = strings.TrimSpace(names[0])
			}
			add(ProbeFailure{Library: best, Kind: "not_found", Line: line})
			continue
		}
		matched := false
		for _, m := range reCannotOpen.FindAllStringSubmatch(line, -1) {
			add(ProbeFailure{Library: baseName(m[2]), Kind: "not_found", Object: m[1], Line: line})
			matched = true
		}
		if matched {
			continue
		}
		for _, m := range reProbeFailedOpen.FindAllStringSubmatch(line, -1) {
			add(ProbeFailure{Library: baseName(strings.TrimRight(m[1], ".")), Kind: "not_found", Line: line})
		}
	}
	return res
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// probeSkipped lists the steps a probe skipped for want of a GPU.
func probeSkipped(out string) []string {
	var s []string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "no GPU: skipped "); ok {
			s = append(s, rest)
		}
	}
	return s
}
