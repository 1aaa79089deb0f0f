// Package mirror writes the archives and wheels a plan needs, verified, into a directory laid out as NVIDIA's redist tree (with manifests) and a PEP 503 simple index, which any static HTTP server, object store or shared file system can then serve to a cluster.
//
// The layout follows what the rest of cudadeps reads from a mirror URL M:
//
//	M/<relative_path>                        each archive, as --mirror fetches it
//	M/<product>/redist/<relative_path>       the same file (a hard link), where NVIDIA
//	                                         keeps it: a catalog layer that catalog
//	                                         update --mirror M wrote fetches it there
//	M/<product>/redist/redistrib_<label>.json  its manifest, as catalog update --mirror lists it
//	M/<product>/redist/index.html            the listing catalog update reads
//	M/simple/<project>/<wheel>               each wheel, and index.html with #sha256=
//	M/simple/index.html                      the projects
package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/plan"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
	"github.com/cudadeps/cudadeps/internal/urlpolicy"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// Options configure Write.
type Options struct {
	// Dir is the mirror directory; it is created when missing.
	Dir string
	// Catalog says where each archive lies in NVIDIA's layout and what
	// its manifest holds. When its mirror is set, archives are downloaded
	// from there; otherwise from the plan's URLs.
	Catalog *catalog.Catalog
	Client  *fetch.Client
	Logger  *slog.Logger
}

// File is one archive or wheel in the mirror.
type File struct {
	Step plan.Step `json:"step"`
	// Path is where it lies, relative to the mirror directory.
	Path string `json:"path"`
	// From is the URL it was downloaded from ("" when it was there).
	From string `json:"from,omitempty"`
	// Present is set when the mirror already held it, verified.
	Present bool `json:"present"`
}

// Result says what Write put in the mirror.
type Result struct {
	Dir      string `json:"dir"`
	Archives []File `json:"archives"`
	Wheels   []File `json:"wheels"`
	// Manifests and Indexes are the files written, relative to Dir.
	Manifests []string `json:"manifests"`
	Indexes   []string `json:"indexes"`
	// Bytes is what was downloaded.
	Bytes int64 `json:"bytes_downloaded"`
}

// Write brings every step into the mirror directory, each verified by its
// size and sha256, and writes the manifests and indexes that describe
// them. A file already there is verified, not downloaded again; a file
// there that fails verification is replaced. Manifests and indexes merge
// with what earlier runs wrote.
func Write(ctx context.Context, steps []plan.Step, opts Options) (*Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Catalog == nil || opts.Client == nil {
		return nil, errors.New("mirror needs a catalog and a download client")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	res := &Result{Dir: dir, Archives: []File{}, Wheels: []File{}, Manifests: []string{}, Indexes: []string{}}
	var archives []located
	var wheels []File
	for _, s := range steps {
		if s.Wheel() {
			wheels = append(wheels, File{Step: s, Path: WheelPath(s)})
			continue
		}
		loc, err := locate(opts.Catalog, s)
		if err != nil {
			return nil, err
		}
		archives = append(archives, loc)
	}
	for _, a := range archives {
		// The mirror in force first (a mirror of a mirror), then where the
		// plan says; never the file being replaced.
		var from []string
		if m := opts.Catalog.Mirror(); m != "" && m+a.rel != a.step.URL {
			from = append(from, m+a.rel)
		}
		from = append(from, a.step.URL)
		f, n, err := bring(ctx, opts.Client, dir, File{Step: a.step, Path: a.rel}, from)
		if err != nil {
			return nil, err
		}
		if err := linkRedistPath(dir, a.comp.Product, a.rel); err != nil {
			return nil, err
		}
		log.Info("mirrored", "archive", a.step.String(), "path", f.Path, "present", f.Present)
		res.Archives = append(res.Archives, f)
		res.Bytes += n
	}
	for _, w := range wheels {
		f, n, err := bring(ctx, opts.Client, dir, w, []string{w.Step.URL})
		if err != nil {
			return nil, err
		}
		log.Info("mirrored", "wheel", w.Step.Filename, "path", f.Path, "present", f.Present)
		res.Wheels = append(res.Wheels, f)
		res.Bytes += n
	}
	if res.Manifests, err = writeManifests(dir, archives); err != nil {
		return nil, err
	}
	idx, err := writeRedistIndexes(dir, res.Manifests)
	if err != nil {
		return nil, err
	}
	res.Indexes = append(res.Indexes, idx...)
	if len(res.Wheels) > 0 {
		idx, err := writeSimpleIndex(dir, res.Wheels)
		if err != nil {
			return nil, err
		}
		res.Indexes = append(res.Indexes, idx...)
	}
	return res, nil
}

// WheelPath is where a mirror keeps a wheel, relative to its directory:
// simple/<project>/<file>, in its PEP 503 index.
func WheelPath(s plan.Step) string {
	return "simple/" + pymeta.NormalizeName(s.Project) + "/" + s.Filename
}

// linkRedistPath makes the archive at rel also reachable where NVIDIA's
// tree keeps it, under its product's redist/: a hard link (no second copy),
// else a relative symbolic link, which static servers follow.
func linkRedistPath(dir, product, rel string) error {
	src := filepath.Join(dir, filepath.FromSlash(rel))
	dst := filepath.Join(dir, product, "redist", filepath.FromSlash(rel))
	if a, errA := os.Stat(src); errA == nil {
		if b, errB := os.Stat(dst); errB == nil && os.SameFile(a, b) {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	_ = os.Remove(dst) // an older file of the same name
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	target, err := filepath.Rel(filepath.Dir(dst), src)
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	if err := os.Symlink(target, dst); err != nil {
		return fmt.Errorf("mirror: link %s: %w", dst, err)
	}
	return nil
}

// located is an archive step with the catalog's knowledge of it.
type located struct {
	step    plan.Step
	rel     string // relative path below the product's redist/
	comp    *catalog.Component
	release *catalog.Release
	archive *catalog.Archive
}

// locate finds the step's archive in the catalog: the same component,
// version, platform and CUDA variant, with the same sha256.
func locate(c *catalog.Catalog, s plan.Step) (located, error) {
	comp, r, a, err := c.Find(s.ArchiveID())
	if err != nil {
		return located{}, err
	}
	if !filepath.IsLocal(filepath.FromSlash(a.RelativePath)) {
		return located{}, fmt.Errorf("%s: relative path %q leaves the mirror", s, a.RelativePath)
	}
	return located{step: s, rel: a.RelativePath, comp: comp, release: r, archive: a}, nil
}

// bring puts f into dir from the first of the URLs from that has it,
// unless it is there, verified. It returns the bytes downloaded.
func bring(ctx context.Context, client *fetch.Client, dir string, f File, from []string) (File, int64, error) {
	dst := filepath.Join(dir, filepath.FromSlash(f.Path))
	self := (&url.URL{Scheme: "file", Path: dst}).String()
	req := fetch.Request{Name: f.Step.String(), SHA256: f.Step.SHA256, Size: f.Step.Size}
	if st, err := os.Stat(dst); err == nil && st.Mode().IsRegular() && st.Size() == f.Step.Size {
		req.URL = self
		if _, err := client.Download(ctx, req); err == nil {
			f.Present = true
			return f, 0, nil
		} else if ctx.Err() != nil {
			return f, 0, ctx.Err()
		}
	}
	var errs []error
	for _, u := range from {
		if u == self {
			continue
		}
		req.URL = u
		src, err := client.Download(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return f, 0, ctx.Err()
			}
			errs = append(errs, err)
			continue
		}
		if err := copyFile(src, dst); err != nil {
			return f, 0, fmt.Errorf("mirror %s: %w", f.Step, err)
		}
		f.From = urlpolicy.Redact(u)
		return f, f.Step.Size, nil
	}
	if len(errs) == 0 {
		return f, 0, fmt.Errorf("mirror %s: its only source is the mirror being filled: give the source with --mirror URL", f.Step)
	}
	return f, 0, fmt.Errorf("mirror %s: %w", f.Step, errors.Join(errs...))
}

// copyFile copies src to dst through a temporary file beside dst, so that
// a reader of the mirror never sees a part.
func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.WriteFrom(dst, in, 0o644)
}

// Linked is a file already verified on this machine, shown in a mirror at
// Path.
type Linked struct {
	Step plan.Step
	// Path is where the mirror shows it, relative to its directory, as
	// Write lays it out.
	Path string
	// File is the verified file (absolute).
	File string
}

// Assemble writes into dir a mirror of files already verified on this
// machine (a registry's blobs in the download cache): each a symbolic link
// to its file rather than a copy, the wheels listed in the simple index. It
// writes no manifests: a catalog layer says what the archives are.
func Assemble(dir string, files []Linked) error {
	var wheels []File
	for _, f := range files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			return fmt.Errorf("mirror: %s: path %q leaves the mirror", f.Step, f.Path)
		}
		if !filepath.IsAbs(f.File) {
			return fmt.Errorf("mirror: %s: %q is not an absolute path", f.Step, f.File)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("mirror: %w", err)
		}
		if err := atomicfile.Symlink(f.File, dst); err != nil {
			return fmt.Errorf("mirror: %w", err)
		}
		if f.Step.Wheel() {
			wheels = append(wheels, File{Step: f.Step, Path: f.Path})
		}
	}
	if len(wheels) > 0 {
		if _, err := writeSimpleIndex(dir, wheels); err != nil {
			return err
		}
	}
	return nil
}
