package catalog

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/platform"
)

// pinCatalog has cuDNN at the given versions for linux-x86_64, CUDA 13.
func pinCatalog(t *testing.T, versions ...string) *Catalog {
	t.Helper()
	var b strings.Builder
	b.WriteString("format: 1\nproducts:\n  cudnn:\n    title: cuDNN\n    base_url: https://example.invalid/cudnn/redist/\ncomponents:\n  cudnn:\n    product: cudnn\n    releases:\n")
	for i, v := range versions {
		fmt.Fprintf(&b, `      - version: %s
        archives:
          - platform: linux-x86_64
            cuda_variant: cuda13
            path: cudnn/linux-x86_64/cudnn-%s_cuda13-archive.tar.xz
            sha256: %064x
            size: %d
            sonames: [libcudnn.so.9]
`, v, v, i+1, 1000+i)
	}
	c, err := Parse([]byte(b.String()), "pins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWhichPinned(t *testing.T) {
	q := Query{Platform: platform.LinuxX86_64, CUDAMajor: 13}
	pin := Pin{Version: "9.19.0.56", By: "nvidia-cudnn-cu13 9.19.0.56"}
	cases := []struct {
		name     string
		versions []string
		want     string // "" means a *PinError
		note     string
	}{
		{"exact", []string{"9.12.0.46", "9.19.0.56", "9.27.0.42"}, "9.19.0.56", "the catalog has it"},
		{"nearest newer of the same major", []string{"9.12.0.46", "9.20.0.48", "9.27.0.42", "10.0.0.1"}, "9.20.0.48", "the catalog has 9.20.0.48: using it"},
		{"never another major", []string{"9.12.0.46", "10.0.0.1"}, "", ""},
		{"never older", []string{"9.12.0.46", "9.14.0.64"}, "", ""},
		{"nothing at all", []string{"8.9.7.29"}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := pinCatalog(t, tc.versions...)
			m, err := c.WhichPinned("libcudnn.so.9", q, pin)
			if tc.want == "" {
				var pe *PinError
				if !errors.As(err, &pe) {
					t.Fatalf("want a PinError, got %v, %v", m, err)
				}
				for _, v := range tc.versions {
					if !strings.Contains(err.Error(), v) {
						t.Errorf("the refusal does not list %s: %v", v, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Version != tc.want || !strings.Contains(m.Pin, tc.note) {
				t.Fatalf("got %s (%q), want %s (%q)", m.Version, m.Pin, tc.want, tc.note)
			}
		})
	}
}

func TestPinPrefix(t *testing.T) {
	c := pinCatalog(t, "0.7.1.0", "0.8.0.4", "0.8.1.1")
	m, err := c.WhichPinned("libcudnn.so.9", Query{Platform: platform.LinuxX86_64, CUDAMajor: 13}, Pin{Version: "0.8.0", By: "x"})
	if err != nil || m.Version != "0.8.0.4" {
		t.Fatalf("a shortened pin takes the release it prefixes: %v %v", m, err)
	}
	if pinMatches("9.19.0.5", "9.19.0.56") || !pinMatches("9.19.0.56", "9.19") || pinMatches("9.1", "9.19") {
		t.Fatal("pinMatches compares whole fields")
	}
}
