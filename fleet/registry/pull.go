package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/mirror"
	"github.com/cudadeps/cudadeps/fleet/plan"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
	"github.com/cudadeps/cudadeps/platform"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// Select says which manifest of an index a node takes.
type Select struct {
	// Platform is the platform the node needs; "" for this host's (for
	// the CUDA major of each manifest).
	Platform string
	// Target is the target the node names ("" when it names none): among
	// several manifests for its platform, the one of that target.
	Target string
}

// Artifact is one manifest of a reference, read: its plan, its catalog
// layer and the files it takes.
type Artifact struct {
	// Reference names the manifest by digest.
	Reference string `json:"reference"`
	// Index is the digest of the index it was chosen from ("" when the
	// reference named the manifest itself).
	Index    string     `json:"index,omitempty"`
	Manifest Descriptor `json:"manifest"`
	Contents Contents   `json:"contents"`
	// Plan is the plan it carries; Catalog its catalog layer (nil when the
	// plan takes wheels only).
	Plan    *plan.Plan `json:"-"`
	Catalog []byte     `json:"-"`

	files  []artifactFile
	remote *Remote
}

type artifactFile struct {
	step plan.Step
	file File
}

// Read reads the manifest the reference names, or the one of its index
// that sel chooses, with its contents, plan and catalog layer (small
// blobs, each verified by its digest), and checks that they agree: every
// step of the plan is a blob of the manifest with its sha256 and size, at
// the path the catalog layer gives (a wheel under simple/), and nothing
// else is.
func (r *Remote) Read(ctx context.Context, sel Select) (*Artifact, error) {
	reference := r.ref.Digest
	if reference == "" {
		reference = r.ref.Tag
	}
	if reference == "" {
		return nil, fmt.Errorf("%s: name a tag or a digest: oci://HOST/REPOSITORY:TAG", r.ref)
	}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	desc, data, err := r.fetchManifest(ctx, reference)
	if errors.Is(err, errdef.ErrNotFound) {
		return nil, fmt.Errorf("%s: no such tag or digest in the registry", r.ref)
	}
	if err != nil {
		return nil, err
	}
	a := &Artifact{remote: r}
	if desc.MediaType == ocispec.MediaTypeImageIndex {
		a.Index = desc.Digest.String()
		if desc, data, err = r.chooseManifest(ctx, data, sel); err != nil {
			return nil, err
		}
	}
	if desc.MediaType != ocispec.MediaTypeImageManifest {
		return nil, fmt.Errorf("%s holds a %s, not what cudadeps pushes", r.ref, desc.MediaType)
	}
	a.Manifest = Descriptor{MediaType: desc.MediaType, Digest: desc.Digest.String(), Size: desc.Size}
	a.Reference = Reference{Host: r.ref.Host, Repository: r.ref.Repository, Digest: a.Manifest.Digest}.String()
	var m ocispec.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: the manifest does not parse: %w", a.Reference, err)
	}
	if m.ArtifactType != ArtifactType || m.Config.MediaType != MediaTypeContents {
		return nil, fmt.Errorf("%s is not an artifact cudadeps pushed: artifact type %q, config %q", a.Reference, m.ArtifactType, m.Config.MediaType)
	}
	cfg, err := r.fetchSmall(ctx, m.Config)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(cfg, &a.Contents); err != nil || a.Contents.Schema != ContentsSchema {
		return nil, fmt.Errorf("%s: the contents are not %s (%v)", a.Reference, ContentsSchema, err)
	}
	blobs, err := r.readLayers(ctx, a, m.Layers)
	if err != nil {
		return nil, err
	}
	if err := a.match(blobs); err != nil {
		return nil, fmt.Errorf("%s: %w", a.Reference, err)
	}
	return a, nil
}

// chooseManifest reads the image index in data and the manifest of it
// that sel chooses, returning that manifest's descriptor and bytes.
func (r *Remote) chooseManifest(ctx context.Context, data []byte, sel Select) (ocispec.Descriptor, []byte, error) {
	var index ocispec.Index
	if err := json.Unmarshal(data, &index); err != nil {
		return ocispec.Descriptor{}, nil, fmt.Errorf("%s: the image index does not parse: %w", r.ref, err)
	}
	if index.ArtifactType != ArtifactType {
		return ocispec.Descriptor{}, nil, fmt.Errorf("%s is an image index of artifact type %q, not one cudadeps pushed (%s)", r.ref, index.ArtifactType, ArtifactType)
	}
	chosen, err := r.choose(index, sel)
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	if chosen.MediaType != ocispec.MediaTypeImageManifest {
		return ocispec.Descriptor{}, nil, fmt.Errorf("%s: the index lists a %s, not what cudadeps pushes", r.ref, chosen.MediaType)
	}
	// Read as the index describes it: its size bounded before any
	// request, then checked with its digest.
	data, err = r.fetchSmall(ctx, chosen)
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	return chosen, data, nil
}

// readLayers reads the plan and catalog layers of a manifest into a, and
// returns its archive and wheel layers.
func (r *Remote) readLayers(ctx context.Context, a *Artifact, layers []ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	var planData []byte
	var blobs []ocispec.Descriptor
	var err error
	for _, l := range layers {
		switch l.MediaType {
		case MediaTypePlan:
			if planData, err = r.fetchSmall(ctx, l); err != nil {
				return nil, err
			}
		case MediaTypeCatalog:
			if a.Catalog, err = r.fetchSmall(ctx, l); err != nil {
				return nil, err
			}
		case MediaTypeArchive, MediaTypeWheel:
			blobs = append(blobs, l)
		default:
			return nil, fmt.Errorf("%s: a layer of media type %q, which cudadeps does not push", a.Reference, l.MediaType)
		}
	}
	if planData == nil {
		return nil, fmt.Errorf("%s: no plan among the layers", a.Reference)
	}
	if a.Plan, err = plan.Parse(planData, a.Reference); err != nil {
		return nil, err
	}
	return blobs, nil
}

// choose picks the manifest of the index for sel.
func (r *Remote) choose(index ocispec.Index, sel Select) (ocispec.Descriptor, error) {
	var fit []ocispec.Descriptor
	var all []string
	want := sel.Platform
	for _, m := range index.Manifests {
		plat := m.Annotations[AnnotationPlatform]
		cuda, _ := strconv.Atoi(m.Annotations[AnnotationCUDAMajor])
		all = append(all, fmt.Sprintf("%s for %s (CUDA %d)", m.Annotations[AnnotationTarget], plat, cuda))
		if sel.Platform == "" {
			if want, _ = platform.HostPlatform(cuda); want == "" {
				continue
			}
		}
		if plat == want {
			fit = append(fit, m)
		}
	}
	if len(fit) == 0 {
		here := sel.Platform
		if here == "" {
			here = "this machine's platform"
		}
		return ocispec.Descriptor{}, fmt.Errorf("%s holds no plan for %s; it holds: %s", r.ref, here, orNone(all))
	}
	if len(fit) > 1 && sel.Target != "" {
		named := slices.DeleteFunc(slices.Clone(fit), func(m ocispec.Descriptor) bool {
			return !sameTarget(m.Annotations[AnnotationTarget], sel.Target)
		})
		if len(named) > 0 {
			fit = named
		}
	}
	if len(fit) > 1 {
		var names []string
		for _, m := range fit {
			names = append(names, m.Annotations[AnnotationTarget])
		}
		return ocispec.Descriptor{}, fmt.Errorf("%s holds plans for %s on %s: name the target (cudadeps apply %s TARGET)", r.ref, strings.Join(names, ", "), fit[0].Annotations[AnnotationPlatform], r.ref)
	}
	return fit[0], nil
}

// sameTarget compares a plan's target with one a node names: Python names
// as pip compares them, paths by their last element.
func sameTarget(planned, named string) bool {
	if pymeta.NormalizeName(planned) == pymeta.NormalizeName(named) {
		return true
	}
	return strings.ContainsRune(named, '/') && filepath.Base(filepath.Clean(named)) == filepath.Base(filepath.Clean(planned))
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "nothing"
	}
	return strings.Join(list, "; ")
}

// fetchSmall reads a manifest, an index, the contents or the plan or
// catalog layer whole, as its descriptor describes it: one that declares
// more than maxSmall is refused before anything is asked of the registry,
// and what is read must have the size and digest declared.
func (r *Remote) fetchSmall(ctx context.Context, d ocispec.Descriptor) ([]byte, error) {
	if err := r.checkSmall(d, d.Digest.String()); err != nil {
		return nil, err
	}
	data, err := content.FetchAll(ctx, r.repo, d)
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", r.ref, kindOf(d.MediaType), d.Digest, r.explain(err))
	}
	return data, nil
}

// checkSmall refuses a descriptor of what reference names that declares
// a size out of maxSmall's bound.
func (r *Remote) checkSmall(d ocispec.Descriptor, reference string) error {
	if d.Size < 0 || d.Size > maxSmall {
		return fmt.Errorf("%s: %s %s declares %d bytes, more than the %d cudadeps reads of one: refused", r.ref, kindOf(d.MediaType), reference, d.Size, maxSmall)
	}
	return nil
}

// kindOf names what a media type is, for errors.
func kindOf(mediaType string) string {
	switch mediaType {
	case ocispec.MediaTypeImageManifest:
		return "the manifest"
	case ocispec.MediaTypeImageIndex:
		return "the image index"
	}
	return "the blob of " + mediaType
}

// match pairs each step of the plan with its blob and its path.
func (a *Artifact) match(blobs []ocispec.Descriptor) error {
	var layer *catalog.Catalog
	if a.Catalog != nil {
		var err error
		if layer, err = catalog.Parse(a.Catalog, "the catalog layer"); err != nil {
			return err
		}
	}
	paths := map[string]string{}
	for _, f := range a.Contents.Files {
		paths[f.Digest] = f.Path
	}
	have := map[string]ocispec.Descriptor{}
	for _, b := range blobs {
		have[b.Digest.String()] = b
	}
	for _, s := range a.Plan.Steps() {
		d := "sha256:" + s.SHA256
		b, ok := have[d]
		if !ok {
			return fmt.Errorf("the plan takes %s (%s), which is not among the blobs", s, d)
		}
		delete(have, d)
		if b.Size != s.Size {
			return fmt.Errorf("%s: the blob takes %d bytes, the plan says %d", s, b.Size, s.Size)
		}
		want := mirror.WheelPath(s)
		if !s.Wheel() {
			if layer == nil {
				return errors.New("the plan takes archives, and the artifact has no catalog layer")
			}
			_, _, arch, err := layer.Find(s.ArchiveID())
			if err != nil {
				return fmt.Errorf("the catalog layer: %w", err)
			}
			want = arch.RelativePath
		}
		if !localPath(want) || paths[d] != want {
			return fmt.Errorf("%s: the contents place it at %q, the catalog layer at %q", s, paths[d], want)
		}
		a.files = append(a.files, artifactFile{step: s, file: fileOf(s, want)})
	}
	for d := range have {
		return fmt.Errorf("blob %s is not one of the plan's", d)
	}
	return nil
}

// PullOptions say where Pull puts what it brings.
type PullOptions struct {
	// Client downloads the blobs into its cache; it must be made with the
	// Remote's FetchOptions.
	Client *fetch.Client
	// Store, when set, spares the archives it holds (the same key and
	// sha256): the resolve that follows takes them from there.
	Store *fetch.Store
	// Dir is the directory mirror to write; default a directory of the
	// download cache named by the manifest's digest.
	Dir string
}

// Pulled says what Pull brought and wrote.
type Pulled struct {
	// Dir is the directory mirror of links to the cache, and Mirror its
	// file:// URL; Catalog is the catalog layer in it ("" when none).
	Dir     string `json:"dir"`
	Mirror  string `json:"mirror"`
	Catalog string `json:"catalog,omitempty"`
	// Files are those brought into the cache (each verified), Spared
	// those the store holds already.
	Files  []File `json:"files"`
	Spared []File `json:"spared"`
}

// Pull brings every archive and wheel of the artifact into the download
// cache (each verified by its digest, resumed where an interrupted pull
// stopped, fetched once on this machine however many processes pull it)
// and writes a directory mirror of links to them with the catalog layer,
// which apply reads as it reads any directory mirror.
func (a *Artifact) Pull(ctx context.Context, opts PullOptions) (*Pulled, error) {
	if opts.Client == nil {
		return nil, errors.New("pull needs a download client")
	}
	dir := opts.Dir
	if dir == "" {
		dir = filepath.Join(opts.Client.CacheDir(), "registry", strings.ReplaceAll(a.Manifest.Digest, ":", "-"))
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	res := &Pulled{Dir: dir, Mirror: "file://" + filepath.ToSlash(dir) + "/", Files: []File{}, Spared: []File{}}
	var reqs []fetch.Request
	var todo []artifactFile
	for _, f := range a.files {
		if opts.Store != nil && !f.step.Wheel() {
			// A wheel is read by the index client whether installed or not;
			// an installed archive is not read at all.
			if e, ok, err := opts.Store.Lookup(f.step.Key()); err == nil && ok && e.SHA256 == f.step.SHA256 {
				res.Spared = append(res.Spared, f.file)
				continue
			}
		}
		todo = append(todo, f)
		reqs = append(reqs, fetch.Request{Name: f.step.String(), URL: a.remote.mirrorURL() + f.file.Path, SHA256: f.step.SHA256, Size: f.step.Size})
	}
	paths, err := opts.Client.DownloadAll(ctx, reqs)
	if err != nil {
		return nil, err
	}
	var linked []mirror.Linked
	for i, f := range todo {
		linked = append(linked, mirror.Linked{Step: f.step, Path: f.file.Path, File: paths[i]})
		res.Files = append(res.Files, f.file)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := mirror.Assemble(dir, linked); err != nil {
		return nil, err
	}
	if a.Catalog != nil {
		res.Catalog = filepath.Join(dir, "catalog.yaml")
		if err := atomicfile.WriteFile(res.Catalog, a.Catalog, 0o644); err != nil {
			return nil, err
		}
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "plan.json"), a.Plan.Raw, 0o644); err != nil {
		return nil, err
	}
	return res, nil
}
