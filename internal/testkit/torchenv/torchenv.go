// Package torchenv builds, for tests, a site-packages directory with the real dist-info folders of a PyTorch 2.11 cu130 environment and stand-ins for the files their RECORDs list, and changes it as pip would: uninstalling distributions, packing them as wheels.
//
// The dist-info folders (METADATA with the real Requires-Dist pins, RECORD
// with every file, WHEEL, INSTALLER) come from the shared corpus. ELF files
// are the skeletons internal/torchtree writes from the environment's recorded
// dynamic-linking facts; every other file a RECORD lists is a stand-in
// padded to its recorded size as a sparse file, so that a check of the files
// against RECORD by size finds the distributions intact.
package torchenv

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/distinfo"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// DistInfoFile is the shared corpus file with the real dist-info folders.
const DistInfoFile = "corpus/torch/torch-2.11.0-cu130-x86_64-distinfo.tgz"

// Options choose what Build writes.
type Options struct {
	// Site is where to build (a venv's site-packages); a new temporary
	// directory when empty.
	Site string
	// Keep selects the distributions (by normalized name) whose dist-info
	// and files are written; all when nil.
	Keep func(name string) bool
	// ELF writes the skeleton ELF objects of every recorded ELF file
	// (torch's own included); without it only stand-ins are written.
	ELF bool
	// AllFiles writes stand-ins for every distribution's files; without it
	// only NVIDIA's distributions (nvidia-*, cuda-toolkit) get them, which
	// is what a check of their state reads (tens of thousands of files
	// fewer).
	AllFiles bool
	// Consistent makes the environment one an installer could have left
	// from wheels of these very files: ELF objects unpadded, stand-ins a
	// few bytes, and each written distribution's RECORD rewritten with
	// their sizes and sha256 (packing them as wheels then costs little).
	// Without it the files have the real sizes and RECORD stays as it was.
	Consistent bool
}

// Build writes the environment and returns its site-packages directory.
// It skips (or fails under CUDADEPS_REQUIRE_ORACLES=1) without the shared
// corpus.
func Build(t testing.TB, opts Options) string {
	t.Helper()
	corpus := torchtree.Corpus(t)
	shared := filepath.Dir(filepath.Dir(filepath.Dir(corpus)))
	site := opts.Site
	if site == "" {
		site = t.TempDir()
	}
	keep := opts.Keep
	if keep == nil {
		keep = func(string) bool { return true }
	}
	infos := distInfos(t, filepath.Join(shared, DistInfoFile))
	// Files RECORD lists outside site-packages (console scripts in
	// ../../../bin) are written when site is a venv's
	// PREFIX/lib/pythonX.Y/site-packages, inside PREFIX.
	within := site
	if lib := filepath.Dir(filepath.Dir(site)); filepath.Base(lib) == "lib" && filepath.Base(site) == "site-packages" {
		within = filepath.Dir(lib)
	}
	if opts.ELF {
		owner := ownersByPath(t, infos)
		recs, err := torchtree.LoadFile(corpus)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := torchtree.Build(t.Context(), site, recs, torchtree.Options{Pad: !opts.Consistent, Keep: func(r *torchtree.Record) bool {
			return keep(owner[r.Path])
		}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, di := range infos {
		if !keep(di.name) {
			continue
		}
		for base, data := range di.files {
			p := filepath.Join(site, di.dir, filepath.FromSlash(base))
			writeFile(t, p, data)
		}
		if !opts.AllFiles && !strings.HasPrefix(di.name, "nvidia-") && di.name != "cuda-toolkit" {
			continue
		}
		entries, err := pymeta.ParseRecord(strings.NewReader(string(di.files["RECORD"])))
		if err != nil {
			t.Fatalf("%s: %v", di.dir, err)
		}
		for _, e := range entries {
			p := filepath.Join(site, filepath.FromSlash(e.Path))
			if !strings.HasPrefix(p, within+string(filepath.Separator)) || strings.Contains(e.Path, ".dist-info/") {
				continue
			}
			if _, err := os.Lstat(p); err == nil {
				continue
			}
			if opts.Consistent {
				writeFile(t, p, []byte(e.Path+"\n"))
				continue
			}
			writeFile(t, p, nil)
			if e.Size > 0 {
				if err := os.Truncate(p, e.Size); err != nil {
					t.Fatal(err)
				}
			}
		}
		if opts.Consistent {
			rewriteRecord(t, site, filepath.Join(site, di.dir, "RECORD"), entries)
		}
	}
	return site
}

// rewriteRecord writes RECORD again with the sizes and sha256 of the files
// on disk (an entry whose file is absent keeps its line).
func rewriteRecord(t testing.TB, site, record string, entries []pymeta.RecordEntry) {
	t.Helper()
	var b strings.Builder
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(site, filepath.FromSlash(e.Path)))
		if err != nil || strings.HasSuffix(e.Path, ".dist-info/RECORD") {
			fmt.Fprintf(&b, "%s,,\n", e.Path)
			continue
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s,sha256=%s,%d\n", e.Path, base64.RawURLEncoding.EncodeToString(sum[:]), len(data))
	}
	if err := os.WriteFile(record, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

type distInfo struct {
	dir   string // name-version.dist-info
	name  string // normalized
	files map[string][]byte
}

func distInfos(t testing.TB, tgz string) []distInfo {
	t.Helper()
	var out []distInfo
	for _, f := range distinfo.Read(t, tgz) {
		n, _, _ := strings.Cut(strings.TrimSuffix(f.Dir, ".dist-info"), "-")
		out = append(out, distInfo{dir: f.Dir, name: pymeta.NormalizeName(n), files: f.Files})
	}
	return out
}

// ownersByPath maps each site-relative path a RECORD lists to its
// distribution.
func ownersByPath(t testing.TB, infos []distInfo) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, di := range infos {
		entries, err := pymeta.ParseRecord(strings.NewReader(string(di.files["RECORD"])))
		if err != nil {
			t.Fatalf("%s: %v", di.dir, err)
		}
		for _, e := range entries {
			out[e.Path] = di.name
		}
	}
	return out
}

func writeFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Uninstall removes distributions as `pip uninstall -y` does: every file
// its RECORD lists, its .dist-info, then the directories that became empty.
func Uninstall(t testing.TB, site string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(site)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n, _, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".dist-info"), "-")
		if !ok || !strings.HasSuffix(e.Name(), ".dist-info") || !slices.Contains(names, pymeta.NormalizeName(n)) {
			continue
		}
		info := filepath.Join(site, e.Name())
		data, err := os.ReadFile(filepath.Join(info, "RECORD"))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := pymeta.ParseRecord(strings.NewReader(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		dirs := map[string]bool{}
		for _, r := range recs {
			p := filepath.Join(site, filepath.FromSlash(r.Path))
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			for d := filepath.Dir(p); strings.HasPrefix(d, site+string(filepath.Separator)); d = filepath.Dir(d) {
				dirs[d] = true
			}
		}
		if err := os.RemoveAll(info); err != nil {
			t.Fatal(err)
		}
		removeEmptyDirs(dirs)
	}
}

// removeEmptyDirs removes the directories that are empty, deepest first.
func removeEmptyDirs(dirs map[string]bool) {
	list := make([]string, 0, len(dirs))
	for d := range dirs {
		list = append(list, d)
	}
	slices.SortFunc(list, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range list {
		_ = os.Remove(d) // fails, as it should, when not empty
	}
}

// NVIDIA are the NVIDIA library distributions of the environment, the
// ones `pip uninstall -y nvidia-*` removes (cuda-toolkit stays; nvidia-ml-py
// is a Python binding and goes too, as the pattern says).
func NVIDIA() []string {
	return []string{"nvidia-cublas", "nvidia-cuda-cupti", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cudnn-cu13",
		"nvidia-cufft", "nvidia-cufile", "nvidia-curand", "nvidia-cusolver", "nvidia-cusparse", "nvidia-cusparselt-cu13",
		"nvidia-ml-py", "nvidia-nccl-cu13", "nvidia-nvjitlink", "nvidia-nvshmem-cu13", "nvidia-nvtx"}
}

// LinkSymbol writes again two of the environment's recorded ELF files
// (paths relative to site) with the symbols the corpus does not record:
// definer defines symbol, user refers to it; each keeps its recorded
// soname, NEEDED entries, RPATH and RUNPATH. user need not need definer:
// libtorch_nvshmem.so binds symbols of libc10_cuda.so, which torch loads
// first.
func LinkSymbol(t testing.TB, site, definer, user, symbol string) {
	t.Helper()
	recs, err := torchtree.LoadFile(torchtree.Corpus(t))
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, r := range recs {
		var spec elfwrite.Linked
		switch r.Path {
		case definer:
			spec.Defs = []elfwrite.Def{{Name: symbol, Type: elf.STT_FUNC}}
		case user:
			spec.Refs = []elfwrite.Ref{{Name: symbol}}
		default:
			continue
		}
		spec.Soname, spec.Needed, spec.RPath, spec.RunPath, spec.GNUHash = r.Soname, r.Needed, r.RPath, r.RunPath, true
		if err := elfwrite.WriteLinked(filepath.Join(site, filepath.FromSlash(r.Path)), spec); err != nil {
			t.Fatal(err)
		}
		done++
	}
	if done != 2 {
		t.Fatalf("the corpus records %d of %s and %s", done, definer, user)
	}
}
