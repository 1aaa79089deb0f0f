package resolver

import (
	"context"
	"fmt"
	"path"
	"slices"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/python/declared"
	"github.com/cudadeps/cudadeps/python/pymeta"
	"github.com/cudadeps/cudadeps/python/pypi"
)

// declare reads the target's declared NVIDIA closure as the environment is
// now: the libraries the last scan met (s.met: needed, found or not, and
// opened at run time) decide which of the package's extras count. Only Python targets
// declare anything; for others it is nil.
func (s *session) declare() (*declared.Closure, error) {
	t := s.t
	if t.Kind != KindPython || t.Dist == nil {
		return nil, nil
	}
	dists, err := catalog.EmbeddedDistributions()
	if err != nil {
		return nil, err
	}
	recs, err := catalog.EmbeddedWheelRecords()
	if err != nil {
		return nil, err
	}
	met := s.met
	in := declared.Input{
		Env: t.Python, Target: t.Dist, Distributions: dists, Records: recs,
		Needs:           func(soname string) bool { return met[soname] },
		ArchiveVersions: s.archiveVersions(dists),
		Supplied:        s.supplied(),
		Placed:          s.placedPaths(),
		CUDAMajor:       s.out.CUDAMajor,
	}
	if s.wheels != nil {
		in.Index = &indexAnswers{s: s}
	}
	cl, err := declared.Compute(s.ctx, in)
	if err != nil {
		return nil, fmt.Errorf("read what %s declares: %w", t.Dist.Name, err)
	}
	return cl, nil
}

// metSonames are the file names of every library the scan met: loaded,
// missing, or opened at run time.
func metSonames(rep *scan.Report) map[string]bool {
	out := map[string]bool{}
	for _, r := range rep.Roots {
		if r.Result == nil {
			continue
		}
		for _, o := range r.Result.Objects {
			out[path.Base(o.Name)] = true
			for _, n := range r.Result.Names(o) {
				out[path.Base(n)] = true
			}
		}
		for _, m := range r.Result.Missing {
			out[m.Name] = true
		}
		for _, ro := range r.RuntimeOpens {
			out[ro.Soname] = true
		}
	}
	return out
}

// archiveVersions lists, for a distribution, the versions of its component
// that the catalog has archives of for this platform, in the wheel's
// numbering where the table says how (a prefix rule keeps the component's
// full version: a requirement on the wheel's shortened one still admits it).
func (s *session) archiveVersions(dists *catalog.Distributions) func(string) []string {
	return func(name string) []string {
		d, ok := dists.Lookup(name)
		if !ok {
			return nil
		}
		var out []string
		for _, comp := range d.Components {
			c, ok := s.opts.Catalog.Component(comp)
			if !ok {
				continue
			}
			for _, r := range c.Releases {
				if slices.ContainsFunc(r.Archives, func(a *catalog.Archive) bool { return a.Fits(r, s.out.Platform, s.out.CUDAMajor) }) && !slices.Contains(out, r.Version) {
					out = append(out, r.Version)
				}
			}
		}
		return out
	}
}

// records are the prefix's records as this resolve found them, read once:
// the prefix is this resolve's while it runs, and what it places itself is
// in its rounds (Round.Placed) and its change's record. nil without a
// prefix, or when they cannot be read (said once).
func (s *session) records() []*activation.Record {
	if s.opts.Prefix == nil {
		return nil
	}
	if !s.recordsRead {
		s.recordsRead = true
		recs, err := s.opts.Prefix.Records()
		if err != nil {
			s.opts.Logger.Warn("the prefix's records cannot be read", "error", err)
		}
		s.recs = recs
	}
	return s.recs
}

// supplied are the distributions this prefix's records say cudadeps
// supplied from archives.
func (s *session) supplied() []declared.Supply {
	var out []declared.Supply
	if s.change != nil {
		out = append(out, s.change.Record().Supplied...)
	}
	// Another target's supply serves this one too (what a dry run sees,
	// before its own record is opened).
	for _, r := range s.records() {
		if s.change != nil && r.Target == s.change.Record().Target {
			continue
		}
		for _, sup := range r.Supplied {
			if !slices.ContainsFunc(out, func(x declared.Supply) bool { return x.Name == sup.Name }) {
				out = append(out, sup)
			}
		}
	}
	return out
}

// indexAnswers answers the closure's questions from the package index.
type indexAnswers struct{ s *session }

func (ix *indexAnswers) Versions(ctx context.Context, name string) ([]string, error) {
	files, err := ix.s.wheels.files(ctx, name)
	if err != nil {
		return nil, err
	}
	return indexVersions(files, name, true), nil
}

func (ix *indexAnswers) Metadata(ctx context.Context, name, version string) (*pymeta.Metadata, error) {
	files, err := ix.s.wheels.files(ctx, name)
	if err != nil {
		return nil, err
	}
	f, _, err := pypi.Choose(files, name, version, ix.s.wheelHost())
	if err != nil {
		return nil, err
	}
	return ix.s.wheels.client.Metadata(ctx, f)
}
