package catalog

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Bounds on what a catalog reads; catalogs and manifests come from users,
// mirrors and the network, so none is trusted to be small or sane.
const (
	// MaxFileSize bounds a catalog or manifest file. The built-in catalog
	// is about 300 KB and NVIDIA's largest manifest about 55 KB.
	MaxFileSize = 16 << 20
	// MaxArchiveSize bounds an archive's declared size: far above NVIDIA's
	// largest (TensorRT's, under 4 GB), far below what would overflow sums.
	MaxArchiveSize = 64 << 30
)

// ReadFile reads a catalog, soname table or manifest file: a regular file (not a device,
// FIFO or directory, which could block or never end) of at most
// MaxFileSize bytes.
func ReadFile(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO without a writer must not wait.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, fileKind(info.Mode()))
	}
	if info.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: %d bytes is more than a catalog or manifest file may hold (%d)", path, info.Size(), MaxFileSize)
	}
	// The file may grow while it is read: read one byte past the bound.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s: more than %d bytes", path, MaxFileSize)
	}
	return data, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}
