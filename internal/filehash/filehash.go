// Package filehash computes the sha256 of a file's contents, as hex, the form records, RECORD files and indexes give it in.
package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// SHA256 is the lower-case hex sha256 of the contents of the file at path
// (a symbolic link is followed).
func SHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
