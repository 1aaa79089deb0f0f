package mirror

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
)

// linkRE finds the links of a project page this package wrote.
var linkRE = regexp.MustCompile(`href="([^"#/]+)#sha256=([0-9a-f]{64})"`)

// writeSimpleIndex writes the PEP 503 pages for the wheels: each project's
// index.html lists its wheels there, with #sha256= (merged with the
// wheels an earlier run listed that are still present), and
// simple/index.html lists the projects.
func writeSimpleIndex(dir string, wheels []File) ([]string, error) {
	byProject := map[string][]File{}
	var projects []string
	for _, w := range wheels {
		p := path.Base(path.Dir(w.Path))
		if _, ok := byProject[p]; !ok {
			projects = append(projects, p)
		}
		byProject[p] = append(byProject[p], w)
	}
	var out []string
	for _, p := range projects {
		rel := "simple/" + p + "/index.html"
		file := filepath.Join(dir, filepath.FromSlash(rel))
		hashes := map[string]string{}
		if old, err := catalog.ReadFile(file); err == nil {
			for _, m := range linkRE.FindAllStringSubmatch(string(old), -1) {
				if st, err := os.Stat(filepath.Join(filepath.Dir(file), m[1])); err == nil && st.Mode().IsRegular() {
					hashes[m[1]] = m[2]
				}
			}
		}
		for _, w := range byProject[p] {
			hashes[w.Step.Filename] = w.Step.SHA256
		}
		names := make([]string, 0, len(hashes))
		frag := map[string]string{}
		for n, h := range hashes {
			names = append(names, n)
			frag[n] = "sha256=" + h
		}
		slices.Sort(names)
		if err := atomicfile.WriteFile(file, linkPage("Links for "+p, names, frag), 0o644); err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "simple"))
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	var all []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			all = append(all, e.Name()+"/")
		}
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "simple", "index.html"), linkPage("Simple index", all, nil), 0o644); err != nil {
		return nil, err
	}
	return append(out, "simple/index.html"), nil
}
