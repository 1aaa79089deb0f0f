package catalog

import "github.com/cudadeps/cudadeps/internal/regfile"

// Bounds on what a catalog reads; catalogs and manifests come from users,
// mirrors and the network, so none is trusted to be small or sane.
const (
	// maxFileSize bounds a catalog or manifest file. The built-in catalog
	// is about 300 KB and NVIDIA's largest manifest about 55 KB.
	maxFileSize = 16 << 20
	// maxArchiveSize bounds an archive's declared size: far above NVIDIA's
	// largest (TensorRT's, under 4 GB), far below what would overflow sums.
	maxArchiveSize = 64 << 30
)

// ReadFile reads a catalog, soname table or manifest file: a regular file (not a device,
// FIFO or directory, which could block or never end) of at most
// MaxFileSize bytes.
func ReadFile(path string) ([]byte, error) {
	return regfile.Read(path, maxFileSize)
}
