package catalog_test

import (
	"bytes"
	"testing"

	"github.com/cudadeps/cudadeps/catalog"
)

func TestDefaultCatalogParsesAndIsACopy(t *testing.T) {
	data := catalog.DefaultYAML()
	c, err := catalog.Parse(data, "catalog.yaml")
	if err != nil {
		t.Fatalf("the embedded catalog does not parse: %v", err)
	}
	if len(c.Components()) < 30 || len(c.Drivers()) < 5 {
		t.Errorf("embedded catalog has %d components and %d drivers", len(c.Components()), len(c.Drivers()))
	}
	data[0] ^= 0xff
	if bytes.Equal(data, catalog.DefaultYAML()) {
		t.Error("DefaultCatalog returned the embedded bytes themselves, not a copy")
	}
}
