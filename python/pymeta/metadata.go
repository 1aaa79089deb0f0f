package pymeta

import (
	"bufio"
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

// ParseMetadata reads METADATA's email-style headers (up to the body),
// reading at most MaxMetadataSize bytes.
func ParseMetadata(r io.Reader) (*Metadata, error) {
	lr := &io.LimitedReader{R: r, N: MaxMetadataSize + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 64<<10), MaxMetadataSize)
	var headers [][2]string
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			break // the body
		}
		if line[0] == ' ' || line[0] == '\t' {
			if len(headers) == 0 {
				return nil, errors.New("METADATA starts with a continuation line")
			}
			headers[len(headers)-1][1] += " " + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("METADATA: not a header: %.80q", line)
		}
		headers = append(headers, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("METADATA: %w", err)
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("METADATA: headers larger than %d bytes", MaxMetadataSize)
	}
	m := &Metadata{}
	for _, h := range headers {
		switch strings.ToLower(h[0]) {
		case "name":
			m.Name = h[1]
		case "version":
			m.Version = h[1]
		case "requires-dist":
			req, err := ParseRequirement(h[1])
			if err != nil {
				m.Problems = append(m.Problems, err.Error())
				continue
			}
			m.RequiresDist = append(m.RequiresDist, req)
		case "provides-extra":
			m.ProvidesExtra = append(m.ProvidesExtra, h[1])
		}
	}
	if m.Name == "" {
		return nil, errors.New("METADATA has no Name")
	}
	return m, nil
}
