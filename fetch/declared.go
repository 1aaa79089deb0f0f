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
// the indexes of an .xz file's streams, the content sizes of a .zst file's
// frames, or a zip's central directory. ok
// is false when the format declares nothing (gzip, tar, zstd frames without
// a content size) or the file does not parse; the bounds then apply as the
// bytes are written.
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
	case formatZstd:
		return zstdDeclaredSize(f, fi.Size())
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

// zstdMaxBlocks bounds the block headers walked: 2^18 blocks of 128 KiB
// hold 32 GiB; a file of tiny blocks is left to the bounds as it unpacks.
const zstdMaxBlocks = 1 << 18

// zstdDeclaredSize walks a .zst file's frames (header, block headers,
// checksum) and sums the content sizes they declare; a frame without one
// declares nothing for the whole file.
func zstdDeclaredSize(r io.ReaderAt, size int64) (int64, bool) {
	var total, off int64
	blocks := 0
	for off < size {
		var hdr [18]byte // magic, descriptor, window, dictionary id, content size
		n, _ := r.ReadAt(hdr[:], off)
		if n < 8 {
			return 0, false
		}
		magic := binary.LittleEndian.Uint32(hdr[0:4])
		if magic&0xFFFFFFF0 == 0x184D2A50 { // a skippable frame
			off += 8 + int64(binary.LittleEndian.Uint32(hdr[4:8]))
			continue
		}
		if magic != 0xFD2FB528 {
			return 0, false
		}
		fhd := hdr[4]
		single := fhd>>5&1 == 1
		pos := 5
		if !single {
			pos++ // window descriptor
		}
		pos += [4]int{0, 1, 2, 4}[fhd&3]
		fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
		if fhd>>6 == 0 && single {
			fcsLen = 1
		}
		if fcsLen == 0 || pos+fcsLen > n {
			return 0, false
		}
		var fcs uint64
		for i := fcsLen - 1; i >= 0; i-- {
			fcs = fcs<<8 | uint64(hdr[pos+i])
		}
		if fcsLen == 2 {
			fcs += 256
		}
		if fcs > 1<<62 || total+int64(fcs) > 1<<62 {
			return 0, false
		}
		total += int64(fcs)
		off += int64(pos + fcsLen)
		for last := false; !last; {
			if blocks++; blocks > zstdMaxBlocks {
				return 0, false
			}
			var bh [3]byte
			if _, err := r.ReadAt(bh[:], off); err != nil {
				return 0, false
			}
			v := uint32(bh[0]) | uint32(bh[1])<<8 | uint32(bh[2])<<16
			last = v&1 == 1
			bsize := int64(v >> 3)
			switch v >> 1 & 3 {
			case 1: // RLE: one byte on disk
				bsize = 1
			case 3:
				return 0, false
			}
			off += 3 + bsize
		}
		if fhd>>2&1 == 1 {
			off += 4 // content checksum
		}
	}
	if off != size {
		return 0, false
	}
	return total, true
}
