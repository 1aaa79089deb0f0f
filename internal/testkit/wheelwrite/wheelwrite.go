// Package wheelwrite writes wheel files (PEP 427) that pip installs: the members, then the dist-info's METADATA, WHEEL and a RECORD with each member's sha256 and size, the same bytes every time.
package wheelwrite

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Wheel is one wheel file: a project at a version with its tags and files.
type Wheel struct {
	Project string // as written: nvidia-cudnn-cu13
	Version string
	// Tags are the python, ABI and platform tags: py3-none-manylinux_2_27_x86_64.
	Tags string
	// Files are the members by path (relative to site-packages); the
	// dist-info's METADATA, WHEEL and RECORD are written by Build (given
	// ones are left out). A path ending in
	// ".so" or containing ".so." is written executable, as pip expects of
	// shared libraries.
	Files map[string][]byte
	// Metadata are more METADATA header lines ("Requires-Dist: x==1\n").
	Metadata string
}

var nameRuns = regexp.MustCompile(`[-_.]+`)

// distName is the project's name as file names spell it (PEP 427).
func (w Wheel) distName() string { return nameRuns.ReplaceAllString(w.Project, "_") }

// Filename is the wheel's file name (PEP 427).
func (w Wheel) Filename() string {
	return fmt.Sprintf("%s-%s-%s.whl", w.distName(), w.Version, w.Tags)
}

// DistInfo is the wheel's .dist-info directory, with a trailing slash.
func (w Wheel) DistInfo() string { return w.distName() + "-" + w.Version + ".dist-info/" }

// modified is every member's time: a fixed one keeps the bytes the same.
var modified = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Build returns the wheel's bytes: its files sorted by path, then the
// dist-info's METADATA, WHEEL and RECORD.
func (w Wheel) Build() ([]byte, error) {
	if w.Project == "" || w.Version == "" || w.Tags == "" {
		return nil, fmt.Errorf("wheel %q %q %q: project, version and tags are required", w.Project, w.Version, w.Tags)
	}
	info := w.DistInfo()
	files := map[string][]byte{}
	for p, b := range w.Files {
		switch p {
		case info + "METADATA", info + "WHEEL", info + "RECORD":
			continue // the builder writes these
		}
		files[p] = b
	}
	names := make([]string, 0, len(files)+2)
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	// The dist-info last (PEP 427 recommends it), RECORD at the very end.
	files[info+"METADATA"] = w.MetadataFile()
	files[info+"WHEEL"] = []byte("Wheel-Version: 1.0\nGenerator: cudadeps wheelwrite\nRoot-Is-Purelib: false\nTag: " + w.Tags + "\n")
	names = append(names, info+"METADATA", info+"WHEEL")
	var buf, record bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, p := range names {
		if err := add(zw, p, files[p]); err != nil {
			return nil, fmt.Errorf("wheel %s: %w", w.Filename(), err)
		}
		sum := sha256.Sum256(files[p])
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[p]))
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", info)
	if err := add(zw, info+"RECORD", record.Bytes()); err != nil {
		return nil, fmt.Errorf("wheel %s: %w", w.Filename(), err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("wheel %s: %w", w.Filename(), err)
	}
	return buf.Bytes(), nil
}

// MetadataFile is the wheel's METADATA, as the dist-info holds it and an
// index serves it beside the wheel (PEP 658).
func (w Wheel) MetadataFile() []byte {
	return []byte("Metadata-Version: 2.1\nName: " + w.Project + "\nVersion: " + w.Version + "\n" + w.Metadata)
}

func add(zw *zip.Writer, name string, data []byte) error {
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: modified}
	mode := 0o644
	if strings.HasSuffix(name, ".so") || strings.Contains(name, ".so.") {
		mode = 0o755
	}
	h.SetMode(fs.FileMode(mode))
	fw, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = fw.Write(data)
	return err
}
