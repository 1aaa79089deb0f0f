package scan

import (
	"github.com/cudadeps/cudadeps/loader/gpuarch"
)

// LoadedFiles lists every object the report's processes load, each once:
// the roots, what they need, and what their objects open at run time,
// found ones only, with where each is on this machine and the names it
// answers to. These are the files whose GPU code coverage judges.
func (r *Report) LoadedFiles() []gpuarch.File {
	var out []gpuarch.File
	seen := map[string]int{}
	add := func(path, host string, names ...string) {
		if path == "" || host == "" {
			return
		}
		if i, ok := seen[path]; ok {
			out[i].Names = appendNames(out[i].Names, names...)
			return
		}
		seen[path] = len(out)
		out = append(out, gpuarch.File{Path: path, Host: host, Names: appendNames(nil, names...)})
	}
	for _, root := range r.Roots {
		if root.Result != nil {
			for _, o := range root.Result.Objects {
				if !o.Found() {
					continue
				}
				soname := ""
				if o.Info != nil {
					soname = o.Info.Soname
				}
				add(o.Path, o.HostPath, append([]string{o.Name, soname}, root.Result.Names(o)...)...)
			}
		}
		for _, ro := range root.RuntimeOpens {
			if ro.Path != nil {
				add(*ro.Path, ro.Host, ro.Soname)
			}
		}
	}
	return out
}

func appendNames(list []string, names ...string) []string {
	for _, n := range names {
		if n == "" {
			continue
		}
		dup := false
		for _, x := range list {
			if x == n {
				dup = true
				break
			}
		}
		if !dup {
			list = append(list, n)
		}
	}
	return list
}
