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

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/python/pymeta"
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
func installDistribution(c *activation.Change, e fetch.Entry, st *Step, site string, copyFiles bool) ([]activation.Placed, error) {
	info, err := wheelInfoDir(e)
	if err != nil {
		return nil, err
	}
	var files []activation.File
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
		files = append(files, wheelFile(e, st, site, f))
	}
	// Directory by directory, as they sort.
	slices.SortStableFunc(files, func(a, b activation.File) int { return strings.Compare(filepath.Dir(a.Path), filepath.Dir(b.Path)) })
	out, err := c.Place(e.Key, files, copyFiles)
	if err != nil {
		return out, err
	}
	meta, err := distInfoFiles(e, st, site, info)
	if err != nil {
		return out, err
	}
	placed, err := c.Place(e.Key, meta, true)
	return append(out, placed...), err
}

// wheelFile is the wheel member rel (slash-separated) of the store entry e,
// placed at the same path under site.
func wheelFile(e fetch.Entry, st *Step, site, rel string) activation.File {
	f := activation.File{Path: filepath.Join(site, filepath.FromSlash(rel)), From: filepath.Join(e.Dir, filepath.FromSlash(rel)), Component: st.Component, Dist: st.Restore.Dist}
	if strings.Contains(path.Base(rel), ".so") {
		f.Soname = path.Base(rel)
	}
	return f
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

// distInfoFiles are the files of the installed .dist-info, in the order
// they are placed: those of its sub-directories (licenses/), then the
// wheel's own but its RECORD and INSTALLER, which are written anew, and
// METADATA last. The new RECORD keeps the wheel's lines for its files (the
// index's sha256 verified the whole wheel) and adds INSTALLER and itself.
func distInfoFiles(e fetch.Entry, st *Step, site, info string) ([]activation.File, error) {
	recordPath := filepath.Join(e.Dir, filepath.FromSlash(info), "RECORD")
	data, err := os.ReadFile(recordPath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", recordPath, err)
	}
	entries, err := pymeta.ParseRecordBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", recordPath, err)
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
	written := func(name string, data []byte) activation.File {
		return activation.File{Path: filepath.Join(site, info, name), Data: data, Mode: 0o644, Component: st.Component, Dist: st.Restore.Dist}
	}
	var sub, top []activation.File
	var meta *activation.File
	for _, f := range e.Files {
		rest, ok := strings.CutPrefix(f, info+"/")
		if !ok || rest == "RECORD" || rest == "INSTALLER" || rest == "REQUESTED" {
			continue
		}
		wf := wheelFile(e, st, site, f)
		switch {
		case rest == "METADATA":
			meta = &wf
		case strings.Contains(rest, "/"):
			sub = append(sub, wf)
		default:
			top = append(top, wf)
		}
	}
	out := append(sub, written("INSTALLER", installer), written("RECORD", record.Bytes()))
	return append(append(out, top...), *meta), nil
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
