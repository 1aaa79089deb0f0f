// Package plan reads a plan that resolve wrote on one machine (resolve --json) and applies it on another that matches what it depends on, taking exactly its archives.
package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/resolver"
)

// Schema is the schema of the documents a plan is read from: the JSON of
// `cudadeps resolve --json`, with or without --dry-run.
const Schema = "cudadeps.resolve/v1"

// MaxFileSize bounds a plan file; real ones are a few hundred KiB.
const MaxFileSize = 64 << 20

// Plan is what a resolve on one machine found and chose. Only the fields
// another machine is checked against, and the steps, are read; the rest
// of the document is ignored.
type Plan struct {
	Schema    string  `json:"schema"`
	Target    Target  `json:"target"`
	Platform  string  `json:"platform"`
	CUDAMajor int     `json:"cuda_major"`
	DryRun    bool    `json:"dry_run"`
	Rounds    []Round `json:"rounds"`
	// Host is the machine the plan was made on; plans written before it
	// was recorded have none.
	Host *Host `json:"host"`
	// File is where the plan was read from, for messages.
	File string `json:"-"`
	// Raw is the document the plan was read from, as it was.
	Raw []byte `json:"-"`
}

// Target is the plan's target as resolve names it.
type Target struct {
	Kind   string  `json:"kind"`
	Name   string  `json:"name"`
	Path   string  `json:"path"`
	Dist   *Dist   `json:"dist"`
	Python *Python `json:"python"`
}

// Dist is an installed distribution: name and version.
type Dist struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Python is the interpreter of a Python target.
type Python struct {
	Version string `json:"version"`
	Machine string `json:"machine"`
}

// Round is one round of the resolve.
type Round struct {
	N       int        `json:"round"`
	Missing []Need     `json:"missing"`
	Plan    *RoundPlan `json:"plan"`
}

// Need is a missing library; Owner is set when a required distribution's
// RECORD places it.
type Need struct {
	Soname string `json:"soname"`
	Owner  *Owner `json:"owner"`
}

// Owner is the distribution, at its version, that owns a library.
type Owner struct {
	Dist    string `json:"distribution"`
	Version string `json:"version"`
}

// RoundPlan is the archives one round takes.
type RoundPlan struct {
	Platform  string `json:"platform"`
	CUDAMajor int    `json:"cuda_major"`
	Steps     []Step `json:"steps"`
}

// Step is one archive or wheel of a plan. Source, Project, Filename and
// Index are set for wheels; an archive's Source is resolver.SourceNVIDIA,
// or "" in plans made before wheels were a source.
type Step struct {
	Source      resolver.Source `json:"source,omitempty"`
	Component   string          `json:"component,omitempty"`
	Product     string          `json:"product,omitempty"`
	Project     string          `json:"project,omitempty"`
	Filename    string          `json:"filename,omitempty"`
	Index       string          `json:"index,omitempty"`
	Version     string          `json:"version"`
	Platform    string          `json:"platform,omitempty"`
	CUDAVariant string          `json:"cuda_variant,omitempty"`
	URL         string          `json:"url"`
	SHA256      string          `json:"sha256"`
	Size        int64           `json:"size"`
	Provides    []string        `json:"provides,omitempty"`
}

// Wheel reports whether the step is a wheel from a package index.
func (s Step) Wheel() bool { return s.Source == resolver.SourcePyPI }

// String names the step for messages: "libcudss 0.8.0.10 (linux-x86_64,
// cuda13)" or "nvidia-cudnn-cu13 9.19.0.56 (nvidia_cudnn_cu13-...whl)".
func (s Step) String() string {
	if s.Wheel() {
		return fmt.Sprintf("%s %s (%s)", s.Project, s.Version, s.Filename)
	}
	out := s.Component + " " + s.Version + " (" + s.Platform
	if s.CUDAVariant != "" {
		out += ", " + s.CUDAVariant
	}
	return out + ")"
}

// Key is the store key of the step's archive, as the resolver names it.
func (s Step) Key() fetch.Key {
	rs := resolver.Step{Source: s.Source, Filename: s.Filename, Component: s.Component, Version: s.Version, Platform: s.Platform, CUDAVariant: s.CUDAVariant}
	return rs.Key()
}

// ArchiveID names the step's archive in a catalog (an NVIDIA archive's
// step; a wheel's names nothing there).
func (s Step) ArchiveID() catalog.ArchiveID {
	return catalog.ArchiveID{Component: s.Component, Version: s.Version, Platform: s.Platform, CUDAVariant: s.CUDAVariant, SHA256: s.SHA256}
}

var (
	sha256RE    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	segmentChar = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)
)

// isSegment reports a name that may become one path segment: at most 200
// characters (a bound apart from the pattern: "{0,199}" in it compiled to
// two hundred states at every start of the program).
func isSegment(s string) bool { return len(s) <= 200 && segmentChar.MatchString(s) }

// Read reads and checks a plan file ("-" for r).
func Read(path string, stdin io.Reader) (*Plan, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, MaxFileSize+1))
		if err == nil && len(data) > MaxFileSize {
			err = regfile.ErrTooLarge
		}
	} else {
		data, err = regfile.Read(path, MaxFileSize)
	}
	switch {
	case errors.Is(err, regfile.ErrTooLarge):
		return nil, fmt.Errorf("%s: more than %d bytes: not a plan", path, MaxFileSize)
	case err != nil:
		return nil, fmt.Errorf("read plan: %w", err)
	}
	return Parse(data, path)
}

// Parse reads a plan from its JSON; name labels messages.
func Parse(data []byte, name string) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: not a plan (the JSON of cudadeps resolve --dry-run --json): %w", name, err)
	}
	p.File, p.Raw = name, data
	if p.Schema != Schema {
		return nil, fmt.Errorf("%s: schema %q is not a plan's (%s): make one with cudadeps resolve TARGET --dry-run --json", name, p.Schema, Schema)
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &p, nil
}

func (p *Plan) check() error {
	if p.Platform != "" && !isSegment(p.Platform) {
		return fmt.Errorf("platform %q is not a platform name", p.Platform)
	}
	for _, r := range p.Rounds {
		if r.Plan == nil {
			continue
		}
		for i, s := range r.Plan.Steps {
			where := fmt.Sprintf("round %d, step %d", r.N, i+1)
			if err := s.check(); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	return nil
}

func (s Step) check() error {
	if !sha256RE.MatchString(s.SHA256) {
		return fmt.Errorf("sha256 %q is not 64 lower-case hex digits", s.SHA256)
	}
	if s.Size <= 0 {
		return fmt.Errorf("size %d is not a positive number of bytes", s.Size)
	}
	if s.URL == "" {
		return errors.New("no url")
	}
	if !isSegment(s.Version) {
		return fmt.Errorf("version %q is not a version", s.Version)
	}
	switch s.Source {
	case "", resolver.SourceNVIDIA:
		for _, f := range []struct{ name, v string }{{"component", s.Component}, {"platform", s.Platform}} {
			if !isSegment(f.v) {
				return fmt.Errorf("%s %q is not a name", f.name, f.v)
			}
		}
		if s.CUDAVariant != "" && !isSegment(s.CUDAVariant) {
			return fmt.Errorf("cuda_variant %q is not a variant", s.CUDAVariant)
		}
	case resolver.SourcePyPI:
		if !isSegment(s.Project) {
			return fmt.Errorf("project %q is not a project name", s.Project)
		}
		if !isSegment(s.Filename) || !strings.HasSuffix(s.Filename, ".whl") {
			return fmt.Errorf("filename %q is not a wheel's file name", s.Filename)
		}
	default:
		return fmt.Errorf("source %q is neither %s nor %s", s.Source, resolver.SourceNVIDIA, resolver.SourcePyPI)
	}
	return nil
}

// Steps are the archives and wheels of every round, each once, in order.
func (p *Plan) Steps() []Step {
	var out []Step
	seen := map[string]bool{}
	for _, r := range p.Rounds {
		if r.Plan == nil {
			continue
		}
		for _, s := range r.Plan.Steps {
			if !seen[s.SHA256] {
				seen[s.SHA256] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// Owners are the required distributions, with their versions, that the
// plan found owning a missing library.
func (p *Plan) Owners() []Owner {
	var out []Owner
	seen := map[string]bool{}
	for _, r := range p.Rounds {
		for _, n := range r.Missing {
			if n.Owner != nil && n.Owner.Dist != "" && !seen[n.Owner.Dist] {
				seen[n.Owner.Dist] = true
				out = append(out, *n.Owner)
			}
		}
	}
	return out
}

// Document is resolve's JSON document with the machine it ran on (Host),
// which a plan is checked against elsewhere.
type Document struct {
	*resolver.Outcome
	Host Host `json:"host"`
}

// NewDocument adds to out the description of the system under root (""
// for this one) for its platform, with the kind of host the resolve found.
func NewDocument(ctx context.Context, out *resolver.Outcome, root string) Document {
	h := HostOf(ctx, root, out.Platform)
	if k := out.Host; k != nil {
		h.Kind, h.Name, h.L4T, h.Evidence = k.Kind, k.Name, k.L4T, k.Evidence
	}
	return Document{Outcome: out, Host: h}
}

// FromOutcome is the plan of a resolve made in this process.
func FromOutcome(doc Document, name string) (*Plan, error) {
	data, err := json.Marshal(struct {
		Schema string `json:"schema"`
		Document
	}{Schema, doc})
	if err != nil {
		return nil, err
	}
	return Parse(data, name)
}
