package pymeta

import (
	"bufio"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxRecordSize bounds a RECORD; the largest real ones (torch: about twelve
// thousand files) are a few megabytes.
const MaxRecordSize = 64 << 20

// RecordEntry is one line of RECORD.
type RecordEntry struct {
	Path string // as written: relative to the site directory, '/'-separated
	// Hash is the digest named by HashAlgo ("sha256"); nil when RECORD
	// gives none (RECORD itself, files written after install).
	HashAlgo string
	Hash     []byte
	Size     int64 // -1 when RECORD gives none
}

// ParseRecord reads a RECORD (CSV: path, algo=urlsafe-base64 digest, size),
// refusing one larger than MaxRecordSize.
func ParseRecord(r io.Reader) ([]RecordEntry, error) {
	return parseRecord(r, MaxRecordSize)
}

func parseRecord(r io.Reader, maxSize int64) ([]RecordEntry, error) {
	lr := &io.LimitedReader{R: r, N: maxSize + 1}
	cr := csv.NewReader(bufio.NewReader(lr))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	var out []RecordEntry
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if lr.N <= 0 {
			return nil, fmt.Errorf("RECORD larger than %d bytes", maxSize)
		}
		if err != nil {
			return nil, fmt.Errorf("RECORD: %w", err)
		}
		if len(row) == 0 || row[0] == "" {
			continue
		}
		e := RecordEntry{Path: row[0], Size: -1}
		if len(row) > 1 && row[1] != "" {
			algo, digest, ok := strings.Cut(row[1], "=")
			if !ok {
				return nil, fmt.Errorf("RECORD: %s: hash %q is not algo=digest", row[0], row[1])
			}
			sum, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(digest, "="))
			if err != nil {
				return nil, fmt.Errorf("RECORD: %s: hash %q: %w", row[0], row[1], err)
			}
			if algo == "sha256" {
				algo = "sha256" // not a piece of the line, which it would keep
			} else {
				algo = strings.Clone(algo)
			}
			e.HashAlgo, e.Hash = algo, sum
		}
		if len(row) > 2 && row[2] != "" {
			n, err := strconv.ParseInt(row[2], 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("RECORD: %s: size %q is not a number", row[0], row[2])
			}
			e.Size = n
		}
		out = append(out, e)
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("RECORD larger than %d bytes", maxSize)
	}
	return out, nil
}
