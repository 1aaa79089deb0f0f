package catalog

import _ "embed"

//go:generate go run ../cmd/cudadeps catalog import -q manifests -o catalog.yaml
//go:generate go test . -run TestCompiledCatalog -update

//go:embed catalog.yaml
var defaultYAML []byte

// DefaultYAML returns the text of the catalog built into the binary:
// NVIDIA's redistrib manifests in catalog/manifests joined with the
// curated soname table. The caller owns the returned copy.
func DefaultYAML() []byte {
	return append([]byte(nil), defaultYAML...)
}
