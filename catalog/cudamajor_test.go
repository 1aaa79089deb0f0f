package catalog

import "testing"

func TestCUDAMajorFromSoname(t *testing.T) {
	for s, want := range map[string]int{
		"libcudart.so.13": 13, "libcudart.so.12": 12, "libcudart.so.11.0": 11, "libcudart.so.10.2": 10,
		"libcublas.so.12": 0, "libcufft.so.11": 0, "libcudart.so": 0, "libcudart.so.x": 0,
		"libcudart.so.013": 0, "libcudart.so.0": 0, "libcudart_static.a": 0,
	} {
		got, ok := CUDAMajorFromSoname(s)
		if got != want || ok != (want != 0) {
			t.Errorf("CUDAMajorFromSoname(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
}

func TestCUDAMajorHint(t *testing.T) {
	for name, want := range map[string]int{
		"libcublas.so.13": 13, "libcublasLt.so.12": 12, "libnvrtc.so.13": 13, "libnvJitLink.so.12": 12,
		"libcudart-a7b20f20.so.11.0": 11, "libnppc.so.13": 13, "libnvjpeg.so.12.4.0": 12,
		"libcufft.so.12": 0, "libcurand.so.10": 0, "libcublas.so": 0, "libcublas.so.x": 0, "libcudnn.so.9": 0,
	} {
		got, ok := CUDAMajorHint(name)
		if got != want || ok != (want != 0) {
			t.Errorf("CUDAMajorHint(%s) = %d, %v; want %d", name, got, ok, want)
		}
	}
}
