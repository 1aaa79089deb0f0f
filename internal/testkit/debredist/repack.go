package debredist

import (
	"archive/tar"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Component is an NVIDIA redistributable component and the Debian packages
// it is made of.
type Component struct {
	Name  string // NVIDIA's manifest key: libcublas
	Title string // NVIDIA's name for it
	Debs  []string
}

// CUDAComponents are Debian's CUDA 12 library packages as the components of
// NVIDIA's CUDA toolkit release they were built from (Debian packages
// NVIDIA's binaries: libcublas12 and libcublaslt12 are NVIDIA's libcublas
// archive split in two).
func CUDAComponents() []Component {
	return []Component{
		{"cuda_cudart", "CUDA Runtime (cudart)", []string{"libcudart12"}},
		{"cuda_nvrtc", "CUDA NVRTC", []string{"libnvrtc12", "libnvrtc-builtins12.4"}},
		{"cuda_nvtx", "CUDA NVTX", []string{"libnvtoolsext1"}},
		{"libcublas", "CUDA cuBLAS", []string{"libcublas12", "libcublaslt12"}},
		{"libcufft", "CUDA cuFFT", []string{"libcufft11"}},
		{"libcurand", "CUDA cuRAND", []string{"libcurand10"}},
		{"libcusolver", "CUDA cuSOLVER", []string{"libcusolver11"}},
		{"libcusparse", "CUDA cuSPARSE", []string{"libcusparse12"}},
		{"libnvjitlink", "NVIDIA nvJitLink", []string{"libnvjitlink12"}},
	}
}

// Packages are the Debian packages of comps.
func Packages(comps []Component) []string {
	var out []string
	for _, c := range comps {
		out = append(out, c.Debs...)
	}
	return out
}

// UpstreamVersion reads a Debian version of NVIDIA's CUDA packages:
// "12.4.5.8~12.4.1-2" is component version 12.4.5.8 of CUDA release
// 12.4.1 (libcurand's "11.1.1+~10.3.5.147~12.4.1-2" is 10.3.5.147).
func UpstreamVersion(debVersion string) (version, release string, err error) {
	v := debVersion
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	if i := strings.LastIndex(v, "-"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, "~")
	if len(parts) < 2 {
		return "", "", fmt.Errorf("%q names no CUDA release (COMPONENT~RELEASE)", debVersion)
	}
	release = parts[len(parts)-1]
	version = strings.TrimSuffix(parts[len(parts)-2], "+")
	if version == "" || release == "" {
		return "", "", fmt.Errorf("%q: no component version", debVersion)
	}
	return version, release, nil
}

// Archive is one archive written into a mirror.
type Archive struct {
	Component    string
	Version      string
	Platform     string
	Variant      string // cuda12, or ""
	RelativePath string
	SHA256, MD5  string
	Size         int64
	// Files are the archive's lib/ entries.
	Files []string
}

// manifestArchive is an archive's entry in NVIDIA's redistrib JSON.
type manifestArchive struct {
	RelativePath string `json:"relative_path"`
	SHA256       string `json:"sha256"`
	MD5          string `json:"md5"`
	Size         string `json:"size"`
}

// Repack writes, into mirror, the archive of each CUDA component for
// platform from its Debian packages (debs, by name) in NVIDIA's layout
// (COMPONENT/PLATFORM/COMPONENT-PLATFORM-VERSION-archive.tar.zst holding
// COMPONENT-PLATFORM-VERSION-archive/lib/ with the packages' libraries and
// their links, and LICENSE, the packages' copyright), and the release's
// manifest in NVIDIA's redistrib format, mirror/redistrib_RELEASE.json,
// whose path it returns with the archives. The archives are zstd-compressed
// tar files (NVIDIA's are xz): xz would cost minutes for the 1.4 GB of
// CUDA 12.4's libraries, zstd seconds.
func Repack(t testing.TB, mirror, platform string, comps []Component, debs map[string]string, pins *Pins) (string, []Archive) {
	t.Helper()
	needTools(t)
	release := ""
	type job struct {
		c       Component
		version string
	}
	var jobs []job
	for _, c := range comps {
		v, r, err := UpstreamVersion(pins.Version(c.Debs[0]))
		if err != nil {
			t.Fatalf("%s: %v", c.Debs[0], err)
		}
		if release != "" && r != release {
			t.Fatalf("%s is of CUDA %s, the others of %s", c.Debs[0], r, release)
		}
		release = r
		jobs = append(jobs, job{c, v})
	}
	triplet := triplets[pins.Arch]
	archives := make([]Archive, len(jobs))
	errs := parallel(jobs, func(j job) error {
		stage, err := os.MkdirTemp("", "debredist-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(stage)
		for _, p := range j.c.Debs {
			deb, ok := debs[p]
			if !ok {
				return fmt.Errorf("%s: package %s is not pinned", j.c.Name, p)
			}
			if out, err := exec.Command("dpkg-deb", "-x", deb, stage).CombinedOutput(); err != nil {
				return fmt.Errorf("dpkg-deb -x %s: %v: %s", deb, err, out)
			}
		}
		a := Archive{Component: j.c.Name, Version: j.version, Platform: platform}
		files := map[string]string{} // lib/NAME → file in the stage
		ents, err := os.ReadDir(filepath.Join(stage, "usr", "lib", triplet))
		if err != nil {
			return err
		}
		for _, e := range ents {
			if strings.Contains(e.Name(), ".so") && (e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0) {
				files["lib/"+e.Name()] = filepath.Join(stage, "usr", "lib", triplet, e.Name())
			}
		}
		license, _ := filepath.Glob(filepath.Join(stage, "usr", "share", "doc", j.c.Debs[0], "copyright"))
		if len(license) == 1 {
			files["LICENSE"] = license[0]
		}
		if err := writeArchive(mirror, &a, files); err != nil {
			return fmt.Errorf("%s: %w", j.c.Name, err)
		}
		for i := range jobs {
			if jobs[i].c.Name == j.c.Name {
				archives[i] = a
			}
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	manifest := map[string]any{"release_date": "", "release_label": release, "release_product": "cuda"}
	for i, a := range archives {
		manifest[a.Component] = map[string]any{
			"name": comps[i].Title, "license": "CUDA Toolkit (as Debian redistributes it)", "version": a.Version,
			"license_path": a.Component + "/LICENSE.txt",
			a.Platform:     entryOf(a),
		}
	}
	return writeManifest(t, mirror, "redistrib_"+release+".json", manifest), archives
}

func entryOf(a Archive) manifestArchive {
	return manifestArchive{RelativePath: a.RelativePath, SHA256: a.SHA256, MD5: a.MD5, Size: fmt.Sprint(a.Size)}
}

func writeManifest(t testing.TB, mirror, name string, m map[string]any) string {
	t.Helper()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(mirror, name)
	if err := os.WriteFile(f, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// archiveName is NVIDIA's name of an archive, without its extension.
func (a *Archive) archiveName() string {
	n := a.Component + "-" + a.Platform + "-" + a.Version
	if a.Variant != "" {
		n += "_" + a.Variant
	}
	return n + "-archive"
}

// writeArchive writes a's files (archive path → file of this machine, a
// link kept as a link) as mirror/COMPONENT/PLATFORM/NAME.tar.zst, the top
// directory named as the archive, and fills in where it lies and what it
// is.
func writeArchive(mirror string, a *Archive, files map[string]string) error {
	a.RelativePath = a.Component + "/" + a.Platform + "/" + a.archiveName() + ".tar.zst"
	dst := filepath.Join(mirror, filepath.FromSlash(a.RelativePath))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	sha, md := sha256.New(), md5.New()
	counter := &countWriter{}
	zw, err := zstd.NewWriter(io.MultiWriter(out, sha, md, counter), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	top := a.archiveName() + "/"
	mtime := time.Unix(1700000000, 0)
	dirs := []string{top, top + "lib/"}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime}); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := addFile(tw, top+n, files[n], mtime); err != nil {
			return err
		}
		if strings.HasPrefix(n, "lib/") {
			a.Files = append(a.Files, n)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	a.SHA256, a.MD5, a.Size = hex.EncodeToString(sha.Sum(nil)), hex.EncodeToString(md.Sum(nil)), counter.n
	return out.Close()
}

// addFile writes one file (or link) of this machine into the archive.
func addFile(tw *tar.Writer, name, src string, mtime time.Time) error {
	st, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: mtime})
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(st.Mode().Perm()), Size: st.Size(), ModTime: mtime}); err != nil {
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
