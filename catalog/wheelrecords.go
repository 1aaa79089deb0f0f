package catalog

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

//go:embed wheelrecords.json
var embeddedWheelRecords []byte

// WheelRecord is what one real wheel of an NVIDIA distribution installs
// and declares, read from an installed copy of it: its tags, its
// Requires-Dist, and every file at its RECORD path. It is the layout an
// archive of the same release is placed in when the wheel itself is not at
// hand, and the metadata of a distribution that is not installed.
type WheelRecord struct {
	Name          string      `json:"name"` // PEP 503 normalized
	Version       string      `json:"version"`
	Tags          []string    `json:"tags"` // WHEEL's Tag lines
	RequiresDist  []string    `json:"requires_dist,omitempty"`
	ProvidesExtra []string    `json:"provides_extra,omitempty"`
	Files         []WheelFile `json:"files"` // RECORD without the .dist-info files
	// Source says where the record was read.
	Source string `json:"source"`
}

// WheelFile is one RECORD line of a wheel.
type WheelFile struct {
	Path   string `json:"path"` // relative to site-packages, '/'-separated
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"` // lowercase hex
}

// Metadata is the record's METADATA as far as resolution needs it.
func (r *WheelRecord) Metadata() (*pymeta.Metadata, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n", r.Name, r.Version)
	for _, x := range r.ProvidesExtra {
		fmt.Fprintf(&b, "Provides-Extra: %s\n", x)
	}
	for _, req := range r.RequiresDist {
		fmt.Fprintf(&b, "Requires-Dist: %s\n", req)
	}
	m, err := pymeta.ParseMetadata(strings.NewReader(b.String()))
	if err == nil && len(m.Problems) > 0 {
		err = fmt.Errorf("Requires-Dist %q does not parse", m.Problems[0])
	}
	if err != nil {
		return nil, fmt.Errorf("wheel record %s %s: %w", r.Name, r.Version, err)
	}
	return m, nil
}

// SharedLibraries are the shared libraries among a wheel's files (not its
// Python extension modules).
func SharedLibraries(files []WheelFile) []WheelFile {
	var out []WheelFile
	for _, f := range files {
		if IsSharedLibrary(path.Base(f.Path)) {
			out = append(out, f)
		}
	}
	return out
}

// IsSharedLibrary tells a library file name (libcublas.so.13,
// libnvrtc-builtins.so.13.0, libfoo.so) from other files; Python's own
// extension modules (_C.cpython-312-x86_64-linux-gnu.so, _x.abi3.so) are not
// libraries a catalog provides.
func IsSharedLibrary(name string) bool {
	if strings.HasSuffix(name, ".so") && (strings.Contains(name, ".cpython-") || strings.Contains(name, ".abi3.") || strings.Contains(name, ".pypy")) {
		return false
	}
	return strings.HasSuffix(name, ".so") || strings.Contains(name, ".so.")
}

// WheelRecords is the table of real wheel records, by distribution.
type WheelRecords struct {
	byName map[string][]*WheelRecord // versions in ascending order
}

type wheelRecordsDoc struct {
	Format int            `json:"format"`
	Wheels []*WheelRecord `json:"wheels"`
}

// EmbeddedWheelRecords is the table built into the binary
// (catalog/wheelrecords.json, generated from real dist-info folders).
func EmbeddedWheelRecords() (*WheelRecords, error) {
	return parseWheelRecords(embeddedWheelRecords, "catalog/wheelrecords.json")
}

// parseWheelRecords reads a wheel-record table strictly.
func parseWheelRecords(data []byte, name string) (*WheelRecords, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc wheelRecordsDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if doc.Format != formatVersion {
		return nil, fmt.Errorf("%s: format must be %d (got %d)", name, formatVersion, doc.Format)
	}
	t := &WheelRecords{byName: map[string][]*WheelRecord{}}
	for _, r := range doc.Wheels {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		t.byName[r.Name] = append(t.byName[r.Name], r)
	}
	for _, rs := range t.byName {
		slices.SortFunc(rs, func(a, b *WheelRecord) int { return dotted.Compare(a.Version, b.Version) })
	}
	return t, nil
}

func (r *WheelRecord) validate() error {
	if r == nil || r.Name == "" || pymeta.NormalizeName(r.Name) != r.Name || r.Version == "" || strings.TrimSpace(r.Source) == "" {
		return fmt.Errorf("wheel record %+v: name (normalized), version and source are required", r)
	}
	for _, f := range r.Files {
		if f.Path == "" || path.IsAbs(f.Path) || hasDotSegment(f.Path) || strings.Contains(f.Path, "\\") {
			return fmt.Errorf("wheel record %s %s: file %q is not a relative path inside site-packages", r.Name, r.Version, f.Path)
		}
		if f.SHA256 != "" {
			if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != 32 {
				return fmt.Errorf("wheel record %s %s: file %s: sha256 %q", r.Name, r.Version, f.Path, f.SHA256)
			}
		}
	}
	if _, err := r.Metadata(); err != nil {
		return err
	}
	return nil
}

// Exact is the record of name at version, if the table has it.
func (t *WheelRecords) Exact(name, version string) (*WheelRecord, bool) {
	for _, r := range t.byName[pymeta.NormalizeName(name)] {
		if r.Version == version {
			return r, true
		}
	}
	return nil, false
}

// Nearest is the record of name whose version is closest to version: the
// same version, else the newest older one of the same major, else the
// oldest newer one of the same major, else none. A wheel keeps its layout
// within a major (nvidia/cu13/lib for every CUDA 13 toolkit wheel), so a
// record of a neighbouring release says where the files go.
func (t *WheelRecords) Nearest(name, version string) (*WheelRecord, bool) {
	rs := t.byName[pymeta.NormalizeName(name)]
	var older, newer *WheelRecord
	for _, r := range rs {
		if dotted.Major(r.Version) != dotted.Major(version) {
			continue
		}
		switch c := dotted.Compare(r.Version, version); {
		case c == 0:
			return r, true
		case c < 0:
			older = r
		case newer == nil:
			newer = r
		}
	}
	if older != nil {
		return older, true
	}
	return newer, newer != nil
}

// Versions lists the versions the table has of name, ascending.
func (t *WheelRecords) Versions(name string) []string {
	var out []string
	for _, r := range t.byName[pymeta.NormalizeName(name)] {
		out = append(out, r.Version)
	}
	return out
}

// wheelRecordFromDistInfo reads a wheel record from the files of an
// installed *.dist-info folder (METADATA, RECORD and WHEEL, by base name).
func wheelRecordFromDistInfo(files map[string][]byte, source string) (*WheelRecord, error) {
	meta, err := pymeta.ParseMetadata(bytes.NewReader(files["METADATA"]))
	if err != nil {
		return nil, fmt.Errorf("METADATA: %w", err)
	}
	entries, err := pymeta.ParseRecordBytes(files["RECORD"])
	if err != nil {
		return nil, fmt.Errorf("RECORD: %w", err)
	}
	r := &WheelRecord{Name: pymeta.NormalizeName(meta.Name), Version: meta.Version, ProvidesExtra: meta.ProvidesExtra, Files: []WheelFile{}, Source: source}
	for _, req := range meta.RequiresDist {
		r.RequiresDist = append(r.RequiresDist, req.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(files["WHEEL"]))
	for sc.Scan() {
		if tag, ok := strings.CutPrefix(sc.Text(), "Tag:"); ok {
			r.Tags = append(r.Tags, strings.TrimSpace(tag))
		}
	}
	for _, e := range entries {
		if first, _, _ := strings.Cut(e.Path, "/"); strings.HasSuffix(first, ".dist-info") {
			continue
		}
		f := WheelFile{Path: e.Path, Size: e.Size}
		if e.HashAlgo == "sha256" {
			f.SHA256 = hex.EncodeToString(e.Hash)
		}
		r.Files = append(r.Files, f)
	}
	return r, r.validate()
}

// marshalWheelRecords writes a table in the embedded form: one wheel per
// line, sorted by name and version, so that a regenerated table diffs
// line by line.
func marshalWheelRecords(rs []*WheelRecord) ([]byte, error) {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b *WheelRecord) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return dotted.Compare(a.Version, b.Version)
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\"format\": %d, \"wheels\": [\n", formatVersion)
	for i, r := range rs {
		line, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		b.Write(line)
		if i < len(rs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
}
