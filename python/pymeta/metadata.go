package pymeta

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxMetadataSize bounds the METADATA read; its headers are a few
// kilobytes, and a description body is not read at all.
const MaxMetadataSize = 16 << 20

// Metadata is what a distribution's METADATA says about it.
type Metadata struct {
	Name          string
	Version       string // as written; ParseVersion may refuse a legacy one
	RequiresDist  []Requirement
	ProvidesExtra []string
	// Problems are Requires-Dist lines that do not parse, kept out of
	// RequiresDist.
	Problems []string
}

// keptHeader is the lower-case name of a header Metadata keeps, "" for any
// other. Header names are matched without regard to ASCII case (Unicode
// folding would take "Requires-Diſt" for one).
func keptHeader(k []byte) string {
	for _, h := range [...]string{"name", "version", "requires-dist", "provides-extra"} {
		if len(k) == len(h) && asciiLowerEqual(k, h) {
			return h
		}
	}
	return ""
}

// asciiLowerEqual reports whether b, ASCII letters lowered, is lower.
func asciiLowerEqual(b []byte, lower string) bool {
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// ParseMetadata reads METADATA's email-style headers (up to the body),
// reading at most MaxMetadataSize bytes. Only the headers Metadata holds
// are kept: the others (a License header can carry a whole license as
// thousands of continuation lines) are passed over, in time linear in
// their size.
func ParseMetadata(r io.Reader) (*Metadata, error) { return ParseMetadataSharing(r, nil) }

// ParseMetadataSharing is ParseMetadata taking the markers of its
// requirements from shared (nil: none shared), which parses each marker
// text once for every METADATA read with it: an environment's hundreds of
// distributions repeat a few hundred markers thousands of times
// (`platform_system == "Linux"`, `extra == "dev"`).
func ParseMetadataSharing(r io.Reader, shared *SharedMarkers) (*Metadata, error) {
	lr := &io.LimitedReader{R: r, N: MaxMetadataSize + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 4<<10), MaxMetadataSize)
	m := &Metadata{}
	// The header being read: its name (lower case) when Metadata keeps
	// it, its value so far; continuation lines extend it.
	var key string
	var value strings.Builder
	started := false
	flush := func() {
		if key == "" {
			return
		}
		v := strings.TrimSpace(value.String())
		switch key {
		case "name":
			m.Name = v
		case "version":
			m.Version = v
		case "requires-dist":
			req, err := parseRequirementSharing(v, shared)
			if err != nil {
				m.Problems = append(m.Problems, err.Error())
				break
			}
			m.RequiresDist = append(m.RequiresDist, req)
		case "provides-extra":
			m.ProvidesExtra = append(m.ProvidesExtra, v)
		}
		key = ""
		value.Reset()
	}
	// Lines are looked at in the scanner's buffer: only the values kept
	// are copied (an environment's METADATA run to thousands of header
	// lines, read at every scan).
	for sc.Scan() {
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if len(line) == 0 {
			break // the body
		}
		if line[0] == ' ' || line[0] == '\t' {
			if !started {
				return nil, errors.New("METADATA starts with a continuation line")
			}
			if key != "" {
				value.WriteByte(' ')
				value.Write(bytes.TrimSpace(line))
			}
			continue
		}
		flush()
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return nil, fmt.Errorf("METADATA: not a header: %.80q", line)
		}
		started = true
		if key = keptHeader(bytes.TrimSpace(k)); key != "" {
			value.Write(bytes.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("METADATA: %w", err)
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("METADATA: headers larger than %d bytes", MaxMetadataSize)
	}
	flush()
	if m.Name == "" {
		return nil, errors.New("METADATA has no Name")
	}
	return m, nil
}
