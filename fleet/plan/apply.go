package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/platform"
	"github.com/cudadeps/cudadeps/python/pymeta"
	"github.com/cudadeps/cudadeps/python/pypi"
	"github.com/cudadeps/cudadeps/resolver"
)

// Differences names each way this machine differs from the one the plan
// was made on in what the plan depends on: the target (kind, name, the
// version of its distribution and of the required distributions the plan
// names), the machine, the glibc (older than the plan's), and the platform
// this host's archives need. t is the target found here; root is the
// system scanned ("" for this one).
func (p *Plan) Differences(ctx context.Context, t *resolver.Target, root string) []string {
	var out []string
	diff := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	if k := string(t.Kind); k != p.Target.Kind {
		diff("target: the plan's is a %s (%s), this one a %s (%s)", kindWord(p.Target.Kind), p.Target.Name, kindWord(k), t.Name)
	} else if t.Kind == resolver.KindPython {
		if pymeta.NormalizeName(t.Name) != pymeta.NormalizeName(p.Target.Name) {
			diff("target: the plan is for %s, not %s", p.Target.Name, t.Name)
		}
		if p.Target.Dist != nil && t.Dist != nil && p.Target.Dist.Version != t.Dist.Version {
			diff("%s: the plan was made with version %s, this machine has %s", t.Dist.Name, p.Target.Dist.Version, t.Dist.Version)
		}
		for _, o := range p.Owners() {
			have := "none installed"
			if t.Python != nil {
				if d, err := t.Python.Find(o.Dist); err == nil {
					if d.Version == o.Version {
						continue
					}
					have = d.Version
				}
			}
			diff("%s: the plan was made with version %s, this machine has %s", o.Dist, o.Version, have)
		}
	}
	if t.Kind == resolver.KindWheel {
		diff("target: %s is a wheel, which is only planned, never applied", t.Name)
	}
	// This host's machine, or under a root the plan's (the root's own is
	// not known without scanning it; its glibc is).
	herePlat := ""
	if root != "" {
		herePlat = p.Platform
	}
	here := HostOf(ctx, root, herePlat)
	if p.Host != nil {
		if p.Host.Machine != "" && p.Host.Machine != here.Machine {
			diff("machine: the plan was made on %s, this machine is %s", p.Host.Machine, here.Machine)
		}
		if p.Host.Glibc != "" && here.Glibc != "" && dotted.Less(here.Glibc, p.Host.Glibc) {
			diff("glibc: the plan was made on glibc %s, this machine has the older %s", p.Host.Glibc, here.Glibc)
		}
	}
	if p.Platform != "" && root == "" {
		if want, err := platform.HostPlatform(p.CUDAMajor); err == nil && want != p.Platform {
			diff("platform: the plan's archives are for %s, this machine needs %s", p.Platform, want)
		}
	}
	return out
}

func kindWord(k string) string {
	switch resolver.Kind(k) {
	case resolver.KindPython:
		return "Python distribution"
	case resolver.KindDir:
		return "directory"
	case resolver.KindFile:
		return "file"
	case resolver.KindWheel:
		return "wheel"
	}
	return k
}

// RefusedError says why a plan does not hold on this machine; Differences
// name each difference.
type RefusedError struct {
	File        string
	Differences []string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s does not hold on this machine: %s", e.File, strings.Join(e.Differences, "; "))
}

// Admit checks a round's plan, made here, against the plan: the same
// platform and CUDA major, and every archive one of the plan's, with the
// same sha256. It returns the differences.
func (p *Plan) Admit(live *resolver.Plan, round int) []string {
	var out []string
	if live.Platform != p.Platform {
		out = append(out, fmt.Sprintf("platform: the plan is for %s, round %d here is for %s", p.Platform, round, live.Platform))
	}
	if p.CUDAMajor != 0 && live.CUDAMajor != p.CUDAMajor {
		out = append(out, fmt.Sprintf("CUDA major: the plan is for CUDA %d, the package here needs CUDA %d", p.CUDAMajor, live.CUDAMajor))
	}
	bySHA := map[string]Step{}
	for _, s := range p.Steps() {
		bySHA[s.SHA256] = s
	}
	for _, s := range live.Steps {
		if _, ok := bySHA[s.SHA256]; ok {
			continue
		}
		msg := fmt.Sprintf("round %d here takes %s for %s, which the plan does not list", round, s.Key(), strings.Join(s.Provides, ", "))
		for _, ps := range p.Steps() {
			if !ps.Wheel() && ps.Component == s.Component {
				msg += fmt.Sprintf(" (the plan has %s)", ps)
				break
			}
		}
		out = append(out, msg)
	}
	return out
}

// ApplyOptions configure Apply: Resolve are the options of the resolve
// that carries the plan out, with a catalog whose mirror is set.
type ApplyOptions struct {
	Resolve resolver.Options
	// Root is the system scanned ("" for this one), as in Resolve.Loader.
	Root string
	// AllowHTTP lets the mirror's simple index be plain http beyond
	// loopback, as the mirror itself may be.
	AllowHTTP bool
}

// sources makes the resolve take what the plan took from where the mirror
// holds it: archives from the mirror, wheels from the simple index the
// mirror writes beside them (DIR/simple/). A plan of wheels only was made
// with --source pypi, one of archives only may have been made without an
// index: the same source reproduces its choices, which Admit then checks.
func (p *Plan) sources(ro *resolver.Options, allowHTTP bool) error {
	steps := p.Steps()
	wheels := 0
	for _, s := range steps {
		if s.Wheel() {
			wheels++
		}
	}
	switch {
	case wheels == 0:
		ro.Source, ro.Index = resolver.SourceNVIDIA, nil
		return nil
	case wheels == len(steps):
		ro.Source = resolver.SourcePyPI
	default:
		ro.Source = resolver.SourceAuto
	}
	index := strings.TrimSuffix(ro.Catalog.Mirror(), "/") + "/simple/"
	c, err := pypi.NewClient(pypi.Options{Indexes: []string{index}, AllowHTTP: allowHTTP, Logger: ro.Logger})
	if err != nil {
		return fmt.Errorf("the plan's wheels come from the mirror's simple index: %w", err)
	}
	ro.Index = c
	return nil
}

// Applied is what Apply did.
type Applied struct {
	Plan   string `json:"plan"`
	Mirror string `json:"mirror"`
	// Differences are why the plan does not hold here; empty when it does.
	Differences []string `json:"differences"`
	// Archives are the plan's archives this machine took (downloaded from
	// the mirror or found in the store); Unused the plan's others.
	Archives []fetch.Key `json:"archives"`
	Unused   []string    `json:"unused"`
	// Outcome is the resolve's, as resolve --json prints it.
	Outcome *resolver.Outcome `json:"resolve"`
}

// Apply carries the plan out for t: it refuses (a *RefusedError) where this
// machine differs from the plan's in what the plan depends on, then
// resolves with the plan's platform and CUDA major, admitting each round
// only when it takes the plan's archives and nothing else. Downloads come
// from the catalog's mirror, which must be set.
func (p *Plan) Apply(ctx context.Context, t *resolver.Target, opts ApplyOptions) (*Applied, error) {
	ro := opts.Resolve
	if ro.Catalog == nil || ro.Catalog.Mirror() == "" {
		return nil, errors.New("apply needs a mirror (--mirror or CUDADEPS_MIRROR) to download from")
	}
	res := &Applied{Plan: p.File, Mirror: ro.Catalog.Mirror(), Differences: []string{}, Archives: []fetch.Key{}, Unused: []string{}}
	res.Differences = append(res.Differences, p.Differences(ctx, t, opts.Root)...)
	if len(res.Differences) > 0 {
		return res, &RefusedError{File: p.File, Differences: res.Differences}
	}
	ro.Platform, ro.CUDAMajor = p.Platform, p.CUDAMajor
	if err := p.sources(&ro, opts.AllowHTTP); err != nil {
		return res, err
	}
	confirm := ro.Confirm
	round := 0
	var refused *RefusedError
	ro.Confirm = func(live *resolver.Round) (bool, error) {
		round++
		if d := p.Admit(live.Plan, round); len(d) > 0 {
			refused = &RefusedError{File: p.File, Differences: d}
			return false, refused
		}
		if confirm != nil {
			return confirm(live)
		}
		return true, nil
	}
	out, err := resolver.Resolve(ctx, t, ro)
	res.Outcome = out
	if refused != nil {
		res.Differences = refused.Differences
		return res, refused
	}
	if err != nil {
		return res, err
	}
	used := map[string]bool{}
	for _, r := range out.Rounds {
		if r.Plan == nil {
			continue
		}
		for _, s := range r.Plan.Steps {
			if !used[s.SHA256] {
				used[s.SHA256] = true
				res.Archives = append(res.Archives, s.Key())
			}
		}
	}
	for _, s := range p.Steps() {
		if !used[s.SHA256] {
			res.Unused = append(res.Unused, s.String())
		}
	}
	return res, nil
}
