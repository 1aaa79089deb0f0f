package resolver

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/scan"
)

// families are libraries that must come from one release, and so from one
// place: each pair's members are checked against each other.
var families = []struct{ head, member string }{
	{"libcublas.so", "libcublasLt.so"},
	{"libcudnn.so", "libcudnn_"},
	{"libnvrtc.so", "libnvrtc-builtins.so"},
	{"libcusolver.so", "libcusolverMg.so"},
	{"libcufft.so", "libcufftw.so"},
	{"libnvinfer.so", "libnvinfer_plugin.so"},
}

// crossChecks finds what the loader does not stop at but the package
// will: one import chain that needs two CUDA majors (libcudart.so.12 and
// libcudart.so.13), and one library family loaded from two places.
func crossChecks(rep *scan.Report) []string {
	var out []string
	for _, root := range rep.Roots {
		if root.Result == nil {
			continue
		}
		out = appendAll(out, cudaMajorCheck(root))
		out = appendAll(out, familyCheck(root.Result.Objects))
	}
	return out
}

func appendAll(list []string, more []string) []string {
	for _, m := range more {
		list = uniq.Append(list, m)
	}
	return list
}

// cudaMajorCheck reports a closure whose CUDA runtime sonames disagree on
// the major.
func cudaMajorCheck(root *scan.Root) []string {
	byMajor := map[int][]string{}
	for _, o := range root.Result.Objects {
		if m, ok := catalog.CUDAMajorFromSoname(filepath.Base(o.Name)); ok {
			byMajor[m] = uniq.Append(byMajor[m], filepath.Base(o.Name))
		}
	}
	if len(byMajor) < 2 {
		return nil
	}
	majors := slices.Sorted(maps.Keys(byMajor))
	var parts []string
	for _, m := range majors {
		parts = append(parts, fmt.Sprintf("CUDA %d (%s)", m, strings.Join(byMajor[m], ", ")))
	}
	return []string{fmt.Sprintf("%s: one import chain needs %s; a process gets one CUDA runtime, so part of it will fail",
		root.Path, strings.Join(parts, " and "))}
}

// familyCheck reports members of one library family found in different
// directories (libcublas from the wheel, libcublasLt from the system).
func familyCheck(objs []*ldso.Object) []string {
	dirOf := map[string]string{} // file name → host directory
	for _, o := range objs {
		if o.Found() && o.HostPath != "" {
			dirOf[filepath.Base(o.Name)] = physical(filepath.Dir(o.HostPath))
		}
	}
	names := slices.Sorted(maps.Keys(dirOf))
	var out []string
	for _, f := range families {
		for _, head := range names {
			if !strings.HasPrefix(head, f.head) {
				continue
			}
			for _, m := range names {
				if m == head || !strings.HasPrefix(m, f.member) || dirOf[m] == dirOf[head] {
					continue
				}
				out = append(out, fmt.Sprintf("%s comes from %s but %s from %s: one family from two places, likely two releases",
					head, dirOf[head], m, dirOf[m]))
			}
		}
	}
	return out
}
