package resolver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/rootfs"
	"github.com/cudadeps/cudadeps/internal/shquote"
	"github.com/cudadeps/cudadeps/internal/uniq"
	"github.com/cudadeps/cudadeps/loader/gpuarch"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/loader/runtimeopen"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/platform"
	"github.com/cudadeps/cudadeps/python/declared"
	"github.com/cudadeps/cudadeps/python/pymeta"
	"github.com/cudadeps/cudadeps/python/pypi"
)

// Options configure a resolve.
type Options struct {
	// Loader configures the loader model (root, LD_LIBRARY_PATH, preload).
	Loader ldso.Options
	// WheelMount is where wheel targets are mounted.
	WheelMount string
	Catalog    *catalog.Catalog
	// Platform and CUDAMajor override what the scan finds out.
	Platform  string
	CUDAMajor int
	// Prefix is where archives are installed and what was placed is
	// recorded; Client downloads the archives.
	Prefix *activation.Prefix
	Client *fetch.Client
	// Source says where libraries come from: SourceAuto (also ""),
	// SourceNVIDIA or SourcePyPI.
	Source Source
	// Index is the package index wheels come from; nil when none is
	// configured (SourceAuto then takes archives only, SourcePyPI refuses).
	Index *pypi.Client
	// DryRun plans one round and changes nothing.
	DryRun bool
	// Copy places copies instead of links.
	Copy bool
	// Verify imports a Python target once nothing is missing, then runs
	// the probes of the frameworks it is or requires (or Check).
	Verify bool
	// Check, when set, is a shell command run (sh -c) instead of the
	// probes, with the environment the import check has.
	Check string
	// CheckTimeout bounds the import check and each probe or check
	// (default DefaultCheckTimeout).
	CheckTimeout time.Duration
	// MaxRounds bounds the loop (default 8).
	MaxRounds int
	// Confirm is asked before anything is downloaded, with the round's
	// plan and where its libraries will be placed; nil means yes.
	Confirm func(*Round) (bool, error)
	Logger  *slog.Logger
}

// Outcome is everything a resolve found and did. Its JSON form is
// documented in docs/json.md ("resolve --json").
type Outcome struct {
	Target *Target `json:"target"`
	// Distributions are the NVIDIA distributions the target declares, with
	// the version each must come at and its state when the resolve began;
	// DistributionsAfter as the last round found them.
	Distributions      *declared.Closure `json:"distributions,omitempty"`
	DistributionsAfter *declared.Closure `json:"distributions_after,omitempty"`
	// Host is the kind of host the target is resolved for (this host, or
	// the system under --root), with its evidence. The plan document
	// (plan.NewDocument) carries it in its "host".
	Host     *platform.Host `json:"-"`
	Platform string         `json:"platform"`
	// PlatformOverride says what --platform overrode, when it differs from
	// the platform the host's evidence names.
	PlatformOverride string        `json:"platform_override,omitempty"`
	CUDAMajor        int           `json:"cuda_major"`
	DryRun           bool          `json:"dry_run"`
	Rounds           []*Round      `json:"rounds"`
	Unresolved       []Unresolved  `json:"unresolved"`
	Activation       Activation    `json:"activation"`
	Verify           *Verification `json:"verify,omitempty"`
	// Optional are libraries only optional modules or optional run-time
	// opens need: reported, never fetched, never a failure.
	Optional []OptionalLib `json:"optional"`
	// Shadowed are the libraries a required distribution owns that the
	// loader took from elsewhere when the resolve began.
	Shadowed []Shadow `json:"shadowed"`
	// Incomplete names the required distributions whose RECORD files were
	// missing when the resolve began.
	Incomplete []string `json:"incomplete_distributions"`
	// Notes say what the user should know that is no failure: a declared
	// distribution not restored because nothing loads its files, one that
	// installs no files.
	Notes []string `json:"notes"`
	// Checks are problems the loader does not stop at but the package
	// will: one import chain across two CUDA majors, one library family
	// from two places.
	Checks []string `json:"checks"`
	// Remaining are the version errors the loader would still stop at.
	VersionErrors []scan.VersionError `json:"version_errors"`
	// UndefinedSymbols are the references the last scan found unbound
	// (an import binds every one: RTLD_NOW); a Python target's scan binds
	// them, a directory's does not.
	UndefinedSymbols []scan.UndefinedSymbol `json:"undefined_symbols"`
	OK               bool                   `json:"ok"`
	// Stopped says why the loop ended.
	Stopped StopReason `json:"stopped"`
	// SeeChecks is set when everything loads and Checks still name a
	// problem the package will meet.
	SeeChecks bool `json:"see_checks,omitempty"`
	// Coverage is what the GPU code of the final scan's objects does on
	// the device; filled by the caller from FinalScan when asked for.
	Coverage *gpuarch.Report `json:"coverage,omitempty"`
	// FinalScan is the last round's scan.
	FinalScan *scan.Report `json:"-"`
}

// StopReason says why the loop ended; its JSON form is its value.
type StopReason string

// The reasons the loop ends.
const (
	StopNothingMissing StopReason = "nothing missing"
	StopImportFails    StopReason = "the import still fails"
	StopCheckFails     StopReason = "the run-time check fails"
	StopDryRun         StopReason = "dry run"
	StopNoArchive      StopReason = "no archive provides what is missing"
	StopNotConfirmed   StopReason = "not confirmed"
	// StopRoundLimit: libraries were still missing after Options.MaxRounds
	// rounds.
	StopRoundLimit StopReason = "round limit"
)

// Activation says how the loader is made to find what was installed.
type Activation struct {
	// InPlace are the directories that received links (or copies) of
	// libraries, outside the distributions installed whole.
	InPlace []string `json:"in_place"`
	// Distributions are the declared distributions restored for the
	// target ("nvidia-cublas 13.1.0.3"): installed whole from wheels, or
	// supplied from NVIDIA's archives.
	Distributions []string `json:"distributions,omitempty"`
	// Script is set when LD_LIBRARY_PATH is needed: source it. ScriptDirs
	// are its directories as the target's system names them.
	Script     string   `json:"script,omitempty"`
	ScriptDirs []string `json:"env_dirs,omitempty"`
	// ScriptInRoot is the script as the root's system names it, under
	// --root when the prefix lies in the root.
	ScriptInRoot string `json:"script_in_root,omitempty"`
	// LdConf is, under --root, the entry written in the root's
	// /etc/ld.so.conf.d (a path of this machine), and LdConfDirs the
	// directories it lists, as the root sees them: the root's own ldconfig
	// wrote them into its ld.so.cache.
	LdConf     string   `json:"ld_so_conf,omitempty"`
	LdConfDirs []string `json:"ld_so_conf_dirs,omitempty"`
	Record     string   `json:"record,omitempty"`
	// Notes say what activation could not do the way it prefers: a prefix
	// the root cannot see, a root whose ldconfig cannot run here.
	Notes []string `json:"notes,omitempty"`
}

// Round is one pass of the loop.
type Round struct {
	N         int         `json:"round"`
	Missing   []*Need     `json:"missing"`
	Shadowed  []Shadow    `json:"shadowed"`
	Plan      *Plan       `json:"plan"`
	Decisions []Decision  `json:"placements"`
	Installed []fetch.Key `json:"installed"`
	// Refused are releases downloaded and not placed: their symbols do not
	// bind against what the package needs (see checkBinding).
	Refused []Refusal           `json:"refused,omitempty"`
	Placed  []activation.Placed `json:"placed"`
	Verify  *Verification       `json:"verify,omitempty"`
}

// Resolve runs the loop for a target: each round scans, plans, installs
// and places, until nothing is missing or nothing more can be done.
func Resolve(ctx context.Context, t *Target, opts Options) (*Outcome, error) {
	s, err := newSession(ctx, t, opts)
	if err != nil {
		return nil, err
	}
	if s.change != nil {
		defer s.change.Close()
	}
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return s.out, err
		}
		done, err := s.round(n)
		if err != nil {
			return s.out, err
		}
		if done {
			break
		}
	}
	s.finish()
	return s.out, nil
}

// session is the state one resolve carries from round to round.
type session struct {
	ctx  context.Context
	t    *Target
	opts Options
	out  *Outcome
	// change is the round's changes to the prefix; nil in a dry run.
	change *activation.Change
	// handled says where each soname was placed; viaEnv marks those the
	// activation script serves.
	handled map[string]string
	viaEnv  map[string]bool
	// unbindable holds, by soname, why no release of its component binds
	// against what the package needs: a later round plans it no more.
	unbindable map[string]Unresolved
	// runtime are sonames only the import check or a probe found
	// missing; runtimeBy says which, by soname, when not the import.
	runtime   []string
	runtimeBy map[string]string
	// last is the latest round's scan, with its layout and the target's
	// declared closure as the disk was then.
	last    *scan.Report
	met     map[string]bool // metSonames(last): the sonames it loads, opens or misses
	layout  *Layout
	closure *declared.Closure
	// opens is the table of what libraries open at run time.
	opens *runtimeopen.Table
	// wheels plans wheels from the package index; nil: archives only.
	wheels *wheels
	// exact says, by distribution, that an absent declared distribution's
	// copies elsewhere are exactly the required release (the note to give);
	// accepted are those taken in its place because no source has it.
	exact    map[string]string
	accepted map[string]bool
	// recs are the prefix's records, read once (records).
	recs        []*activation.Record
	recordsRead bool
	// root is the system the target runs on (--root, or this host).
	root *rootfs.Root
}

func newSession(ctx context.Context, t *Target, opts Options) (*session, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxRounds <= 0 {
		opts.MaxRounds = 8
	}
	if opts.Catalog == nil {
		return nil, errors.New("resolve needs a catalog")
	}
	out := &Outcome{Target: t, DryRun: opts.DryRun, Rounds: []*Round{}, Unresolved: []Unresolved{}, Optional: []OptionalLib{},
		VersionErrors: []scan.VersionError{}, UndefinedSymbols: []scan.UndefinedSymbol{}, Shadowed: []Shadow{}, Incomplete: []string{}, Checks: []string{}, Notes: []string{}}
	if t.Kind == KindWheel && !opts.DryRun {
		// A wheel is not installed anywhere: there is nowhere to place
		// libraries for it. Plan only.
		opts.DryRun = true
		out.DryRun = true
	}
	opens, err := runtimeopen.Load()
	if err != nil {
		return nil, err
	}
	w, err := newWheels(opts)
	if err != nil {
		return nil, err
	}
	root, err := rootfs.Open(opts.Loader.Root)
	if err != nil {
		return nil, err
	}
	s := &session{ctx: ctx, t: t, opts: opts, out: out, handled: map[string]string{}, viaEnv: map[string]bool{}, unbindable: map[string]Unresolved{}, opens: opens, wheels: w, accepted: map[string]bool{}, root: root}
	if !opts.DryRun {
		if opts.Prefix == nil || opts.Client == nil {
			return nil, errors.New("resolve needs a prefix and a download client")
		}
		if want := opts.Prefix.Root(); (root.Dir() == "") != (want == "") || root.Dir() != "" && physical(root.Dir()) != want {
			return nil, fmt.Errorf("the prefix %s serves %s, not the root %s: open it for that root", opts.Prefix.Dir(), orHost(want), root)
		}
		change, err := opts.Prefix.Begin(ctx, t.Key(), t.Name)
		if err != nil {
			return nil, err
		}
		s.change = change
	}
	return s, nil
}

// round runs round n and reports whether the loop is over.
func (s *session) round(n int) (bool, error) {
	log := s.opts.Logger.With("round", n)
	log.Info("scan", "target", s.t.Describe())
	rep, l, err := s.scan(n)
	if err != nil {
		return true, err
	}
	s.findExact()
	needs := s.needs(rep)
	r := &Round{N: n, Missing: needs, Shadowed: s.layout.Shadows(rep), Installed: []fetch.Key{}, Placed: []activation.Placed{}}
	s.out.Rounds = append(s.out.Rounds, r)
	if n == 1 {
		s.out.Shadowed = r.Shadowed
		s.out.Incomplete = orEmpty(s.layout.Incomplete())
	}
	if len(needs) == 0 {
		return s.verifyRound(r, n)
	}
	log.Info("plan", "missing", len(needs))
	plan := s.plan(needs)
	r.Plan = plan
	if s.t.Kind != KindWheel {
		// A wheel is installed nowhere yet: there is no directory to
		// place anything in.
		r.Decisions = Decide(plan, &fsChecker{l: l, systemDirs: systemDirsOf(rep), layout: s.layout, sites: s.t.siteDirs()})
		for i, st := range plan.Steps {
			if st.Restore != nil {
				r.Decisions[i] = decideRestore(st)
			}
		}
	}
	if stop, err := s.stopBefore(r, n); stop != "" || err != nil {
		s.out.Stopped = stop
		return true, err
	}
	s.useJetPack(plan)
	log.Info("install", "archives", len(plan.Steps), "bytes", plan.Bytes())
	entries, err := s.install(r, plan)
	if err != nil {
		return true, err
	}
	if err := s.checkBinding(r, plan, entries); err != nil {
		_ = s.change.Commit()
		return true, err
	}
	s.out.Unresolved = plan.Unresolved
	log.Info("place", "decisions", len(r.Decisions))
	if err := s.place(r, entries); err != nil {
		return true, err
	}
	// What the import asked for is handled; the next import check says
	// whether it worked.
	s.runtime = nil
	return false, nil
}

// scan runs the loader model over the target as the disk is now.
func (s *session) scan(n int) (*scan.Report, *ldso.Loader, error) {
	if err := s.t.refreshSites(s.ctx); err != nil {
		return nil, nil, err
	}
	envDirs, err := s.envDirs()
	if err != nil {
		return nil, nil, err
	}
	l, err := newLoader(s.ctx, s.opts.Loader, envDirs)
	if err != nil {
		return nil, nil, err
	}
	rep, err := s.t.Scan(s.ctx, l, s.opts.WheelMount, runtimeopen.NewResolver(s.opens, l))
	// The loader's wheel mounts are done with; its path mapping (under
	// --root) still serves the placement.
	l.Close()
	if err != nil {
		return nil, nil, err
	}
	for _, e := range rep.Errors {
		s.opts.Logger.Warn("unreadable file", "path", e.Path, "error", e.Error)
	}
	s.last, s.met = rep, metSonames(rep)
	if err := s.t.refreshRequirements(); err != nil {
		return nil, nil, err
	}
	s.layout = newLayout(s.t, nil, "")
	s.layout.useCatalog(s.opts.Catalog)
	if n == 1 {
		if err := s.choosePlatform(rep); err != nil {
			return nil, nil, err
		}
	}
	cl, err := s.declare()
	if err != nil {
		return nil, nil, err
	}
	if cl != nil {
		s.closure = cl
		if n == 1 {
			s.out.Distributions = cl
		}
		s.out.DistributionsAfter = cl
		s.layout.addDeclared(cl, s.t.installSite()) // the same files as above
	}
	s.out.VersionErrors = rep.VersionErrors
	if s.change != nil {
		if err := s.change.Share(append(loadedPaths(rep), restoredPaths(cl)...)); err != nil {
			return nil, nil, err
		}
	}
	return rep, l, nil
}

// envDirs are the directories the activation script adds, for every
// target.
func (s *session) envDirs() ([]string, error) {
	if s.opts.Prefix == nil {
		return nil, nil
	}
	return s.opts.Prefix.EnvDirs()
}

// loadedPaths are the files the scan's objects were found at, each also
// through its directory resolved physically: where another target may
// have placed them.
// restoredPaths name one file of each declared distribution that cudadeps
// restored (for another target, maybe): sharing it shares the whole
// distribution, so that undoing the other target leaves it whole.
func restoredPaths(cl *declared.Closure) []string {
	if cl == nil {
		return nil
	}
	var out []string
	for _, d := range cl.Dists {
		switch {
		case d.Installed != nil && d.Installer == Installer:
			if len(d.Installed.Files) > 0 {
				out = append(out, d.Installed.Files[0])
			}
		case d.Supply != nil && len(d.Supply.Files) > 0:
			out = append(out, d.Supply.Files[0])
		}
	}
	return out
}

func loadedPaths(rep *scan.Report) []string {
	var out []string
	for _, root := range rep.Roots {
		if root.Result == nil {
			continue
		}
		for _, obj := range root.Result.Objects {
			if obj.HostPath == "" {
				continue
			}
			base := filepath.Base(obj.HostPath)
			for _, d := range []string{filepath.Dir(obj.HostPath), physical(filepath.Dir(obj.HostPath))} {
				out = uniq.Append(out, filepath.Join(d, base))
			}
		}
	}
	return out
}

// needs are this round's missing libraries: what the loader does not find,
// what the import check reported, and what a required distribution's
// RECORD lists but the disk lacks (the loader may be taking another copy).
func (s *session) needs(rep *scan.Report) []*Need {
	needs := s.withoutOptional(needsFrom(rep), rep)
	needs = append(needs, runtimeNeeds(s.runtime, s.runtimeBy, needs, rep, s.t, s.handled, s.viaEnv)...)
	for _, o := range s.layout.MissingLibraries() {
		if needFor(needs, o.Name).NeededBy != nil || s.accepted[pymeta.NormalizeName(o.Dist)] || s.unneededExtra(s.closure.Find(o.Dist)) {
			continue
		}
		if _, done := s.handled[o.Name]; done {
			continue // placed already: the scan says whether that worked
		}
		if len(s.opts.Catalog.Providers(o.Name)) == 0 {
			continue // no catalog knows it: Incomplete says it is gone
		}
		needs = append(needs, &Need{Soname: o.Name, NeededBy: []string{o.Describe()}, Restore: true})
	}
	for _, n := range needs {
		o := s.layout.Owner(n.Soname)
		if o == nil {
			continue
		}
		// Even beside an installed owner's copy (one a dlopen by name
		// misses), another copy comes at the owner's release: a newer
		// one beside the rest of its family fails at run time.
		n.Pin = s.pinFor(o)
		if !o.Present {
			n.Owner = o
		}
	}
	return needs
}

// pinFor is the version a required distribution's library must come at:
// the exact version its requirement names, else the installed one.
func (s *session) pinFor(o *OwnedLib) catalog.Pin {
	by := o.Describe()
	if p, ok := s.t.Pins[pymeta.NormalizeName(o.Dist)]; ok {
		by = p.Requirement + " (required by " + p.By + ")"
		if p.Exact != "" {
			return catalog.Pin{Version: p.Exact, By: by}
		}
	}
	return catalog.Pin{Version: o.Version, By: by}
}

// plan matches the needs against the catalog and drops what earlier rounds
// already placed to no effect.
func (s *session) plan(needs []*Need) *Plan {
	restores, refused, needs := s.planRestores(needs, s.t.installSite())
	// On a Jetson, what JetPack's CUDA provides is taken from there.
	jetpack, needs := s.fromJetPack(needs)
	var plan *Plan
	if s.wheels != nil {
		plan = s.planWithWheels(needs)
	} else {
		plan = MakePlan(needs, s.opts.Catalog, s.out.Platform, s.out.CUDAMajor)
	}
	plan.Steps = append(restores, plan.Steps...)
	plan.Unresolved = append(refused, plan.Unresolved...)
	plan.JetPack = jetpack
	if s.out.Host != nil {
		plan.Host = s.out.Host.Brief()
	}
	s.refuseWrongPlatform(plan)
	// A need that an earlier round placed and that is still missing will
	// not be fixed by doing the same again (a run-time need placed in the
	// package's directories gets one more try, by LD_LIBRARY_PATH).
	var steps []*Step
	for _, st := range plan.Steps {
		var again []string
		for _, n := range st.Provides {
			if u, ok := s.unbindable[n]; ok {
				again = append(again, n)
				plan.Unresolved = append(plan.Unresolved, u)
				continue
			}
			if where, done := s.handled[n]; done && (s.viaEnv[n] || !needFor(needs, n).Runtime) {
				again = append(again, n)
				plan.Unresolved = append(plan.Unresolved, Unresolved{Soname: n, NeededBy: needFor(needs, n).NeededBy, Kind: UnresolvedPlacedNotFound,
					Reason: fmt.Sprintf("placed in %s, yet the loader still does not find it", where),
					Advice: "run 'cudadeps why " + n + " --from FILE' for the object that needs it"})
			}
		}
		if len(again) < len(st.Provides) || st.Restore != nil && len(again) == 0 {
			steps = append(steps, st)
		}
	}
	plan.Steps = steps
	s.markUndeclared(plan)
	for _, st := range plan.Steps {
		if s.opts.Prefix != nil {
			if _, ok, err := s.opts.Prefix.Store().Lookup(st.Key()); err == nil && ok {
				st.Installed = true
			}
		}
		if !st.Installed && s.opts.Client != nil {
			st.Cached = !s.opts.Client.NeedsDownload(fetch.Request{URL: st.URL, SHA256: st.SHA256, Size: st.Size})
		}
	}
	s.out.Unresolved = plan.Unresolved
	return plan
}

// stopBefore says why the loop ends before acting on the round's plan, or "".
func (s *session) stopBefore(r *Round, n int) (StopReason, error) {
	plan := r.Plan
	switch {
	case len(plan.Steps) == 0 && len(plan.JetPack) == 0:
		return StopNoArchive, nil
	case s.opts.DryRun:
		return StopDryRun, nil
	case n > s.opts.MaxRounds:
		return StopRoundLimit, nil
	}
	if s.opts.Confirm != nil {
		ok, err := s.opts.Confirm(r)
		if err != nil {
			return "", err
		}
		if !ok {
			return StopNotConfirmed, nil
		}
	}
	return "", nil
}

// install brings the plan's archives into the store, recording what it
// installed even when it fails part way.
func (s *session) install(r *Round, plan *Plan) (map[fetch.Key]fetch.Entry, error) {
	entries, installed, err := install(s.ctx, s.opts, plan, s.change)
	r.Installed = installed
	if err != nil {
		// What did install is recorded, so that undo can remove it.
		if serr := s.change.Commit(); serr != nil {
			return nil, errors.Join(err, serr)
		}
		return nil, err
	}
	return entries, nil
}

// place carries out the round's decisions and saves the record.
func (s *session) place(r *Round, entries map[fetch.Key]fetch.Entry) error {
	for _, d := range r.Decisions {
		e, ok := entries[d.Step.Key()]
		if !ok {
			return fmt.Errorf("%s: not in the store after install", d.Step.Key())
		}
		var stepPlaced []activation.Placed
		if rs := d.Step.Restore; rs != nil && rs.Mode == RestoreInstall {
			if err := s.install1(r, e, d); err != nil {
				_ = s.change.Commit()
				return err
			}
			continue
		}
		for _, pl := range d.Placements {
			files, err := placementFiles(e, d.Step, pl)
			if err == nil {
				var placed []activation.Placed
				placed, err = s.change.Place(e.Key, activationFiles(e, d.Step, pl.HostDir, files), s.opts.Copy)
				r.Placed = append(r.Placed, placed...)
				stepPlaced = append(stepPlaced, placed...)
			}
			if err != nil {
				_ = s.change.Commit()
				return err
			}
			for _, f := range files {
				s.handled[f.name] = pl.Dir
			}
			for _, n := range d.Step.Provides {
				if _, ok := s.handled[n]; !ok && len(pl.Names) == 0 {
					s.handled[n] = pl.Dir
				}
			}
		}
		if err := s.repair(r, e, d.Step); err != nil {
			_ = s.change.Commit()
			return err
		}
		if d.Script != nil {
			libDir, _, err := libraries(e, d.Step)
			if err != nil {
				return err
			}
			how := s.change.AddScriptDir(e.Key, filepath.Join(e.Dir, filepath.FromSlash(libDir)))
			for _, n := range d.Step.Provides {
				s.handled[n] = how
				s.viaEnv[n] = true
			}
		}
		if rs := d.Step.Restore; rs != nil && rs.Mode == RestoreSupply {
			sup := supplyOf(rs, d.Step, stepPlaced)
			if rs.Site == "" {
				files, err := storeFiles(e, d.Step)
				if err != nil {
					return err
				}
				sup.Files = files
			}
			s.change.Supply(sup)
		}
	}
	return s.change.Commit()
}

// install1 installs one restored distribution's wheel into its site.
func (s *session) install1(r *Round, e fetch.Entry, d Decision) error {
	placed, err := installDistribution(s.change, e, d.Step, d.Step.Restore.Site, s.opts.Copy)
	r.Placed = append(r.Placed, placed...)
	for _, p := range placed {
		s.handled[filepath.Base(p.Path)] = filepath.Dir(p.Path)
	}
	return err
}

// supplyOf says that a declared distribution's libraries were placed from
// the archive of st.
func supplyOf(rs *Restore, st *Step, placed []activation.Placed) declared.Supply {
	sup := declared.Supply{Name: rs.Dist, Version: rs.Version, Site: rs.Site,
		From: fmt.Sprintf("%s %s (%s)", st.Component, st.Version, st.Platform), Files: []string{}}
	for _, p := range placed {
		sup.Files = append(sup.Files, p.Path)
	}
	return sup
}

// verifyRound ends the loop once nothing is missing, after the import
// check and the probes (or the check command), which may find more for
// another round.
func (s *session) verifyRound(r *Round, n int) (bool, error) {
	if !s.verifies() {
		s.out.OK = true
		s.out.Stopped = StopNothingMissing
		return true, nil
	}
	s.opts.Logger.Info("verify", "round", n, "module", s.t.Module, "check", s.opts.Check)
	envDirs, err := s.envDirs()
	if err != nil {
		return true, err
	}
	c := &checkRunner{t: s.t, envDirs: envDirs, prefix: s.opts.Prefix, check: s.opts.Check, timeout: s.opts.CheckTimeout}
	v := c.run(s.ctx)
	r.Verify = v
	s.out.Verify = v
	if err := s.ctx.Err(); err != nil {
		return true, err
	}
	var fresh []string
	shadows := s.layout.Shadows(s.last)
	for _, m := range v.Blamed() {
		if d := s.leftToPip(m); d != "" {
			// The failure is that distribution's release (torch refuses a
			// cuDNN older than its own): another copy beside pip's files
			// would hide it, and refuseDistributions says what to install.
			s.opts.Logger.Info("the run fails in a library of a distribution left to pip", "soname", m, "distribution", d)
			continue
		}
		if s.foundOwnedCopy(v, m, shadows) {
			s.opts.Logger.Info("the run fails in a library an installed distribution owns, which no placed copy would replace", "soname", m)
			continue
		}
		// A library placed in the package's directories that a dlopen by
		// name still misses gets one more try, through LD_LIBRARY_PATH.
		if _, done := s.handled[m]; !done || !s.viaEnv[m] {
			fresh = uniq.Append(fresh, m)
		}
	}
	if !v.OK && len(fresh) > 0 && n < s.opts.MaxRounds {
		s.opts.Logger.Info("the run needs more", "sonames", fresh)
		s.feedRuntime(v, fresh)
		return false, nil
	}
	s.out.OK = v.OK
	s.out.Stopped = v.stopped()
	return true, nil
}

// finish reports what the last scan still gets wrong (a wrong copy found
// first, one chain across CUDA majors) and how the loader is activated.
func (s *session) finish() {
	s.out.FinalScan = s.last
	if s.last != nil {
		for _, sh := range s.layout.Shadows(s.last) {
			if d := pymeta.NormalizeName(sh.Owner.Dist); s.accepted[d] || s.exact[d] != "" || sh.SameBuild() {
				// Exactly the release the package requires, found first
				// elsewhere (a toolkit on LD_LIBRARY_PATH): no wrong copy;
				// the report lists it among the exact copies.
				continue
			}
			if sh.Owner.Present || !s.out.DryRun {
				advice := sh.Remedy
				if sh.Via == ldso.ViaLDLibraryPath {
					advice += "; in this shell: " + correctedLDLibraryPath(s.opts.Loader, sh.Found)
				}
				s.out.Unresolved = append(s.out.Unresolved, Unresolved{Soname: sh.Soname, NeededBy: sh.NeededBy,
					Kind: UnresolvedShadowed, Reason: sh.String(), Advice: advice})
				s.out.OK = false
			}
		}
		s.out.Checks = orEmpty(crossChecks(s.last))
		optional := map[string]bool{}
		for _, o := range s.out.Optional {
			optional[o.Soname] = true
		}
		for _, root := range s.last.Roots {
			for _, u := range root.UndefinedSymbols {
				if optionalMiss(optional, root, u) {
					continue // the optional library's own symbols: listed under optional
				}
				if !slices.Contains(s.out.UndefinedSymbols, u) {
					s.out.UndefinedSymbols = append(s.out.UndefinedSymbols, u)
				}
			}
		}
		if len(s.out.UndefinedSymbols) > 0 {
			s.out.OK = false
		}
	}
	s.refuseDistributions()
	s.refuseRequirements()
	s.out.SeeChecks = s.out.OK && len(s.out.Checks) > 0
	s.out.fillActivation(s.opts, s.change)
}

// optionalMiss reports a reference left unbound because an optional
// library (a soname of optional) is absent, as CuPy's cuTENSOR module
// without cuTENSOR: one versioned for that library, or an unversioned one
// of an object that needs it and finds it missing.
func optionalMiss(optional map[string]bool, root *scan.Root, u scan.UndefinedSymbol) bool {
	if u.File != "" {
		return optional[u.File]
	}
	for _, m := range root.Missing {
		if optional[m.Soname] && slices.Contains(m.NeededBy, u.Object) {
			return true
		}
	}
	return false
}

// correctedLDLibraryPath is the command that sets LD_LIBRARY_PATH without
// the entries that hold found (a wrong copy): the variable the user should
// have.
func correctedLDLibraryPath(lo ldso.Options, found string) string {
	cur := os.Getenv("LD_LIBRARY_PATH")
	if lo.LDLibraryPath != nil {
		cur = *lo.LDLibraryPath
	}
	bad := physical(filepath.Dir(found))
	var keep []string
	for _, e := range strings.Split(cur, ":") {
		if e != "" && physical(e) != bad {
			keep = append(keep, e)
		}
	}
	if len(keep) == 0 {
		return "unset LD_LIBRARY_PATH"
	}
	return "export LD_LIBRARY_PATH=" + shquote.Quote(strings.Join(keep, ":"))
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func needFor(needs []*Need, soname string) *Need {
	for _, n := range needs {
		if n.Soname == soname {
			return n
		}
	}
	return &Need{Soname: soname}
}

// newLoader builds a fresh loader (files changed since the last round) that
// also searches what the activation script adds.
func newLoader(ctx context.Context, base ldso.Options, envDirs []string) (*ldso.Loader, error) {
	opts := base
	if len(envDirs) > 0 {
		llp := strings.Join(envDirs, ":")
		cur := ""
		if base.LDLibraryPath != nil {
			cur = *base.LDLibraryPath
		} else {
			cur = os.Getenv("LD_LIBRARY_PATH")
		}
		if cur != "" {
			llp += ":" + cur
		}
		opts.LDLibraryPath = &llp
	}
	return ldso.New(ctx, opts)
}

func systemDirsOf(rep *scan.Report) []string {
	for _, r := range rep.Roots {
		if r.Result != nil && r.Result.Arch != nil {
			return r.Result.Arch.SystemDirs
		}
	}
	return nil
}

// install brings the plan's archives into the store and returns every
// step's entry, with the keys that were newly installed.
func install(ctx context.Context, opts Options, plan *Plan, change *activation.Change) (map[fetch.Key]fetch.Entry, []fetch.Key, error) {
	var items []fetch.Item
	for _, s := range plan.Steps {
		if s.Installed {
			continue
		}
		name := fmt.Sprintf("%s %s (%s", s.Component, s.Version, s.Platform)
		if s.CUDAVariant != "" {
			name += ", " + s.CUDAVariant
		}
		name += ")"
		url := s.URL
		if s.Source == SourcePyPI {
			name, url = s.Filename, cmp.Or(s.fetchURL, s.URL)
		}
		items = append(items, fetch.Item{Key: s.Key(), Request: fetch.Request{Name: name, URL: url, SHA256: s.SHA256, Size: s.Size}})
	}
	installed, err := change.Install(ctx, opts.Client, items)
	if err != nil {
		return nil, installed, err
	}
	out := map[fetch.Key]fetch.Entry{}
	for _, s := range plan.Steps {
		e, ok, err := opts.Prefix.Store().Lookup(s.Key())
		if err != nil {
			return nil, installed, err
		}
		if !ok {
			return nil, installed, fmt.Errorf("%s: not in the store after install", s.Key())
		}
		out[s.Key()] = e
	}
	return out, installed, nil
}

// runtimeNeeds turns sonames the import reported into needs. The object
// that dlopen'ed them is unknown; the directories most of the package's own
// objects search are where a library is most likely to be found.
func runtimeNeeds(names []string, by map[string]string, static []*Need, rep *scan.Report, t *Target, handled map[string]string, viaEnv map[string]bool) []*Need {
	var out []*Need
	count := map[string]int{}
	firstSeen := map[string]ldso.SearchDir{}
	var order []string
	for _, r := range rep.Roots {
		if r.Result == nil {
			continue
		}
		for _, d := range r.Result.Searched {
			if _, ok := firstSeen[d.Dir]; !ok {
				firstSeen[d.Dir] = d
				order = append(order, d.Dir)
			}
			count[d.Dir]++
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return count[order[i]] > count[order[j]] })
	var dirs []ldso.SearchDir
	for _, d := range order {
		dirs = append(dirs, firstSeen[d])
	}
	for _, n := range names {
		who := "import " + t.Module
		if b, ok := by[n]; ok {
			who = b
		}
		if needFor(static, n).NeededBy != nil {
			continue
		}
		searched := dirs
		if _, placed := handled[n]; placed && !viaEnv[n] {
			// Placed in those directories already, and still not found: the
			// caller searches elsewhere. Only LD_LIBRARY_PATH reaches it.
			searched = nil
		}
		out = append(out, &Need{Soname: n, NeededBy: []string{who}, Runtime: true, Requests: []Request{{Object: who, Searched: searched}}})
	}
	return out
}

func (o *Outcome) fillActivation(opts Options, change *activation.Change) {
	if opts.Prefix != nil && opts.Loader.Root != "" {
		if why := opts.Prefix.Unseen(); why != "" {
			o.Activation.Notes = append(o.Activation.Notes, why)
		}
	}
	if change == nil {
		return
	}
	rec := change.Record()
	for _, p := range rec.Placed {
		if p.Dist != "" {
			continue
		}
		o.Activation.InPlace = uniq.Append(o.Activation.InPlace, filepath.Dir(p.Path))
	}
	for _, r := range o.Rounds {
		if r.Plan == nil || len(r.Placed) == 0 {
			continue
		}
		for _, st := range r.Plan.Steps {
			if rs := st.Restore; rs != nil {
				o.Activation.Distributions = uniq.Append(o.Activation.Distributions, fmt.Sprintf("%s %s (%s into %s)", rs.Dist, rs.Version, restoreVerb(rs.Mode), rs.Site))
			}
		}
	}
	if len(rec.ScriptDirs) > 0 {
		o.Activation.Script = opts.Prefix.EnvScript()
		o.Activation.ScriptDirs = rec.EnvDirs()
		o.Activation.ScriptInRoot = opts.Prefix.EnvScriptInRoot()
		if why := change.ConfRefused(); why != "" && why != opts.Prefix.Unseen() {
			o.Activation.Notes = append(o.Activation.Notes, "the root's ld.so.conf.d is not used: "+why+"; source "+o.Activation.Script+" in the root's shells instead")
		}
	}
	if len(rec.ConfDirs) > 0 {
		o.Activation.LdConf = activation.ConfFile(rec.Root)
		o.Activation.LdConfDirs = rec.LdConfDirs()
	}
	if len(rec.Placed) > 0 || len(rec.ScriptDirs) > 0 || len(rec.ConfDirs) > 0 {
		o.Activation.Record = opts.Prefix.RecordFile(rec.Target)
	}
}

func restoreVerb(m RestoreMode) string {
	if m == RestoreSupply {
		return "supplied from NVIDIA's archive"
	}
	return "installed"
}

// orHost names a root for messages: "this host" for "".
func orHost(root string) string {
	if root == "" {
		return "this host"
	}
	return root
}
