package registry

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/mirror"
	"github.com/cudadeps/cudadeps/fleet/plan"
	"github.com/cudadeps/cudadeps/internal/urlpolicy"
	"github.com/cudadeps/cudadeps/internal/workers"
)

// PushOptions say where Push finds what the registry lacks.
type PushOptions struct {
	// Catalog says where each archive lies in NVIDIA's layout, and gives
	// the catalog layer pushed beside the plan. Its mirror, when set, is
	// where archives are downloaded from first.
	Catalog *catalog.Catalog
	// Client downloads, verified, the files the registry lacks.
	Client *fetch.Client
	// Parallel bounds the uploads at once. Default 4.
	Parallel int
}

// Pushed says what Push did.
type Pushed struct {
	// Reference is the tag pushed to; Index its image index.
	Reference string     `json:"reference"`
	Index     Descriptor `json:"index"`
	// Manifest is the artifact of the plan's platform and target.
	Manifest Descriptor `json:"manifest"`
	Platform string     `json:"platform"`
	Target   Target     `json:"target"`
	// Platforms are every platform and target the index serves now.
	Platforms []Entry `json:"platforms"`
	// Files are the archives and wheels, Blobs the plan, the catalog
	// layer and the contents.
	Files []PushedFile `json:"files"`
	Blobs []PushedFile `json:"blobs"`
	// Uploaded is the bytes sent.
	Uploaded int64 `json:"bytes_uploaded"`
}

// Descriptor names a blob or manifest: its digest and size.
type Descriptor struct {
	MediaType string `json:"media_type"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// Entry is one manifest of an index: the platform and target it serves.
type Entry struct {
	Platform  string `json:"platform"`
	CUDAMajor int    `json:"cuda_major"`
	Target    string `json:"target"`
	Digest    string `json:"digest"`
}

// PushedFile is one blob and whether this push sent it.
type PushedFile struct {
	File
	// Uploaded is false when the registry had it already.
	Uploaded bool `json:"uploaded"`
	// From is where it was downloaded from to be sent ("" when it was in
	// the download cache or not sent).
	From string `json:"from,omitempty"`
}

// Push sends plan p to the registry under the Remote's tag: every archive
// and wheel the plan takes as the blob of its own sha256 (sent only when
// the registry lacks it), the plan, the catalog layer of its archives and
// the contents, under one manifest for the plan's platform and target,
// which the tag's image index then lists beside the manifests of other
// platforms and targets pushed there before.
func (r *Remote) Push(ctx context.Context, p *plan.Plan, opts PushOptions) (*Pushed, error) {
	if r.ref.Tag == "" {
		return nil, fmt.Errorf("%s: a push needs a tag: oci://HOST/REPOSITORY:TAG", r.ref)
	}
	if opts.Catalog == nil || opts.Client == nil {
		return nil, errors.New("push needs a catalog and a download client")
	}
	if len(p.Steps()) == 0 || p.Platform == "" {
		return nil, fmt.Errorf("%s: the plan takes no archive: nothing to push", p.File)
	}
	oplat, err := ociPlatform(p.Platform)
	if err != nil {
		return nil, err
	}
	if len(p.Raw) > maxSmall {
		return nil, fmt.Errorf("%s: the plan takes %d bytes, more than the %d a registry's artifact carries", p.File, len(p.Raw), maxSmall)
	}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	contents, ids, sources, err := pushContents(p, opts.Catalog)
	if err != nil {
		return nil, err
	}
	res := &Pushed{Reference: r.ref.String(), Platform: p.Platform, Target: contents.Target}
	for _, f := range contents.Files {
		res.Files = append(res.Files, PushedFile{File: f})
	}
	if err := r.pushFiles(ctx, res.Files, sources, opts); err != nil {
		return nil, err
	}
	small, err := smallBlobs(contents, p, ids, opts.Catalog)
	if err != nil {
		return nil, err
	}
	ann := annotations(p)
	mdesc, err := r.pushManifest(ctx, ann, small, res)
	if err != nil {
		return nil, err
	}
	res.Manifest = Descriptor{MediaType: mdesc.MediaType, Digest: mdesc.Digest.String(), Size: mdesc.Size}
	entry := mdesc
	entry.ArtifactType = ArtifactType
	entry.Platform = oplat
	entry.Annotations = map[string]string{
		AnnotationTarget:    ann[AnnotationTarget],
		AnnotationPlatform:  p.Platform,
		AnnotationCUDAMajor: ann[AnnotationCUDAMajor],
	}
	if res.Index, res.Platforms, err = r.tagIndex(ctx, entry); err != nil {
		return nil, err
	}
	return res, nil
}

// pushContents describes the files plan p takes, each at its path in a
// mirror, with the archives' IDs in cat and the URLs each file (by sha256)
// is downloaded from: the mirror in force first (a mirror of a mirror),
// then where the plan says.
func pushContents(p *plan.Plan, cat *catalog.Catalog) (Contents, []catalog.ArchiveID, map[string][]string, error) {
	contents := Contents{Schema: ContentsSchema, Target: targetOf(p), Platform: p.Platform, CUDAMajor: p.CUDAMajor, Files: []File{}}
	var ids []catalog.ArchiveID
	sources := map[string][]string{}
	for _, s := range p.Steps() {
		if s.Wheel() {
			contents.Files = append(contents.Files, fileOf(s, mirror.WheelPath(s)))
			sources[s.SHA256] = []string{s.URL}
			continue
		}
		_, _, a, err := cat.Find(s.ArchiveID())
		if err != nil {
			return Contents{}, nil, nil, err
		}
		if !localPath(a.RelativePath) {
			return Contents{}, nil, nil, fmt.Errorf("%s: relative path %q leaves the mirror", s, a.RelativePath)
		}
		ids = append(ids, s.ArchiveID())
		contents.Files = append(contents.Files, fileOf(s, a.RelativePath))
		var from []string
		if m := cat.Mirror(); m != "" && m+a.RelativePath != s.URL {
			from = append(from, m+a.RelativePath)
		}
		sources[s.SHA256] = append(from, s.URL)
	}
	return contents, ids, sources, nil
}

// smallBlob is a blob of a manifest read whole: the contents, the plan,
// the catalog layer.
type smallBlob struct {
	mediaType, title string
	data             []byte
}

// smallBlobs are the contents (the config, first), the plan and, when the
// plan takes archives, the catalog layer of archives ids.
func smallBlobs(contents Contents, p *plan.Plan, ids []catalog.ArchiveID, cat *catalog.Catalog) ([]smallBlob, error) {
	cfg, err := json.MarshalIndent(contents, "", "  ")
	if err != nil {
		return nil, err
	}
	small := []smallBlob{
		{MediaTypeContents, "", cfg},
		{MediaTypePlan, "plan.json", p.Raw},
	}
	if len(ids) > 0 {
		ex, err := cat.Excerpt(ids)
		if err != nil {
			return nil, err
		}
		layer, err := ex.Encode("The catalog entries of the archives of a plan pushed by cudadeps mirror --to.")
		if err != nil {
			return nil, err
		}
		small = append(small, smallBlob{MediaTypeCatalog, "catalog.yaml", layer})
	}
	return small, nil
}

// pushManifest sends the small blobs the registry lacks and then the
// manifest (annotated with ann) of them and of res.Files, the files
// already sent; it adds to res the blobs and the bytes sent.
func (r *Remote) pushManifest(ctx context.Context, ann map[string]string, small []smallBlob, res *Pushed) (ocispec.Descriptor, error) {
	manifest := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactType,
		Annotations:  ann,
	}
	for i, b := range small {
		d := content.NewDescriptorFromBytes(b.mediaType, b.data)
		sent, err := r.pushBytes(ctx, d, b.data)
		if err != nil {
			return ocispec.Descriptor{}, err
		}
		if sent {
			res.Uploaded += d.Size
		}
		res.Blobs = append(res.Blobs, PushedFile{File: File{Kind: b.mediaType, Name: b.title, Digest: d.Digest.String(), Size: d.Size}, Uploaded: sent})
		if b.title != "" {
			d.Annotations = map[string]string{ocispec.AnnotationTitle: b.title}
		}
		if i == 0 {
			manifest.Config = d
		} else {
			manifest.Layers = append(manifest.Layers, d)
		}
	}
	for _, f := range res.Files {
		manifest.Layers = append(manifest.Layers, f.descriptor())
		if f.Uploaded {
			res.Uploaded += f.Size
		}
	}
	mdata, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	mdesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, mdata)
	if _, err := r.pushBytes(ctx, mdesc, mdata); err != nil {
		return ocispec.Descriptor{}, err
	}
	return mdesc, nil
}

// pushFiles sends the files the registry lacks, several at once, each
// downloaded first (verified, through the cache) from its sources.
func (r *Remote) pushFiles(ctx context.Context, files []PushedFile, sources map[string][]string, opts PushOptions) error {
	parallel := opts.Parallel
	if parallel <= 0 {
		parallel = 4
	}
	errs := make([]error, len(files))
	workers.Each(len(files), parallel, func(i int) {
		if errs[i] = ctx.Err(); errs[i] != nil {
			return
		}
		errs[i] = r.pushFile(ctx, &files[i], sources[files[i].Digest[len("sha256:"):]], opts.Client)
	})
	return errors.Join(errs...)
}

func (r *Remote) pushFile(ctx context.Context, f *PushedFile, from []string, client *fetch.Client) error {
	d := f.descriptor()
	has, err := r.repo.Exists(ctx, d)
	if err != nil {
		return r.explain(err)
	}
	if has {
		r.log.Info("in the registry already", "file", f.Name, "digest", f.Digest)
		return nil
	}
	var errs []error
	local := ""
	for _, u := range from {
		p, err := client.Download(ctx, fetch.Request{Name: f.Name, URL: u, SHA256: f.Digest[len("sha256:"):], Size: f.Size})
		if err == nil {
			local, f.From = p, urlpolicy.Redact(u)
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		errs = append(errs, err)
	}
	if local == "" {
		return fmt.Errorf("%s: %w", f.Name, errors.Join(errs...))
	}
	in, err := os.Open(local)
	if err != nil {
		return err
	}
	defer in.Close()
	r.log.Info("uploading", "file", f.Name, "digest", f.Digest, "size", f.Size)
	// The registry checks the digest of what it receives; it was checked
	// here on the way into the cache.
	if err := r.repo.Push(ctx, d, in); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return fmt.Errorf("%s: upload %s: %w", r.ref, f.Name, r.explain(err))
	}
	f.Uploaded = true
	return nil
}

// pushBytes sends a small blob or a manifest unless the registry has it,
// and says whether it sent it.
func (r *Remote) pushBytes(ctx context.Context, d ocispec.Descriptor, data []byte) (bool, error) {
	has, err := r.repo.Exists(ctx, d)
	if err != nil {
		return false, r.explain(err)
	}
	if has {
		return false, nil
	}
	if err := r.repo.Push(ctx, d, bytes.NewReader(data)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return false, r.explain(err)
	}
	return true, nil
}

// tagIndex points the tag at an image index that lists entry beside the
// entries for other platforms and targets it listed before (an entry of
// the same platform and target is replaced). Two pushes to one tag at
// once could each miss the other's entry: the tag is read back, and the
// merge done again when the entry is not there.
func (r *Remote) tagIndex(ctx context.Context, entry ocispec.Descriptor) (Descriptor, []Entry, error) {
	for attempt := 0; ; attempt++ {
		old, err := r.readIndex(ctx, r.ref.Tag)
		if err != nil {
			return Descriptor{}, nil, err
		}
		manifests := slices.DeleteFunc(slices.Clone(old.Manifests), func(d ocispec.Descriptor) bool {
			return d.Annotations[AnnotationPlatform] == entry.Annotations[AnnotationPlatform] &&
				d.Annotations[AnnotationTarget] == entry.Annotations[AnnotationTarget]
		})
		manifests = append(manifests, entry)
		slices.SortFunc(manifests, func(a, b ocispec.Descriptor) int {
			if c := cmp.Compare(a.Annotations[AnnotationPlatform], b.Annotations[AnnotationPlatform]); c != 0 {
				return c
			}
			return cmp.Compare(a.Annotations[AnnotationTarget], b.Annotations[AnnotationTarget])
		})
		index := ocispec.Index{
			Versioned:    specs.Versioned{SchemaVersion: 2},
			MediaType:    ocispec.MediaTypeImageIndex,
			ArtifactType: ArtifactType,
			Manifests:    manifests,
		}
		data, err := json.MarshalIndent(index, "", "  ")
		if err != nil {
			return Descriptor{}, nil, err
		}
		d := content.NewDescriptorFromBytes(ocispec.MediaTypeImageIndex, data)
		if err := r.repo.PushReference(ctx, d, bytes.NewReader(data), r.ref.Tag); err != nil {
			return Descriptor{}, nil, r.explain(err)
		}
		now, err := r.readIndex(ctx, r.ref.Tag)
		if err != nil {
			return Descriptor{}, nil, err
		}
		if slices.ContainsFunc(now.Manifests, func(m ocispec.Descriptor) bool { return m.Digest == entry.Digest }) {
			return Descriptor{MediaType: d.MediaType, Digest: d.Digest.String(), Size: d.Size}, entriesOf(now), nil
		}
		if attempt == 4 {
			return Descriptor{}, nil, fmt.Errorf("%s: another push replaced the tag five times in a row: push again", r.ref)
		}
	}
}

// readIndex reads the index a tag points at: empty when the tag does not
// exist; an error when it holds something other than an index of ours.
func (r *Remote) readIndex(ctx context.Context, tag string) (ocispec.Index, error) {
	desc, data, err := r.fetchManifest(ctx, tag)
	if errors.Is(err, errdef.ErrNotFound) {
		return ocispec.Index{}, nil
	}
	if err != nil {
		return ocispec.Index{}, err
	}
	if desc.MediaType != ocispec.MediaTypeImageIndex {
		return ocispec.Index{}, fmt.Errorf("%s holds a %s, not the image index cudadeps pushes: choose another tag", r.ref, desc.MediaType)
	}
	var index ocispec.Index
	if err := json.Unmarshal(data, &index); err != nil {
		return ocispec.Index{}, fmt.Errorf("%s: the image index does not parse: %w", r.ref, err)
	}
	if index.ArtifactType != ArtifactType {
		return ocispec.Index{}, fmt.Errorf("%s holds an image index of artifact type %q, not %s: choose another tag", r.ref, index.ArtifactType, ArtifactType)
	}
	return index, nil
}

// fetchManifest reads the manifest or index reference names (a tag or a
// digest), bounded and verified by its digest.
func (r *Remote) fetchManifest(ctx context.Context, reference string) (ocispec.Descriptor, []byte, error) {
	desc, rc, err := r.repo.FetchReference(ctx, reference)
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return desc, nil, err
		}
		return desc, nil, r.explain(err)
	}
	defer rc.Close()
	// desc is the registry's answer (its Content-Length): bounded before
	// anything is read.
	if err := r.checkSmall(desc, reference); err != nil {
		return desc, nil, err
	}
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return desc, nil, fmt.Errorf("%s: read %s: %w", r.ref, reference, err)
	}
	return desc, data, nil
}

func entriesOf(index ocispec.Index) []Entry {
	var out []Entry
	for _, m := range index.Manifests {
		e := Entry{Platform: m.Annotations[AnnotationPlatform], Target: m.Annotations[AnnotationTarget], Digest: m.Digest.String()}
		fmt.Sscan(m.Annotations[AnnotationCUDAMajor], &e.CUDAMajor)
		out = append(out, e)
	}
	return out
}

func digestOf(s string) digest.Digest { return digest.Digest(s) }
