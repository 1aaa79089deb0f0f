package registry

import (
	"debug/elf"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/cudadeps/cudadeps/fleet/plan"
	"github.com/cudadeps/cudadeps/platform"
)

// The media types of what Push writes. The artifact type marks the index
// and each manifest; the config is the contents; the layers are the plan,
// the catalog layer, and the files.
const (
	ArtifactType      = "application/vnd.cudadeps.plan.v1"
	MediaTypeContents = "application/vnd.cudadeps.contents.v1+json"
	MediaTypePlan     = "application/vnd.cudadeps.plan.v1+json"
	MediaTypeCatalog  = "application/vnd.cudadeps.catalog.v1+yaml"
	MediaTypeArchive  = "application/vnd.cudadeps.archive.v1"
	MediaTypeWheel    = "application/vnd.cudadeps.wheel.v1"
)

// The annotations of each manifest (and of its entry in the index).
const (
	annotationPrefix = "io.github.cudadeps."
	// AnnotationTarget is the plan's target: a distribution's name, or a
	// path as the planning machine named it.
	AnnotationTarget = annotationPrefix + "target"
	// AnnotationTargetKind is the target's kind: python, dir, file.
	AnnotationTargetKind = annotationPrefix + "target.kind"
	// AnnotationTargetVersion is a Python target's version.
	AnnotationTargetVersion = annotationPrefix + "target.version"
	// AnnotationPlatform is NVIDIA's platform name: linux-x86_64,
	// linux-sbsa, linux-aarch64 (the OCI platform cannot tell the last two
	// apart).
	AnnotationPlatform = annotationPrefix + "platform"
	// AnnotationCUDAMajor is the CUDA major the plan's archives are for.
	AnnotationCUDAMajor = annotationPrefix + "cuda-major"
	// AnnotationVersions lists what the plan takes: "libcudss 0.8.0.10,
	// nvidia-cudnn-cu13 9.19.0.56".
	AnnotationVersions = annotationPrefix + "versions"
)

// ContentsSchema versions Contents.
const ContentsSchema = "cudadeps.contents/v1"

// Contents is a manifest's config: what the artifact holds, for people
// (oras manifest fetch-config) and for the pull, which lays the files out
// where a directory mirror keeps them.
type Contents struct {
	Schema    string `json:"schema"`
	Target    Target `json:"target"`
	Platform  string `json:"platform"`
	CUDAMajor int    `json:"cuda_major"`
	Files     []File `json:"files"`
}

// Target is the plan's target.
type Target struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// File is one archive or wheel of the artifact.
type File struct {
	// Kind is "archive" (NVIDIA's) or "wheel".
	Kind string `json:"kind"`
	// Name says what it is: "libcudss 0.8.0.10 (linux-x86_64, cuda13)".
	Name string `json:"name"`
	// Path is where a directory mirror keeps it (cudadeps mirror DIR),
	// which is also its title.
	Path   string `json:"path"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// The kinds of File.
const (
	KindArchive = "archive"
	KindWheel   = "wheel"
)

// maxSmall bounds every manifest, index, config (the contents) and layer
// read whole from a registry (the plan, the catalog layer): oras-go
// v2.6.0's content.ReadAll allocates what a descriptor declares, so the
// bound is checked before reading (docs/fleet.md, "The credential guard").
// Real ones take a few hundred KiB.
const maxSmall = 16 << 20

func targetOf(p *plan.Plan) Target {
	t := Target{Kind: p.Target.Kind, Name: p.Target.Name}
	if p.Target.Dist != nil {
		t.Version = p.Target.Dist.Version
	}
	return t
}

// fileOf describes step s at path p.
func fileOf(s plan.Step, p string) File {
	kind := KindArchive
	if s.Wheel() {
		kind = KindWheel
	}
	return File{Kind: kind, Name: s.String(), Path: p, Digest: "sha256:" + s.SHA256, Size: s.Size}
}

func (f File) mediaType() string {
	if f.Kind == KindWheel {
		return MediaTypeWheel
	}
	return MediaTypeArchive
}

func (f File) descriptor() ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: f.mediaType(), Digest: digestOf(f.Digest), Size: f.Size,
		Annotations: map[string]string{ocispec.AnnotationTitle: f.Path}}
}

// annotations of the manifest for plan p.
func annotations(p *plan.Plan) map[string]string {
	t := targetOf(p)
	a := map[string]string{
		AnnotationTarget:     t.Name,
		AnnotationTargetKind: t.Kind,
		AnnotationPlatform:   p.Platform,
		AnnotationCUDAMajor:  strconv.Itoa(p.CUDAMajor),
	}
	if t.Version != "" {
		a[AnnotationTargetVersion] = t.Version
	}
	var versions []string
	for _, s := range p.Steps() {
		name := s.Component
		if s.Wheel() {
			name = s.Project
		}
		versions = append(versions, name+" "+s.Version)
	}
	a[AnnotationVersions] = strings.Join(versions, ", ")
	return a
}

// ociPlatform is the OCI platform of NVIDIA's platform name.
func ociPlatform(plat string) (*ocispec.Platform, error) {
	switch platform.Machine(plat) {
	case elf.EM_X86_64:
		return &ocispec.Platform{OS: "linux", Architecture: "amd64"}, nil
	case elf.EM_AARCH64:
		return &ocispec.Platform{OS: "linux", Architecture: "arm64"}, nil
	}
	return nil, fmt.Errorf("platform %q: not one NVIDIA publishes Linux archives for", plat)
}

// localPath reports whether p can be a path inside a mirror.
func localPath(p string) bool {
	return p != "" && !strings.Contains(p, `\`) && filepath.IsLocal(filepath.FromSlash(p)) && path.Clean(p) == p
}
