// Package cudadeps holds what the cudadeps binary embeds: the default catalog.
package cudadeps

import _ "embed"

//go:generate go run ./cmd/cudadeps catalog import -q data/manifests -o catalog.yaml
//go:generate go test ./catalog -run TestCompiledCatalog -update

//go:embed catalog.yaml
var defaultCatalog []byte

// DefaultCatalog returns the catalog built into the binary: NVIDIA's
// redistrib manifests in data/manifests joined with the curated soname table.
// The caller owns the returned copy.
func DefaultCatalog() []byte {
	return append([]byte(nil), defaultCatalog...)
}
