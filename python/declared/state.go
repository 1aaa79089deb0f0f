package declared

import (
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// dist builds the closure's entry for one NVIDIA dependency: its version,
// where its files go, and its state.
func (c *computer) dist(dep pymeta.Dependency) (*Dist, error) {
	inst := c.in.Installed[dep.Name]
	var reqs []pymeta.Requirement
	for _, e := range dep.RequiredBy {
		reqs = append(reqs, e.Requirement)
	}
	installedVersion := ""
	if inst != nil {
		installedVersion = inst.Version
	}
	ch := c.choose(dep.Name, reqs, installedVersion)
	d := &Dist{Name: dep.Name, Version: ch.version, Choice: ch.how, Why: ch.why, RequiredBy: requirementsOf(dep), Extras: dep.Extras, Installed: inst}
	if inst != nil {
		d.InstalledVersion, d.Installer = inst.Version, installer(inst)
	}
	if err := c.state(d, reqs); err != nil {
		return nil, err
	}
	c.layout(d)
	return d, nil
}

// state sets the distribution's state against what is installed or was
// supplied.
func (c *computer) state(d *Dist, reqs []pymeta.Requirement) error {
	inst := d.Installed
	if inst == nil {
		d.State = Absent
		for i := range c.in.Supplied {
			s := &c.in.Supplied[i]
			if pymeta.NormalizeName(s.Name) != d.Name {
				continue
			}
			d.Supply = s
			d.State, d.Detail = Supplied, "supplied by cudadeps from "+s.From
			if s.Version != d.Version && d.Version != "" {
				d.State, d.Detail = OtherVersion, fmt.Sprintf("cudadeps supplied %s from %s; %s is required", s.Version, s.From, d.Version)
				break
			}
			if missing := missingFiles(s.Files); len(missing) > 0 {
				d.State, d.Detail = Damaged, fmt.Sprintf("supplied by cudadeps from %s, but %d of its %d files are gone", s.From, len(missing), len(s.Files))
				d.Damage = missing
			}
			break
		}
		if d.State == Absent {
			d.Detail = "not installed"
		}
		return nil
	}
	for i, r := range reqs {
		if len(r.Specifier) > 0 && !r.Specifier.ContainsString(inst.Version, true) {
			// d.RequiredBy[i] is "torch 2.11.0: nvidia-cudnn-cu13==9.19.0.56".
			req := r.Name + r.Specifier.String()
			if i < len(d.RequiredBy) {
				req = strings.Replace(d.RequiredBy[i], ": ", " requires ", 1)
			}
			d.State = OtherVersion
			d.Detail = fmt.Sprintf("%s is installed; %s", inst.Version, req)
			return nil
		}
	}
	integ, err := inst.Check(c.ctx, false)
	if err != nil {
		return err
	}
	integ.WrongSize = slices.DeleteFunc(integ.WrongSize, func(p string) bool { return c.in.Placed[p] })
	d.State, d.Detail = Intact, integ.String()
	if !integ.OK() {
		d.State, d.Damage = Damaged, append(slices.Clone(integ.Missing), integ.WrongSize...)
	}
	return nil
}

func missingFiles(files []string) []string {
	var out []string
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			out = append(out, f)
		}
	}
	return out
}

// installer reads who installed a distribution (its INSTALLER file).
func installer(d *pyenv.Dist) string {
	data, err := os.ReadFile(filepath.Join(d.InfoDir, "INSTALLER"))
	if err != nil || len(data) > 256 {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// layout decides where the distribution's files go: its own RECORD when
// installed at the required version, else the real wheel record of that
// release, else of the nearest release of the same major.
func (c *computer) layout(d *Dist) {
	if inst := d.Installed; inst != nil && d.State != OtherVersion {
		d.Files, d.Layout = recordFiles(inst), "its installed RECORD"
		d.MetadataOnly = len(d.Files) == 0
		return
	}
	if d.Version == "" {
		return
	}
	if r, ok := c.in.Records.Exact(d.Name, d.Version); ok {
		d.Record, d.Files, d.Layout = r, r.Files, "the RECORD of "+r.Name+" "+r.Version
	} else if r, ok := c.in.Records.Nearest(d.Name, d.Version); ok {
		d.Record, d.Files = r, r.Files
		d.Layout = fmt.Sprintf("the RECORD of %s %s, the nearest release whose RECORD is known", r.Name, r.Version)
	}
	d.MetadataOnly = d.Record != nil && len(d.Record.Files) == 0
}

// recordFiles are an installed distribution's RECORD files outside its
// .dist-info, relative to its site directory.
func recordFiles(inst *pyenv.Dist) []catalog.WheelFile {
	out := []catalog.WheelFile{}
	for _, e := range inst.Record {
		if f, ok := recordFile(e); ok {
			out = append(out, f)
		}
	}
	return out
}

// recordFile is a RECORD entry as a wheel's file; false for the
// dist-info's own files and those outside the site directory.
func recordFile(e pymeta.RecordEntry) (catalog.WheelFile, bool) {
	if first, _, _ := strings.Cut(e.Path, "/"); strings.HasSuffix(first, ".dist-info") || strings.HasPrefix(e.Path, "../") {
		return catalog.WheelFile{}, false
	}
	f := catalog.WheelFile{Path: e.Path, Size: e.Size}
	if e.HashAlgo == "sha256" {
		f.SHA256 = hex.EncodeToString(e.Hash)
	}
	return f, true
}

// conflicts names, for each distribution to be restored, the installed
// distributions outside it that write one of its paths with other content
// (nvidia-cudnn-cu12 and -cu13 both write nvidia/cudnn/lib/libcudnn.so.9).
func (c *computer) conflicts(cl *Closure) {
	type owner struct {
		dist   string
		sha256 string
	}
	// Only the paths of the distributions to be restored are looked up:
	// an environment lists tens of thousands of files, and a healthy one
	// restores nothing.
	want := map[string]bool{}
	for _, d := range cl.Dists {
		if d.NeedsRestore() || d.State == OtherVersion {
			for _, f := range d.Files {
				want[f.Path] = true
			}
		}
	}
	if len(want) == 0 {
		return
	}
	owners := map[string]owner{}
	for _, name := range slices.Sorted(maps.Keys(c.in.Installed)) {
		for _, e := range c.in.Installed[name].Record {
			if !want[e.Path] {
				continue
			}
			if _, ok := owners[e.Path]; ok {
				continue // the first by name answers, whatever the map's order
			}
			if f, ok := recordFile(e); ok {
				owners[f.Path] = owner{name, f.SHA256}
			}
		}
	}
	for _, d := range cl.Dists {
		if !d.NeedsRestore() && d.State != OtherVersion {
			continue
		}
		for _, f := range d.Files {
			o, ok := owners[f.Path]
			if !ok || o.dist == d.Name || (o.sha256 != "" && o.sha256 == f.SHA256) || strings.HasSuffix(f.Path, "/__init__.py") {
				continue
			}
			desc := o.dist
			if inst := c.in.Installed[o.dist]; inst != nil {
				desc += " " + inst.Version
			}
			entry := fmt.Sprintf("%s also writes %s", desc, f.Path)
			if !slices.ContainsFunc(d.Conflicts, func(s string) bool { return strings.HasPrefix(s, desc+" also writes") }) {
				d.Conflicts = append(d.Conflicts, entry)
			}
		}
	}
}
