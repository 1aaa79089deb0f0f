// Package doctor diagnoses why CUDA fails on a host that has a GPU.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	checkpkg "github.com/cudadeps/cudadeps/check"
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/libprobe"
	"github.com/cudadeps/cudadeps/internal/rootfs"
	"github.com/cudadeps/cudadeps/internal/workers"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/gpuarch"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/python/pyenv"
)

// Status is the verdict of one check.
type Status string

// The verdicts, from best to worst.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

func (s Status) rank() int {
	switch s {
	case Fail:
		return 2
	case Warn:
		return 1
	}
	return 0
}

// The checks, in the order they are reported.
const (
	CheckHost          = "host"            // the kind of host, with its evidence
	CheckDriver        = "driver"          // kernel module version
	CheckLibcuda       = "libcuda"         // the libcuda.so.1 the loader would load
	CheckDevices       = "devices"         // /dev/nvidia*
	CheckVisible       = "visible-devices" // CUDA_VISIBLE_DEVICES and the container runtime's variables
	CheckContainer     = "container"       // container hints
	CheckCompat        = "compat"          // the target's CUDA major against the driver
	CheckInterposers   = "interposers"     // LD_PRELOAD and /etc/ld.so.preload
	CheckStaticRuntime = "static-runtime"  // objects carrying the CUDA runtime statically (with a target)
	CheckShims         = "shims"           // libcuda, libcudart, libnvidia-ml that are not NVIDIA's
	// CheckCoverage ("coverage", coverage.go): the target's GPU code on the device, the PTX JIT compiler
	CheckProbe = "probe" // cuInit in a subprocess (with Options.Probe)
)

// Check is one finding: a verdict, one line of evidence, one line of advice
// (empty when there is nothing to do).
type Check struct {
	ID       string `json:"id"`
	Status   Status `json:"status"`
	Evidence string `json:"evidence"`
	Advice   string `json:"advice"`
}

// Report is the outcome of Run.
type Report struct {
	// Host is the kind of host, the platform it takes and the evidence.
	Host    *HostKind `json:"host"`
	Checks  []Check   `json:"checks"`
	Summary Summary   `json:"summary"`
}

// Summary counts the verdicts and repeats the facts the checks rest on.
type Summary struct {
	Status Status `json:"status"` // the worst verdict
	OK     int    `json:"ok"`
	Warn   int    `json:"warn"`
	Fail   int    `json:"fail"`
	// Driver is the NVIDIA kernel module version ("580.95.05"), when known.
	Driver string `json:"driver,omitempty"`
	// DriverCUDA is the newest CUDA version the driver runs ("13.0").
	DriverCUDA string `json:"driver_cuda,omitempty"`
	// Libcuda is the file the loader would load for libcuda.so.1.
	Libcuda string `json:"libcuda,omitempty"`
	// Target and TargetCUDA: what was examined and the CUDA major it needs.
	Target     string `json:"target,omitempty"`
	TargetCUDA int    `json:"target_cuda,omitempty"`
	// Container names the container engine doctor runs under ("docker").
	Container string `json:"container,omitempty"`
	// Probe is what the live probe saw, when it ran.
	Probe *ProbeResult `json:"probe,omitempty"`
	// Coverage is the device and, with a target, its closure's GPU code
	// coverage (docs/coverage.md).
	Coverage *gpuarch.Report `json:"coverage,omitempty"`
}

// System is the machine doctor examines, as it reads it: a root for its
// files and the means to read its environment, check access and run the
// probe, so that tests can build any machine in a directory.
type System struct {
	// Root stands for "/": /proc, /dev, /etc, /run, /.dockerenv and the
	// loader's files are read under it, links resolved inside it as in a
	// chroot. Empty means this host.
	Root string
	// LookupEnv reads the environment (os.LookupEnv when nil).
	LookupEnv func(string) (string, bool)
	// Access checks that the current user may open path with mode (4 read,
	// 2 write), as access(2) does (syscall.Access when nil).
	Access func(path string, mode uint32) error
	// Exec runs the probe's subprocess (libprobe.RunCommand(nil) when nil).
	Exec libprobe.Exec

	root *rootfs.Root // Root, opened by Run
}

// Options configure Run.
type Options struct {
	System System
	// Target is an ELF file or a directory of them (an installed package)
	// whose CUDA needs are checked; empty for none.
	Target string
	// TargetFiles, instead of Target, lists the files of an installed
	// Python distribution (its RECORD); TargetName names it ("torch").
	TargetFiles []string
	TargetName  string
	// TargetFlags are the flags that name the same target to another
	// command (--root DIR, --python PATH), as a shell reads them: the
	// commands doctor suggests carry them.
	TargetFlags string
	// From is the program whose loader is modelled when there is no target
	// or the target is a library (default: python3 on PATH, else /bin/sh).
	From string
	// LDLibraryPath replaces $LD_LIBRARY_PATH when non-nil.
	LDLibraryPath *string
	// Preload replaces $LD_PRELOAD when PreloadSet.
	Preload    []string
	PreloadSet bool
	// Probe runs ProbeCommand, which loads libcuda.so.1 and calls cuInit.
	// It examines the machine doctor runs on, whatever System.Root says.
	Probe bool
	// ProbeCommand is the probe's command line (see ProbeScript and
	// ProbeChild); nil when this build has no way to load libcuda.
	ProbeCommand []string
	// ProbeTimeout bounds the probe (default 60s: cuInit on a large node
	// without persistence mode takes many seconds).
	ProbeTimeout time.Duration
	// Device is the device the coverage check judges for (--sm); nil:
	// found with NVMLCommand (the NVML query, as gpuarch.NVMLChild or
	// python3 with gpuarch.NVMLScript; it examines the machine doctor runs
	// on, so none under a root), the PCI ID or the device tree. NVMLVia
	// describes NVMLCommand.
	Device      *gpuarch.Device
	NVMLCommand []string
	NVMLVia     string
	// Cache keeps NVML's answer while nothing it depends on changes
	// (gpuarch.DetectOptions.Cache); the zero Dir asks NVML every time.
	Cache factcache.Dir
	// Env is the Python environment that holds the target, when it is an
	// installed distribution: doctor then says whether a uv project's
	// `uv sync` would remove what cudadeps installed.
	Env *pyenv.Env
	// Analyze, when set, runs resolve's own analysis of the target and,
	// for a Python target, its import in a new process (check.Run with
	// Options.Import), beside the checks of the host. Doctor fails while
	// either fails.
	Analyze func(context.Context) (*checkpkg.Result, error)
	Logger  *slog.Logger
}

// DefaultProbeTimeout is used when Options.ProbeTimeout is zero.
const DefaultProbeTimeout = 60 * time.Second

// Run examines the host (and the target, if any) and returns one check per
// subject, in a fixed order; static-runtime appears only with a target,
// probe only with Options.Probe. An error is returned only for a target
// that cannot be examined; everything else is a finding.
func Run(ctx context.Context, opts Options) (*Report, error) {
	d, err := newDiag(opts)
	if err != nil {
		return nil, err
	}
	type analysis struct {
		r   *checkpkg.Result
		err error
	}
	analysed := make(chan analysis, 1)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	if opts.Analyze != nil {
		go func() {
			r, err := opts.Analyze(actx)
			d.stepDone("analysis and import", start, "kept", r != nil && r.Cached)
			analysed <- analysis{r, err}
		}()
	} else {
		analysed <- analysis{}
	}
	if err := d.loadTarget(ctx); err != nil {
		// The import in flight is stopped, not left to run on.
		cancel()
		<-analysed
		return nil, err
	}
	t := d.stepDone("target", start)
	d.host = gatherHost(d.sys, d.targetMachine())
	d.model = buildModel(ctx, d)
	t = d.stepDone("host and loader model", t)
	if opts.Probe {
		d.probe = d.runProbe(ctx)
	}
	d.runCoverage(ctx)
	t = d.stepDone("device and coverage", t)

	checks := []Check{
		d.checkHost(),
		d.checkDriver(),
		d.checkLibcuda(),
		d.checkDevices(),
		d.checkVisible(),
		d.checkContainer(),
		d.checkCompat(),
		d.checkCoverage(),
		d.checkInterposers(),
	}
	if d.target != nil {
		checks = append(checks, d.checkStaticRuntime())
	}
	checks = append(checks, d.checkShims())
	a := <-analysed
	d.stepDone("checks, then the analysis awaited", t)
	if a.err != nil && ctx.Err() != nil {
		return nil, a.err
	}
	for _, c := range []*Check{checkAnalysis(a.r, a.err, opts.TargetFlags), checkImport(a.r), checkUV(opts.Env)} {
		if c != nil {
			checks = append(checks, *c)
		}
	}
	if opts.Probe {
		checks = append(checks, d.checkProbe())
	}
	return d.report(checks), nil
}

// stepDone logs at debug level (-v) how long a step of Run took since
// start, to see where a slow doctor spends its time, and returns now.
func (d *diag) stepDone(step string, start time.Time, attrs ...any) time.Time {
	now := time.Now()
	d.log.Debug("doctor step", append([]any{"step", step, "seconds", now.Sub(start).Seconds()}, attrs...)...)
	return now
}

// newDiag fills the defaults of opts and opens the root.
func newDiag(opts Options) (*diag, error) {
	d := &diag{opts: opts, sys: opts.System, log: opts.Logger}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.sys.LookupEnv == nil {
		d.sys.LookupEnv = os.LookupEnv
	}
	if d.sys.Access == nil {
		d.sys.Access = syscall.Access
	}
	if d.sys.Exec == nil {
		d.sys.Exec = libprobe.RunCommand(nil)
	}
	r, err := rootfs.Open(d.sys.Root)
	if err != nil {
		return nil, err
	}
	d.sys.root = r
	return d, nil
}

// loadTarget reads the target's objects, when there is a target.
func (d *diag) loadTarget(ctx context.Context) error {
	var err error
	switch {
	case len(d.opts.TargetFiles) > 0:
		d.target, err = readTargetFiles(ctx, d.opts.TargetName, d.opts.TargetFiles, d.log)
	case d.opts.Target != "":
		d.target, err = readTarget(ctx, d.opts.Target, d.log)
	}
	return err
}

// report counts the verdicts.
func (d *diag) report(checks []Check) *Report {
	rep := &Report{Host: d.hostKind(), Checks: checks, Summary: d.summary()}
	for _, c := range checks {
		switch c.Status {
		case OK:
			rep.Summary.OK++
		case Warn:
			rep.Summary.Warn++
		case Fail:
			rep.Summary.Fail++
		}
		if c.Status.rank() > rep.Summary.Status.rank() {
			rep.Summary.Status = c.Status
		}
	}
	if rep.Summary.Status == "" {
		rep.Summary.Status = OK
	}
	return rep
}

// diag holds what one Run has learnt.
type diag struct {
	opts   Options
	sys    System
	log    *slog.Logger
	host   *hostFacts
	model  *model
	target *target
	probe  *ProbeResult
	// coverage is the device and the target's GPU code coverage;
	// coverageErr why there is none; ptxJIT the PTX JIT compiler as
	// libcuda.so.1 would load it.
	coverage    *gpuarch.Report
	coverageErr string
	ptxJIT      *lib

	// Read once, on demand.
	hooks  []*hooks
	static *[]string
	refs   map[string][]ref
}

func (d *diag) summary() Summary {
	s := Summary{Container: d.host.container.kind, Probe: d.probe, Coverage: d.coverage}
	if d.host.kernel.ok() {
		s.Driver = d.host.kernel.String()
	}
	if drv, _ := d.effectiveDriver(); drv.ok() {
		if m, n, ok := maxCUDA(drv); ok {
			s.DriverCUDA = fmt.Sprintf("%d.%d", m, n)
		}
	}
	if lc := d.model.libcuda; lc != nil && lc.obj != nil {
		s.Libcuda = lc.realGuest
	}
	if d.target != nil {
		s.Target = d.opts.Target
		if d.opts.TargetName != "" {
			s.Target = d.opts.TargetName
		}
		s.TargetCUDA = d.targetMajor()
	}
	return s
}

// target is the set of ELF objects doctor was asked about.
type target struct {
	path    string // the file or directory; for a distribution, its files' common directory
	name    string // for messages
	isDir   bool
	files   []string // a distribution's files
	objects []*targetObject
}

type targetObject struct {
	host string // path on this machine
	rel  string // path relative to the target, for messages
	info *elfscan.Info
}

// maxTargetObjects bounds a directory walk (a whole CUDA Python
// environment has under a thousand ELF files).
const maxTargetObjects = 20000

func readTarget(ctx context.Context, path string, log *slog.Logger) (*target, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", path, errors.Unwrap(err))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", path, err)
	}
	t := &target{path: abs, name: filepath.Base(abs), isDir: st.IsDir()}
	if !st.IsDir() {
		info, err := elfscan.ReadInfo(abs)
		if err != nil {
			if errors.Is(err, elfscan.ErrNotELF) {
				return nil, fmt.Errorf("target %s: not an ELF file (give a shared library, a program or a directory)", path)
			}
			return nil, fmt.Errorf("target %s: %w", path, err)
		}
		t.objects = append(t.objects, &targetObject{host: abs, rel: filepath.Base(abs), info: info})
		return t, nil
	}
	err = filepath.WalkDir(abs, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			log.Debug("skipping unreadable entry", "path", p, "err", err)
			if de != nil && de.IsDir() && p != abs {
				return fs.SkipDir
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !de.Type().IsRegular() {
			return nil // directories are walked; links would count files twice
		}
		info, err := elfscan.ReadInfo(p)
		if err != nil {
			if !errors.Is(err, elfscan.ErrNotELF) {
				log.Debug("skipping unreadable ELF file", "path", p, "err", err)
			}
			return nil
		}
		if !info.Dynamic {
			return nil
		}
		rel, _ := filepath.Rel(abs, p)
		t.objects = append(t.objects, &targetObject{host: p, rel: rel, info: info})
		if len(t.objects) >= maxTargetObjects {
			return fmt.Errorf("more than %d ELF objects: give a narrower directory", maxTargetObjects)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", path, err)
	}
	if len(t.objects) == 0 {
		return nil, fmt.Errorf("target %s: no dynamically linked ELF object in this directory", path)
	}
	return t, nil
}

// readTargetFiles reads the ELF objects among a distribution's files.
func readTargetFiles(ctx context.Context, name string, files []string, log *slog.Logger) (*target, error) {
	t := &target{name: name, files: files}
	// Most of a distribution's files are Python sources, headers and
	// data: they are passed over by name, as a scan passes them, without
	// a stat (torch lists twelve thousand files, a few hundred of them
	// maybe objects); the rest are read several at once.
	infos := make([]*elfscan.Info, len(files))
	workers.Each(len(files), 0, func(i int) {
		f := files[i]
		if ctx.Err() != nil {
			return
		}
		var st fs.FileInfo
		lstat := func() fs.FileMode {
			if st == nil {
				if st, _ = os.Lstat(f); st == nil {
					return 0
				}
			}
			return st.Mode()
		}
		if !scan.MayBeObject(filepath.Base(f), lstat) || !lstat().IsRegular() {
			return // RECORD lists files pip wrote; a missing one is not ours to report
		}
		info, err := elfscan.ReadInfo(f)
		if err != nil {
			if !errors.Is(err, elfscan.ErrNotELF) {
				log.Debug("skipping unreadable ELF file", "path", f, "err", err)
			}
			return
		}
		if info.Dynamic {
			infos[i] = info
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var dirs []string
	for i, info := range infos {
		if info != nil {
			t.objects = append(t.objects, &targetObject{host: files[i], info: info})
			dirs = append(dirs, filepath.Dir(files[i]))
		}
	}
	if len(t.objects) == 0 {
		return nil, fmt.Errorf("%s: its RECORD lists no dynamically linked ELF object", name)
	}
	t.path = commonDir(dirs)
	for _, o := range t.objects {
		o.rel, _ = filepath.Rel(t.path, o.host)
	}
	return t, nil
}

// commonDir is the deepest directory that holds all of dirs.
func commonDir(dirs []string) string {
	common := dirs[0]
	for _, d := range dirs[1:] {
		for common != "/" && common != "." && d != common && !strings.HasPrefix(d, common+"/") {
			common = filepath.Dir(common)
		}
	}
	return common
}
