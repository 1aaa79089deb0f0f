package resolver

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/pymeta"
)

// Installer is what cudadeps writes in the INSTALLER file of a
// distribution it installs (PEP 376): pip, uv and importlib.metadata then
// tell its files from theirs.
const Installer = "cudadeps"

// installDistribution installs a wheel from the store into site as an
// installer does (PEP 376, PEP 627): every file at the path its RECORD
// gives (a link into the store, or a copy), then the .dist-info with the
// wheel's own metadata, an INSTALLER naming cudadeps and a RECORD of what
// is installed, METADATA last, so that a distribution appears installed
// only once it is whole. Each file is recorded for undo, which removes
// exactly these and leaves alone what another installer put over them.
func installDistribution(rec *Record, e fetch.Entry, st *Step, site string, copyFiles bool, stage string) ([]Placed, error) {
	info, err := wheelInfoDir(e)
	if err != nil {
		return nil, err
	}
	byDir := map[string][]libFile{}
	var dirs []string
	for _, f := range e.Files {
		if strings.HasPrefix(f, info+"/") {
			continue
		}
		if !safeRecordPath(f) {
			return nil, fmt.Errorf("%s: the wheel's file %q would land outside site-packages", st.Filename, f)
		}
		if first, _, _ := strings.Cut(f, "/"); strings.HasSuffix(first, ".data") {
			return nil, fmt.Errorf("%s: the wheel has files for other install locations (%s): install it with pip", st.Filename, first)
		}
		dir := path.Dir(f)
		if _, ok := byDir[dir]; !ok {
			dirs = append(dirs, dir)
		}
		byDir[dir] = append(byDir[dir], libFile{name: path.Base(f), rel: f})
	}
	slices.Sort(dirs)
	var out []Placed
	for _, dir := range dirs {
		placed, err := apply(rec, e, st, filepath.Join(site, filepath.FromSlash(dir)), byDir[dir], copyFiles)
		out = append(out, placed...)
		if err != nil {
			return out, err
		}
	}
	files, err := distInfoFiles(e, info, stage)
	if err != nil {
		return out, err
	}
	// Sub-directories (licenses/) first; the top one, with METADATA
	// last, at the end.
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		if !strings.Contains(f.name, "/") {
			continue
		}
		placed, err := apply(rec, e, st, filepath.Join(site, info, filepath.FromSlash(path.Dir(f.name))), []libFile{{name: path.Base(f.name), rel: f.rel}}, true)
		out = append(out, placed...)
		if err != nil {
			return out, err
		}
	}
	top := slices.DeleteFunc(slices.Clone(files), func(f libFile) bool { return strings.Contains(f.name, "/") })
	placed, err := apply(rec, e, st, filepath.Join(site, info), top, true)
	return append(out, placed...), err
}

// wheelInfoDir is the wheel's NAME-VERSION.dist-info directory.
func wheelInfoDir(e fetch.Entry) (string, error) {
	for _, f := range e.Files {
		if dir, base, ok := strings.Cut(f, "/"); ok && base == "METADATA" && strings.HasSuffix(dir, ".dist-info") {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%s: no .dist-info/METADATA in the wheel", e.Dir)
}

// safeRecordPath accepts a relative, slash-separated path with no ".."
// segment: a wheel member that stays inside site-packages.
func safeRecordPath(p string) bool {
	if p == "" || path.IsAbs(p) || strings.Contains(p, "\\") {
		return false
	}
	return !slices.Contains(strings.Split(p, "/"), "..")
}

// distInfoFiles are the files of the installed .dist-info, METADATA last:
// the wheel's own, but its RECORD and INSTALLER, which are written anew
// into stage (a directory on the prefix's file system). The new RECORD
// keeps the wheel's lines for its files (the index's sha256 verified the
// whole wheel) and adds INSTALLER and itself.
func distInfoFiles(e fetch.Entry, info, stage string) ([]libFile, error) {
	recordPath := filepath.Join(e.Dir, filepath.FromSlash(info), "RECORD")
	data, err := os.ReadFile(recordPath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", recordPath, err)
	}
	entries, err := pymeta.ParseRecord(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", recordPath, err)
	}
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return nil, err
	}
	installer := []byte(Installer + "\n")
	var record bytes.Buffer
	for _, r := range entries {
		switch r.Path {
		case info + "/RECORD", info + "/INSTALLER", info + "/REQUESTED":
			continue
		}
		fmt.Fprintf(&record, "%s\n", recordLine(r))
	}
	sum := sha256.Sum256(installer)
	fmt.Fprintf(&record, "%s/INSTALLER,sha256=%s,%d\n%s/RECORD,,\n", info, base64.RawURLEncoding.EncodeToString(sum[:]), len(installer), info)
	written := map[string][]byte{"INSTALLER": installer, "RECORD": record.Bytes()}
	var out []libFile
	for _, name := range []string{"INSTALLER", "RECORD"} {
		p := filepath.Join(stage, name)
		if err := os.WriteFile(p, written[name], 0o644); err != nil {
			return nil, err
		}
		out = append(out, libFile{name: name, rel: p})
	}
	var meta *libFile
	for _, f := range e.Files {
		rest, ok := strings.CutPrefix(f, info+"/")
		if !ok || rest == "RECORD" || rest == "INSTALLER" || rest == "REQUESTED" {
			continue
		}
		lf := libFile{name: rest, rel: f}
		if rest == "METADATA" {
			meta = &lf
			continue
		}
		out = append(out, lf)
	}
	return append(out, *meta), nil
}

// recordLine writes a RECORD entry back in RECORD's CSV form.
func recordLine(r pymeta.RecordEntry) string {
	p := r.Path
	if strings.ContainsAny(p, ",\"\n") {
		p = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	if r.HashAlgo == "" {
		return p + ",,"
	}
	size := ""
	if r.Size >= 0 {
		size = fmt.Sprint(r.Size)
	}
	return fmt.Sprintf("%s,%s=%s,%s", p, r.HashAlgo, base64.RawURLEncoding.EncodeToString(r.Hash), size)
}
