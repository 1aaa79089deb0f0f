package catalog

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/platform"
)

// nvidiaName matches sonames of NVIDIA's CUDA libraries by name; objects
// found in NVIDIA's own wheel directories count whatever their name.
var nvidiaName = regexp.MustCompile(`^(lib(cuda|cudart|cublas|cublasLt|cudnn|cufft|cufftw|cufile|cupti|curand|cusolver|cusolverMg|cusparse|cusparseLt|cutensor|cutensorMg|cudss|cudla|npp|nv|nccl|nvshmem)|nvshmem_)[A-Za-z0-9_.+-]*\.so`)

// auditwheel renames bundled copies (libcudart.faf08d9a.so.13): those are
// the wheel's own files, not names the loader looks for in the system.
var hashedName = regexp.MustCompile(`\.[0-9a-f]{8}\.so`)

// mapsOrFails checks that every soname maps to a component or a driver.
func mapsOrFails(t *testing.T, c *Catalog, sonames map[string]string) {
	t.Helper()
	for s, where := range sonames {
		if _, ok := c.Driver(s); ok {
			continue
		}
		if len(c.Providers(s)) == 0 {
			t.Errorf("%s (%s) maps to no component", s, where)
		}
	}
}

// Every NVIDIA soname of a real PyTorch 2.11 + CUDA 13 environment, provided
// or needed, maps to a component or is a driver library.
func TestTorchCorpusSonamesMap(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(sharedDir(t, "corpus/torch"), "*.jsonl.gz"))
	if len(files) == 0 {
		t.Fatal("no torch corpus files")
	}
	sonames := map[string]string{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(fh)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(zr)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var rec struct {
				Path   string   `json:"path"`
				Soname string   `json:"soname"`
				Needed []string `json:"needed"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			inNVIDIADir := strings.HasPrefix(rec.Path, "nvidia/") || strings.Contains(rec.Path, "/nvidia/lib/")
			if rec.Soname != "" && (inNVIDIADir || nvidiaName.MatchString(rec.Soname)) && !hashedName.MatchString(rec.Soname) {
				sonames[rec.Soname] = rec.Path
			}
			for _, n := range rec.Needed {
				if nvidiaName.MatchString(n) && !hashedName.MatchString(n) {
					sonames[n] = "needed by " + rec.Path
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	// The environment holds cuBLAS, cuDNN, NCCL, NVSHMEM, cuSPARSELt...;
	// fewer names would mean the corpus was not read.
	if len(sonames) < 50 {
		t.Fatalf("only %d NVIDIA sonames found in the torch corpus", len(sonames))
	}
	for _, s := range []string{"libcudnn_graph.so.9", "libnccl.so.2", "libcuda.so.1", "libcutensor.so.2", "nvshmem_transport_ucx.so.3", "libcupti.so.12"} {
		if _, ok := sonames[s]; !ok {
			t.Errorf("%s not collected from the corpus", s)
		}
	}
	mapsOrFails(t, loadDefault(t, LoadOptions{}), sonames)
}

// Every NVIDIA library in the Debian corpus (CUDA 11.8 and driver packages),
// and each NVIDIA soname they need, maps to a component or a driver. Set
// CUDADEPS_LARGE_DEBS to the directory of corpus/debian/fetch-large.sh to
// include libcublas11 and libcusolver11.
func TestDebianCorpusSonamesMap(t *testing.T) {
	dirs := []string{sharedDir(t, "corpus/debian")}
	if extra := lddtest.LargeDebs(t, "the sonames of libcublas11 and libcusolver11"); extra != "" {
		dirs = append(dirs, extra)
	}
	sonames := map[string]string{}
	for _, dir := range dirs {
		debs, _ := filepath.Glob(filepath.Join(dir, "*", "*.deb"))
		for _, deb := range debs {
			base := filepath.Base(deb)
			if !strings.HasPrefix(base, "libcu") && !strings.HasPrefix(base, "libnv") {
				continue // glibc, BLAS and friends: not NVIDIA's
			}
			if err := debELFs(deb, func(name string, in *elfscan.Info) {
				if in.Soname != "" {
					sonames[in.Soname] = base
				}
				for _, n := range in.Needed {
					if nvidiaName.MatchString(n) {
						sonames[n] = "needed by " + base
					}
				}
			}); err != nil {
				t.Fatalf("%s: %v", deb, err)
			}
		}
	}
	for _, s := range []string{"libcudart.so.11.0", "libcupti.so.11.8", "libnvToolsExt.so.1", "libcuda.so.1", "libnvidia-ml.so.1", "libnvperf_host.so"} {
		if _, ok := sonames[s]; !ok {
			t.Errorf("%s not found in the Debian packages", s)
		}
	}
	c := loadDefault(t, LoadOptions{})
	mapsOrFails(t, c, sonames)
	// And to the right components.
	for s, want := range map[string]string{"libcudart.so.11.0": "cuda_cudart", "libcupti.so.11.8": "cuda_cupti", "libnvToolsExt.so.1": "cuda_nvtx"} {
		if ps := c.Providers(s); len(ps) != 1 || ps[0].Component != want {
			t.Errorf("%s → %+v, want %s", s, ps, want)
		}
	}
	for _, s := range []string{"libcuda.so.1", "libnvidia-ml.so.1"} {
		if m, err := c.Which(s, Query{Platform: platform.LinuxX86_64}); err != nil || !m.Driver {
			t.Errorf("%s is a driver library: %+v %v", s, m, err)
		}
	}
}

// debELFs calls f for each ELF file in the data.tar.xz of a .deb (an ar archive).
func debELFs(path string, f func(name string, in *elfscan.Info)) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(data, []byte("!<arch>\n")) {
		return errors.New("not an ar archive")
	}
	for off := 8; off+60 <= len(data); {
		hdr := data[off : off+60]
		name := strings.TrimRight(strings.TrimSpace(string(hdr[:16])), "/")
		size, err := strconv.Atoi(strings.TrimSpace(string(hdr[48:58])))
		if err != nil || off+60+size > len(data) {
			return fmt.Errorf("bad ar member header at %d", off)
		}
		body := data[off+60 : off+60+size]
		off += 60 + size + size%2
		if name != "data.tar.xz" {
			continue
		}
		xr, err := xz.NewReader(bytes.NewReader(body))
		if err != nil {
			return err
		}
		tr := tar.NewReader(xr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			content, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			in, err := elfscan.NewFile(bytes.NewReader(content), int64(len(content)), h.Name).Info()
			if errors.Is(err, elfscan.ErrNotELF) {
				continue
			}
			if err != nil {
				return err
			}
			f(h.Name, in)
		}
	}
	return errors.New("no data.tar.xz member")
}
