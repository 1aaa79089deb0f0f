package mirror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
)

// writeManifests writes, for each product and release of the archives, a
// redistrib_<label>.json in NVIDIA's format that lists those archives,
// merged into the one an earlier run wrote. It returns their paths
// relative to dir.
func writeManifests(dir string, archives []located) ([]string, error) {
	type key struct{ product, label string }
	groups := map[key][]located{}
	var order []key
	for _, a := range archives {
		label := a.release.Label
		if label == "" {
			label = a.release.Version
		}
		k := key{a.comp.Product, label}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], a)
	}
	var out []string
	for _, k := range order {
		rel := path.Join(k.product, "redist", "redistrib_"+k.label+".json")
		p := filepath.Join(dir, filepath.FromSlash(rel))
		doc := map[string]any{}
		if old, err := catalog.ReadFile(p); err == nil {
			if err := json.Unmarshal(old, &doc); err != nil {
				return nil, fmt.Errorf("%s: %w (remove it to write it anew)", p, err)
			}
		}
		date := ""
		for _, a := range groups[k] {
			if a.release.Date != "" {
				date = a.release.Date
			}
		}
		if _, ok := doc["release_date"]; !ok || date != "" {
			doc["release_date"] = date
		}
		doc["release_label"] = k.label
		doc["release_product"] = k.product
		for _, a := range groups[k] {
			comp, _ := doc[a.comp.Name].(map[string]any)
			if comp == nil || comp["version"] != a.release.Version {
				comp = map[string]any{"name": a.comp.Title, "license": a.comp.License, "version": a.release.Version}
				doc[a.comp.Name] = comp
			}
			entry := map[string]any{"relative_path": a.rel, "sha256": a.archive.SHA256, "size": fmt.Sprint(a.archive.Size)}
			if a.archive.CUDAVariant == "" {
				comp[a.archive.Platform] = entry
				continue
			}
			plat, _ := comp[a.archive.Platform].(map[string]any)
			if plat == nil || plat["relative_path"] != nil {
				plat = map[string]any{}
				comp[a.archive.Platform] = plat
			}
			plat[a.archive.CUDAVariant] = entry
		}
		data, err := json.MarshalIndent(doc, "", "    ")
		if err != nil {
			return nil, err
		}
		data = append(data, '\n')
		// What is written must read back as the manifest it stands for.
		if _, err := catalog.ParseManifest(data, rel); err != nil {
			return nil, fmt.Errorf("internal error: the manifest written does not parse: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(p, data, 0o644); err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

var manifestName = regexp.MustCompile(`^redistrib_[0-9][0-9A-Za-z._+-]*\.json$`)

// writeRedistIndexes writes index.html in each product's redist/ directory
// that holds a manifest, listing every manifest there: the page catalog
// update reads where a server makes no listing of its own (an object
// store).
func writeRedistIndexes(dir string, manifests []string) ([]string, error) {
	var dirs []string
	for _, m := range manifests {
		if d := path.Dir(m); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	var out []string
	for _, d := range dirs {
		ents, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(d)))
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range ents {
			if e.Type().IsRegular() && manifestName.MatchString(e.Name()) {
				names = append(names, e.Name())
			}
		}
		rel := d + "/index.html"
		if err := atomicfile.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), linkPage("Index of /"+d+"/", names, nil), 0o644); err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	return out, nil
}

// linkPage is an HTML page of links, each href the name (and fragment, when
// given).
func linkPage(title string, names []string, fragment map[string]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html>\n<head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>%s</title></head>\n<body>\n<h1>%s</h1>\n", html.EscapeString(title), html.EscapeString(title))
	for _, n := range names {
		href := escapeHref(n)
		if f := fragment[n]; f != "" {
			href += "#" + f
		}
		fmt.Fprintf(&b, "<a href=\"%s\">%s</a><br>\n", html.EscapeString(href), html.EscapeString(strings.TrimSuffix(n, "/")))
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}

// escapeHref makes a relative link to name (a file, or a directory when it
// ends in "/").
func escapeHref(name string) string {
	if d, ok := strings.CutSuffix(name, "/"); ok {
		return url.PathEscape(d) + "/"
	}
	return url.PathEscape(name)
}
