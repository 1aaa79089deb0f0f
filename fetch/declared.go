package fetch

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
)

// declaredSize is what the archive at path says it unpacks to, read from
// its index without decoding anything: the sum of the uncompressed sizes in
// the indexes of an .xz file's streams, or of a zip's central directory. ok
// is false when the format declares nothing (gzip, zstd, tar) or the file
// does not parse; the bounds then apply as the bytes are written.
func declaredSize(path string) (size int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	switch sniff(head[:n]) {
	case formatXZ:
		return xzDeclaredSize(f, fi.Size())
	case formatZip:
		zr, err := zip.NewReader(f, fi.Size())
		if err != nil {
			return 0, false
		}
		return zipDeclaredSize(zr)
	}
	return 0, false
}

func zipDeclaredSize(zr *zip.Reader) (int64, bool) {
	var total uint64
	for _, f := range zr.File {
		total += f.UncompressedSize64
		if total >= 1<<62 {
			return 1 << 62, true
		}
	}
	return int64(total), true
}

// xzMaxIndex bounds the index bytes read per stream: NVIDIA's archives have
// a few hundred blocks, a few kilobytes of index.
const xzMaxIndex = 16 << 20

var xzMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0}

// xzDeclaredSize walks an .xz file's streams from the end (footer, index,
// blocks, header), summing the uncompressed sizes its indexes declare.
func xzDeclaredSize(r io.ReaderAt, size int64) (int64, bool) {
	var total int64
	end := size
	for end > 0 {
		// Stream padding: zeros in multiples of four, between or after streams.
		for pad := 0; ; pad += 4 {
			if end < 32 || pad > 1024 {
				return 0, false
			}
			var w [4]byte
			if _, err := r.ReadAt(w[:], end-4); err != nil {
				return 0, false
			}
			if w != [4]byte{} {
				break
			}
			end -= 4
		}
		var foot [12]byte
		if _, err := r.ReadAt(foot[:], end-12); err != nil {
			return 0, false
		}
		if foot[10] != 'Y' || foot[11] != 'Z' || crc32.ChecksumIEEE(foot[4:10]) != binary.LittleEndian.Uint32(foot[0:4]) {
			return 0, false
		}
		back := (int64(binary.LittleEndian.Uint32(foot[4:8])) + 1) * 4
		if back > xzMaxIndex || back > end-24 {
			return 0, false
		}
		idx := make([]byte, back)
		if _, err := r.ReadAt(idx, end-12-back); err != nil {
			return 0, false
		}
		if crc32.ChecksumIEEE(idx[:back-4]) != binary.LittleEndian.Uint32(idx[back-4:]) || idx[0] != 0 {
			return 0, false
		}
		rest := idx[1 : back-4]
		count, n := binary.Uvarint(rest)
		if n <= 0 || count > uint64(back) {
			return 0, false
		}
		rest = rest[n:]
		var blocks int64
		for range count {
			unpadded, n1 := binary.Uvarint(rest)
			if n1 <= 0 {
				return 0, false
			}
			uncompressed, n2 := binary.Uvarint(rest[n1:])
			if n2 <= 0 || unpadded > 1<<62 || uncompressed > 1<<62 {
				return 0, false
			}
			rest = rest[n1+n2:]
			blocks += int64((unpadded + 3) &^ 3)
			total += int64(uncompressed)
			if blocks > size || total > 1<<62 {
				return 0, false
			}
		}
		end -= 12 + back + blocks + 12
		if end < 0 {
			return 0, false
		}
		var magic [6]byte
		if _, err := r.ReadAt(magic[:], end); err != nil || !bytes.Equal(magic[:], xzMagic) {
			return 0, false
		}
	}
	return total, true
}
