package pymeta

import (
	"bufio"
	"bytes"
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
	data, err := io.ReadAll(&io.LimitedReader{R: r, N: maxSize + 1})
	if err != nil {
		return nil, fmt.Errorf("RECORD: %w", err)
	}
	return parseRecordBytes(data, maxSize)
}

// ParseRecordBytes is ParseRecord of a RECORD already read.
func ParseRecordBytes(data []byte) ([]RecordEntry, error) {
	return parseRecordBytes(data, MaxRecordSize)
}

func parseRecordBytes(data []byte, maxSize int64) ([]RecordEntry, error) {
	if int64(len(data)) > maxSize {
		return nil, fmt.Errorf("RECORD larger than %d bytes", maxSize)
	}
	return ParseRecordString(string(data))
}

// ParseRecordString is ParseRecord of a RECORD read into a string. The
// entries' paths are pieces of text.
func ParseRecordString(text string) ([]RecordEntry, error) {
	if int64(len(text)) > MaxRecordSize {
		return nil, fmt.Errorf("RECORD larger than %d bytes", MaxRecordSize)
	}
	if strings.Contains(text, `"`) {
		// Quoted fields (a path with a comma, a line break): CSV's rules.
		return recordCSV(text)
	}
	return recordPlain(text)
}

// EachRecordPath calls fn with the path of each entry of the RECORD r
// reads, in order, by ParseRecord's rules (quoted fields by CSV's);
// digests and sizes are not read, so a malformed one is not refused. The
// RECORD is read as a stream and the bytes are valid only during the
// call: a reader keeping a few paths of thousands holds none of the rest.
func EachRecordPath(r io.Reader, fn func(path []byte)) error {
	br := bufio.NewReaderSize(io.LimitReader(r, MaxRecordSize+1), recordChunk)
	var long []byte
	read := 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if read += len(line); read > MaxRecordSize {
			return fmt.Errorf("RECORD larger than %d bytes", MaxRecordSize)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if bytes.IndexByte(line, '"') >= 0 {
			// Quoting may span lines: the rest by CSV's rules, which read
			// the lines before it as the plain reading did.
			rest := io.MultiReader(bytes.NewReader(bytes.Clone(line)), br)
			return eachCSVRecord(rest, func(row []string) error {
				if len(row) > 0 && row[0] != "" {
					fn([]byte(row[0]))
				}
				return nil
			})
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if p, _, _ := bytes.Cut(line, []byte(",")); len(p) > 0 {
			fn(p)
		}
		if err != nil {
			return nil
		}
	}
}

// recordChunk is what EachRecordPath reads at a time.
const recordChunk = 4 << 10

// recordCSV reads a RECORD with encoding/csv.
func recordCSV(text string) ([]RecordEntry, error) {
	var out []RecordEntry
	var digests []byte
	err := eachCSVRecord(strings.NewReader(text), func(row []string) (err error) {
		out, digests, err = appendEntry(out, digests, row)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachCSVRecord calls fn with each row of a RECORD read by CSV's rules;
// the row is valid only during the call.
func eachCSVRecord(r io.Reader, fn func(row []string) error) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("RECORD: %w", err)
		}
		if err := fn(row); err != nil {
			return err
		}
	}
}

// recordPlain reads a RECORD without quotes: every line is its fields
// split at commas, as CSV reads it, without a reader's copies (torch's
// RECORD has 11,847 lines).
func recordPlain(text string) ([]RecordEntry, error) {
	lines := strings.Count(text, "\n") + 1
	out := make([]RecordEntry, 0, lines)
	// The digests share one array (a sha256 for each line, most often):
	// an environment lists tens of thousands of files.
	digests := make([]byte, 0, lines*sha256Size)
	var row [3]string
	var err error
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			continue // CSV skips empty lines
		}
		n := 0
		for f := range strings.SplitSeq(line, ",") {
			if n < len(row) {
				row[n] = f
			}
			n++
		}
		if out, digests, err = appendEntry(out, digests, row[:min(n, len(row))]); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, nil // as CSV gives it
	}
	return out, nil
}

// sha256Size is the length of a sha256 digest.
const sha256Size = 32

// appendEntry adds the entry of one RECORD row (path, algo=digest, size;
// the fields after the path may be empty or absent); its digest is
// decoded onto digests, whose array it shares.
func appendEntry(out []RecordEntry, digests []byte, row []string) ([]RecordEntry, []byte, error) {
	if len(row) == 0 || row[0] == "" {
		return out, digests, nil
	}
	e := RecordEntry{Path: row[0], Size: -1}
	var err error
	if len(row) > 1 && row[1] != "" {
		algo, digest, ok := strings.Cut(row[1], "=")
		if !ok {
			return nil, nil, fmt.Errorf("RECORD: %s: hash %q is not algo=digest", row[0], row[1])
		}
		digest = strings.TrimRight(digest, "=")
		var buf [128]byte
		src := append(buf[:0], digest...) // on the stack for any real digest
		start := len(digests)
		digests, err = base64.RawURLEncoding.AppendDecode(digests, src)
		if err != nil {
			return nil, nil, fmt.Errorf("RECORD: %s: hash %q: %w", row[0], row[1], err)
		}
		if algo == "sha256" {
			algo = "sha256" // not a piece of the line, which it would keep
		} else {
			algo = strings.Clone(algo)
		}
		e.HashAlgo, e.Hash = algo, digests[start:len(digests):len(digests)]
	}
	if len(row) > 2 && row[2] != "" {
		n, err := strconv.ParseInt(row[2], 10, 64)
		if err != nil || n < 0 {
			return nil, nil, fmt.Errorf("RECORD: %s: size %q is not a number", row[0], row[2])
		}
		e.Size = n
	}
	return append(out, e), digests, nil
}
