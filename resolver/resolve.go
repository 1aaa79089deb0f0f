package resolver

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/ldso"
	"github.com/cudadeps/cudadeps/scan"
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
	// Prefix holds the store, the activation records and env.sh.
	Prefix string
	Store  *fetch.Store
	Client *fetch.Client
	// DryRun plans one round and changes nothing.
	DryRun bool
	// Copy places copies instead of links.
	Copy bool
	// Verify imports a Python target once nothing is missing.
	Verify bool
	// MaxRounds bounds the loop (default 8).
	MaxRounds int
	// Confirm is asked before anything is downloaded; nil means yes.
	Confirm func(*Plan) (bool, error)
	Logger  *slog.Logger
	// Hook, when set, is called after each step that changes something
	// ("staged", "installed", "mkdir", "placed", "record"): tests kill the
	// process there to prove that the next run recovers.
	Hook func(step string)
}

// Outcome is everything a resolve found and did. Its JSON form is
// documented in the README ("resolve --json").
type Outcome struct {
	Target     *Target       `json:"target"`
	Platform   string        `json:"platform"`
	CUDAMajor  int           `json:"cuda_major"`
	DryRun     bool          `json:"dry_run"`
	Rounds     []*Round      `json:"rounds"`
	Unresolved []Unresolved  `json:"unresolved"`
	Activation Activation    `json:"activation"`
	Verify     *Verification `json:"verify,omitempty"`
	// Remaining are the version errors the loader would still stop at.
	VersionErrors []scan.VersionError `json:"version_errors"`
	OK            bool                `json:"ok"`
	// Stopped says why the loop ended.
	Stopped string `json:"stopped"`
}

// Activation says how the loader is made to find what was installed.
type Activation struct {
	// InPlace are the directories that received links (or copies).
	InPlace []string `json:"in_place"`
	// Script is set when LD_LIBRARY_PATH is needed: source it.
	Script  string   `json:"script,omitempty"`
	EnvDirs []string `json:"env_dirs,omitempty"`
	Record  string   `json:"record,omitempty"`
}

// Round is one pass of the loop.
type Round struct {
	N         int           `json:"round"`
	Missing   []*Need       `json:"missing"`
	Plan      *Plan         `json:"plan"`
	Decisions []Decision    `json:"placements"`
	Installed []fetch.Key   `json:"installed"`
	Placed    []Placed      `json:"placed"`
	Verify    *Verification `json:"verify,omitempty"`
}

// Resolve runs the loop for a target.
func Resolve(ctx context.Context, t *Target, opts Options) (*Outcome, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxRounds <= 0 {
		opts.MaxRounds = 8
	}
	if opts.Catalog == nil {
		return nil, errors.New("resolve needs a catalog")
	}
	out := &Outcome{Target: t, DryRun: opts.DryRun, Rounds: []*Round{}, Unresolved: []Unresolved{}, VersionErrors: []scan.VersionError{}}
	if t.Kind == KindWheel && !opts.DryRun {
		// A wheel is not installed anywhere: there is nowhere to place
		// libraries for it. Plan only.
		opts.DryRun = true
		out.DryRun = true
	}
	var rec *Record
	if !opts.DryRun {
		var err error
		if rec, err = OpenRecord(ctx, opts, t); err != nil {
			return nil, err
		}
		defer rec.Close()
	}
	handled := map[string]string{} // soname → where it was placed
	viaEnv := map[string]bool{}    // sonames the activation script serves
	var runtime []string           // sonames only the import found missing
	for round := 1; ; round++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		envDirs, err := EnvDirs(opts.Prefix)
		if err != nil {
			return out, err
		}
		l, err := newLoader(ctx, opts.Loader, envDirs)
		if err != nil {
			return out, err
		}
		rep, err := t.Scan(ctx, l, opts.WheelMount)
		// The loader's wheel mounts are done with; its path mapping (under
		// --root) still serves the placement below.
		l.Close()
		if err != nil {
			return out, err
		}
		for _, e := range rep.Errors {
			opts.Logger.Warn("unreadable file", "path", e.Path, "error", e.Error)
		}
		if round == 1 {
			if err := out.choosePlatform(rep, opts); err != nil {
				return out, err
			}
		}
		out.VersionErrors = rep.VersionErrors
		if err := rec.Share(rep); err != nil {
			return out, err
		}
		needs := needsFrom(rep)
		needs = append(needs, runtimeNeeds(runtime, needs, rep, t, handled, viaEnv)...)
		r := &Round{N: round, Missing: needs, Installed: []fetch.Key{}, Placed: []Placed{}}
		out.Rounds = append(out.Rounds, r)

		if len(needs) == 0 {
			if opts.Verify && !opts.DryRun && t.Kind == KindPython && t.Env != nil && t.Env.FromPython {
				v := verify(ctx, t, envDirs)
				r.Verify = &v
				out.Verify = &v
				var fresh []string
				for _, m := range v.Missing {
					// A library placed in the package's directories that a
					// dlopen by name still misses gets one more try, through
					// LD_LIBRARY_PATH.
					if _, done := handled[m]; !done || !viaEnv[m] {
						fresh = appendUnique(fresh, m)
					}
				}
				if !v.OK && len(fresh) > 0 && round < opts.MaxRounds {
					opts.Logger.Info("the import needs more", "sonames", fresh)
					for _, m := range fresh {
						runtime = appendUnique(runtime, m)
					}
					continue
				}
				out.OK = v.OK
				out.Stopped = "nothing missing"
				if !v.OK {
					out.Stopped = "the import still fails"
				}
			} else {
				out.OK = true
				out.Stopped = "nothing missing"
			}
			break
		}

		plan := MakePlan(needs, opts.Catalog, out.Platform, out.CUDAMajor)
		r.Plan = plan
		// A need that an earlier round placed and that is still missing
		// will not be fixed by doing the same again (a run-time need placed
		// in the package's directories gets one more try, by
		// LD_LIBRARY_PATH).
		var steps []*Step
		for _, s := range plan.Steps {
			var again []string
			for _, n := range s.Provides {
				if where, done := handled[n]; done && (viaEnv[n] || !needFor(needs, n).Runtime) {
					again = append(again, n)
					plan.Unresolved = append(plan.Unresolved, Unresolved{Soname: n, NeededBy: needFor(needs, n).NeededBy,
						Reason: fmt.Sprintf("placed in %s, yet the loader still does not find it", where),
						Advice: "run 'cudadeps why " + n + " --from FILE' for the object that needs it"})
				}
			}
			if len(again) < len(s.Provides) {
				steps = append(steps, s)
			}
		}
		plan.Steps = steps
		if opts.Store != nil {
			for _, s := range plan.Steps {
				if _, ok, err := opts.Store.Lookup(s.Key()); err == nil && ok {
					s.Installed = true
				}
			}
		}
		out.Unresolved = plan.Unresolved
		if t.Kind != KindWheel {
			// A wheel is installed nowhere yet: there is no directory to
			// place anything in.
			r.Decisions = Decide(plan, &fsChecker{l: l, systemDirs: systemDirsOf(rep)})
		}
		if len(plan.Steps) == 0 {
			out.Stopped = "no archive provides what is missing"
			break
		}
		if opts.DryRun {
			out.Stopped = "dry run"
			break
		}
		if round > opts.MaxRounds {
			out.Stopped = fmt.Sprintf("still missing libraries after %d rounds", opts.MaxRounds)
			break
		}
		if opts.Confirm != nil {
			ok, err := opts.Confirm(plan)
			if err != nil {
				return out, err
			}
			if !ok {
				out.Stopped = "not confirmed"
				break
			}
		}
		entries, installed, err := install(ctx, opts, plan, rec)
		r.Installed = installed
		rec.Installed = appendKeys(rec.Installed, installed)
		if err != nil {
			// What did install is recorded, so that undo can remove it.
			if serr := rec.Commit(); serr != nil {
				return out, errors.Join(err, serr)
			}
			return out, err
		}
		for _, d := range r.Decisions {
			e, ok := entries[d.Step.Key()]
			if !ok {
				return out, fmt.Errorf("%s: not in the store after install", d.Step.Key())
			}
			for _, pl := range d.Placements {
				placed, err := apply(rec, e, d.Step, pl.HostDir, opts.Copy)
				r.Placed = append(r.Placed, placed...)
				if err != nil {
					_ = rec.Commit()
					return out, err
				}
				for _, n := range d.Step.Provides {
					handled[n] = pl.Dir
				}
			}
			if d.Env != nil {
				libDir, _, err := libraries(e, d.Step)
				if err != nil {
					return out, err
				}
				dir := filepath.Join(e.Dir, filepath.FromSlash(libDir))
				rec.Env = appendUnique(rec.Env, dir)
				rec.Installed = appendKeys(rec.Installed, []fetch.Key{e.Key})
				for _, n := range d.Step.Provides {
					handled[n] = "LD_LIBRARY_PATH (" + EnvScript(opts.Prefix) + ")"
					viaEnv[n] = true
				}
			}
		}
		if err := rec.Commit(); err != nil {
			return out, err
		}
		// What the import asked for is handled; the next import check says
		// whether it worked.
		runtime = nil
	}
	out.fillActivation(opts, rec)
	return out, nil
}

func needFor(needs []*Need, soname string) *Need {
	for _, n := range needs {
		if n.Soname == soname {
			return n
		}
	}
	return &Need{Soname: soname}
}

func appendKeys(list []fetch.Key, more []fetch.Key) []fetch.Key {
	for _, k := range more {
		found := false
		for _, x := range list {
			if x == k {
				found = true
			}
		}
		if !found {
			list = append(list, k)
		}
	}
	return list
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
func install(ctx context.Context, opts Options, plan *Plan, rec *Record) (map[fetch.Key]fetch.Entry, []fetch.Key, error) {
	if opts.Store == nil || opts.Client == nil {
		return nil, nil, errors.New("resolve needs a store and a download client")
	}
	var items []fetch.Item
	var fresh []fetch.Key
	for _, s := range plan.Steps {
		if s.Installed {
			continue
		}
		name := fmt.Sprintf("%s %s (%s", s.Component, s.Version, s.Platform)
		if s.CUDAVariant != "" {
			name += ", " + s.CUDAVariant
		}
		items = append(items, fetch.Item{Key: s.Key(), Request: fetch.Request{Name: name + ")", URL: s.URL, SHA256: s.SHA256, Size: s.Size}})
		fresh = append(fresh, s.Key())
	}
	if len(items) > 0 {
		items, err := rec.IntendInstall(items)
		if err != nil {
			return nil, nil, err
		}
		if _, err := opts.Store.Install(ctx, opts.Client, items); err != nil {
			// Some items may have been installed before the failure.
			var done []fetch.Key
			for _, k := range fresh {
				if _, ok, _ := opts.Store.Lookup(k); ok {
					done = append(done, k)
				}
			}
			return nil, done, err
		}
		rec.step("installed")
	}
	out := map[fetch.Key]fetch.Entry{}
	for _, s := range plan.Steps {
		e, ok, err := opts.Store.Lookup(s.Key())
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, fmt.Errorf("%s: not in the store after install", s.Key())
		}
		out[s.Key()] = e
	}
	return out, fresh, nil
}

// choosePlatform decides the platform and CUDA major from the scan: the ELF
// machine of the objects, a Tegra host, the libcudart soname in the closure.
func (o *Outcome) choosePlatform(rep *scan.Report, opts Options) error {
	// libcudart says the CUDA major; failing that, the libraries whose
	// major follows CUDA's (libcublas.so.13). Misses count: a missing
	// libcudart.so.13 still says 13.
	major, hint := 0, 0
	var machine elf.Machine
	for _, r := range rep.Roots {
		if r.Result == nil {
			continue
		}
		if machine == elf.EM_NONE && r.Result.Main.Info != nil {
			machine = r.Result.Main.Info.Machine
		}
		for _, obj := range r.Result.Objects {
			names := append([]string{path.Base(obj.Name)}, obj.Names...)
			if obj.Info != nil && obj.Info.Soname != "" {
				names = append(names, obj.Info.Soname)
			}
			for _, n := range names {
				n = path.Base(n)
				if m, ok := catalog.CUDAMajorFromSoname(n); ok && major == 0 {
					major = m
				}
				if m, ok := catalog.CUDAMajorHint(n); ok && m > hint {
					hint = m
				}
			}
		}
	}
	if major == 0 {
		major = hint
	}
	switch {
	case major == 0:
		major = opts.CUDAMajor
	case opts.CUDAMajor != 0 && opts.CUDAMajor != major:
		opts.Logger.Warn("--cuda differs from the libcudart the package links; using libcudart's", "cuda", opts.CUDAMajor, "libcudart", major)
	}
	o.CUDAMajor = major
	if opts.Platform != "" {
		o.Platform = opts.Platform
		return nil
	}
	if machine == elf.EM_NONE {
		return nil // nothing to scan, nothing to plan
	}
	tegra := catalog.HostIsTegra(opts.Loader.Root)
	p, err := catalog.PlatformFor(machine, tegra, major)
	if err != nil {
		return fmt.Errorf("choose the NVIDIA platform: %w (use --platform)", err)
	}
	o.Platform = p
	return nil
}

// runtimeNeeds turns sonames the import reported into needs. The object
// that dlopen'ed them is unknown; the directories most of the package's own
// objects search are where a library is most likely to be found.
func runtimeNeeds(names []string, static []*Need, rep *scan.Report, t *Target, handled map[string]string, viaEnv map[string]bool) []*Need {
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
	who := "import " + t.Module
	for _, n := range names {
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

func (o *Outcome) fillActivation(opts Options, rec *Record) {
	if rec == nil {
		return
	}
	for _, p := range rec.Placed {
		o.Activation.InPlace = appendUnique(o.Activation.InPlace, filepath.Dir(p.Path))
	}
	if len(rec.Env) > 0 {
		o.Activation.Script = EnvScript(opts.Prefix)
		o.Activation.EnvDirs = rec.Env
	}
	if len(rec.Placed) > 0 || len(rec.Env) > 0 {
		o.Activation.Record = recordFile(opts.Prefix, rec.Target)
	}
}
