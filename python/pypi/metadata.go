package pypi

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/cudadeps/cudadeps/internal/urlpolicy"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// coreMetadataJSON reads PEP 691's core-metadata value: false or absent,
// true, or an object of hashes.
func coreMetadataJSON(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	switch s {
	case "", "false", "null":
		return ""
	case "true":
		return "true"
	}
	var hashes map[string]string
	if err := json.Unmarshal(raw, &hashes); err != nil {
		return ""
	}
	if h := strings.ToLower(hashes["sha256"]); len(h) == 64 {
		return "sha256=" + h
	}
	return "true"
}

// coreMetadataAttr reads PEP 658's data-core-metadata attribute (or its
// earlier name): "true", or "sha256=HEX".
func coreMetadataAttr(attrs map[string]string) string {
	v, ok := attrs["data-core-metadata"]
	if !ok {
		v, ok = attrs["data-dist-info-metadata"]
	}
	if !ok {
		return ""
	}
	if algo, sum, found := strings.Cut(v, "="); found && algo == "sha256" && len(sum) == 64 {
		return "sha256=" + strings.ToLower(sum)
	}
	if v == "" || v == "true" {
		return "true"
	}
	return ""
}

// maxWheelForMetadata bounds a wheel downloaded whole only to read its
// METADATA, when the index serves no metadata file of its own.
const maxWheelForMetadata = 32 << 20

// Metadata reads the METADATA of a wheel the index lists: the file the
// index serves beside it (PEP 658), verified by the hash the index gives;
// else the wheel itself, when it is small (a metadata-only distribution
// such as cuda-toolkit is a few kilobytes). A large wheel with no metadata
// file is an error: its metadata is not worth hundreds of megabytes.
func (c *Client) Metadata(ctx context.Context, f File) (*pymeta.Metadata, error) {
	if f.CoreMetadata != "" {
		data, err := c.get(ctx, f.URL+".metadata", pymeta.MaxMetadataSize)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Filename, err)
		}
		if want, ok := strings.CutPrefix(f.CoreMetadata, "sha256="); ok {
			sum := sha256.Sum256(data)
			if hex.EncodeToString(sum[:]) != want {
				return nil, fmt.Errorf("%s.metadata: its sha256 is not the one the index gives", f.Filename)
			}
		}
		return pymeta.ParseMetadata(bytes.NewReader(data))
	}
	f, err := c.Complete(ctx, f)
	if err != nil {
		return nil, err
	}
	if f.Size > maxWheelForMetadata {
		return nil, fmt.Errorf("%s: the index serves no metadata file for it, and the wheel (%d bytes) is too large to download for its metadata", f.Filename, f.Size)
	}
	data, err := c.get(ctx, f.URL, maxWheelForMetadata)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Filename, err)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != f.SHA256 {
		return nil, fmt.Errorf("%s: its sha256 is not the one the index gives", f.Filename)
	}
	return wheelMetadata(f.Filename, data)
}

// wheelMetadata reads the METADATA member of a wheel's .dist-info.
func wheelMetadata(name string, data []byte) (*pymeta.Metadata, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, m := range zr.File {
		dir, base, ok := strings.Cut(m.Name, "/")
		if !ok || base != "METADATA" || !strings.HasSuffix(dir, ".dist-info") {
			continue
		}
		r, err := m.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, m.Name, err)
		}
		defer r.Close()
		return pymeta.ParseMetadata(r)
	}
	return nil, fmt.Errorf("%s: no .dist-info/METADATA in the wheel", name)
}

// get reads a small file from the index's host, at most limit bytes.
func (c *Client) get(ctx context.Context, fileURL string, limit int64) ([]byte, error) {
	u, err := url.Parse(fileURL)
	if err != nil {
		return nil, err
	}
	if err := urlpolicy.Check(u, c.allowHTTP, urlpolicy.Configured); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fileURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "cudadeps")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", u.Redacted(), limit)
	}
	return data, nil
}
