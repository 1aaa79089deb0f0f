package main

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/check"
	"github.com/cudadeps/cudadeps/doctor"
	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/libprobe"
	"github.com/cudadeps/cudadeps/internal/shquote"
	"github.com/cudadeps/cudadeps/loader/gpuarch"
	"github.com/cudadeps/cudadeps/resolver"
)

const doctorLong = `doctor checks what stands between a CUDA program and the GPU: the driver
version, the libcuda.so.1 the dynamic loader would load (a toolkit stub, a
shim, a copy that does not match the kernel module), the /dev/nvidia* device
files, CUDA_VISIBLE_DEVICES and the container runtime's variables, container
hints, LD_PRELOAD interposers, and shims that lack what their users import.

With TARGET (an installed Python distribution such as torch, found through
--python, or under --root in the root's own Python installation, read and
never run; a shared library; a program; or a directory), it also reads the CUDA
major the target needs (libcudart.so.13 in its closure: CUDA 13) and compares
it with the driver, and finds objects that carry the CUDA runtime statically.

With --probe, a subprocess loads libcuda.so.1, calls cuInit(0),
cuDriverGetVersion and cuDeviceGetCount, and the result codes are explained.

The coverage check reads the GPU's compute capability (NVML in a
subprocess, as nvidia-smi --query-gpu=compute_cap reports it, else the PCI
ID or a Jetson's device tree; --sm N instead; NVML's answer is kept in the
cache while the driver, the GPUs and the NVML library stay the same, and
--no-cache asks again) and, with a TARGET, judges
the GPU code of every library it loads: native code, PTX the driver must
compile at first use, or nothing that runs there. It also checks that
libcuda.so.1 finds libnvidia-ptxjitcompiler.so.1, without which PTX cannot
be compiled. See docs/coverage.md.

Each check prints ok, warn or FAIL with its evidence and, when there is
something to do, one line of advice. The exit status is 0 when nothing
fails, 1 when a check fails or TARGET is not there (as for resolve and
check), 2 on usage errors.`

// doctorFlags are doctor's own flags.
type doctorFlags struct {
	probe, probeChild, nvmlChild bool
	noCache                      bool
	sm                           string
	probeTimeout                 time.Duration
	python                       string
}

func (f *doctorFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.probe, "probe", false, "load libcuda.so.1 in a subprocess and call cuInit, cuDriverGetVersion and cuDeviceGetCount")
	fl.DurationVar(&f.probeTimeout, "probe-timeout", doctor.DefaultProbeTimeout, "give up on the probe after `DURATION`")
	fl.StringVar(&f.python, "python", "", "the Python `INTERPRETER` whose environment holds TARGET, whose process is modelled and which, in static builds, runs the probe (default: the active environment's python3; with --root, the root's own, and one inside the root is read, never run)")
	fl.BoolVar(&f.noCache, "no-cache", false, "ask NVML for the GPU, and analyze and import TARGET, again even when nothing changed since they last answered")
	fl.BoolVar(&f.probeChild, "probe-child", false, "run as the probe subprocess")
	_ = fl.MarkHidden("probe-child")
	fl.BoolVar(&f.nvmlChild, "nvml-child", false, "run as the NVML query subprocess")
	_ = fl.MarkHidden("nvml-child")
	fl.StringVar(&f.sm, "sm", "", "judge GPU code coverage for compute capability `N` instead of this machine's GPU (9.0, 90, sm_121, or a device: thor, orin, gb10, h100, b200, rtx50)")
}

func (a *app) doctorCommand() *cobra.Command {
	var f doctorFlags
	cmd := &cobra.Command{
		Use:   "doctor [TARGET]",
		Short: "Diagnose why CUDA fails on a host that has a GPU",
		Long:  doctorLong,
		Example: `  cudadeps doctor
  cudadeps doctor torch --probe
  cudadeps doctor torch --python ~/venv/bin/python --json
  cudadeps doctor /path/to/libmykernels.so
  cudadeps doctor torch --sm thor`,
		Args: doctorArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.runDoctor(cmd, args, f) },
	}
	a.opts.addLoaderFlags(cmd)
	a.opts.addCatalogFlags(cmd)
	a.opts.addStoreFlags(cmd)
	a.opts.addJSONFlag(cmd)
	f.register(cmd)
	return cmd
}

func (a *app) runDoctor(cmd *cobra.Command, args []string, f doctorFlags) error {
	switch {
	case f.probeChild:
		return exitWith(doctor.ProbeChild(a.stdout))
	case f.nvmlChild:
		return exitWith(gpuarch.NVMLChild(a.stdout))
	case f.probe && a.opts.root != "":
		return usageError("--probe loads this machine's libcuda.so.1; it cannot examine the system under --root %s", a.opts.root)
	}
	python := f.python
	var same []string
	if a.opts.root != "" {
		same = append(same, "--root "+shquote.Quote(a.opts.root))
	}
	if f.python != "" {
		same = append(same, "--python "+shquote.Quote(f.python))
	}
	opts := doctor.Options{
		TargetFlags:  strings.Join(same, " "),
		System:       doctor.System{Root: a.opts.root},
		Probe:        f.probe,
		ProbeTimeout: f.probeTimeout,
		Logger:       a.logger,
		Preload:      a.opts.preload,
		PreloadSet:   cmd.Flags().Changed("preload"),
	}
	if len(args) == 1 {
		var module string
		var err error
		start := time.Now()
		if python, module, err = doctorTarget(cmd.Context(), args[0], python, &opts); err != nil {
			return err
		}
		a.logger.Debug("doctor step", "step", "find target", "seconds", time.Since(start).Seconds())
		if err := a.doctorAnalysis(cmd, args[0], module, f, &opts); err != nil {
			return err
		}
	}
	if cmd.Flags().Changed("ld-library-path") {
		llp := a.opts.ldLibraryPath
		opts.LDLibraryPath = &llp
	}
	if python != "" && opts.From == "" {
		opts.From = python
		if p, err := exec.LookPath(python); err == nil {
			opts.From = p
		}
	}
	if f.probe {
		opts.ProbeCommand, _ = libprobe.Command(python, []string{"doctor", "--probe-child"}, doctor.ProbeScript)
	}
	if f.sm != "" {
		dev, err := a.device(cmd.Context(), &coverageFlags{sm: f.sm}, python)
		if err != nil {
			return err
		}
		opts.Device = dev
	} else if a.opts.root == "" {
		// NVML answers for this machine only, never for a --root.
		opts.NVMLCommand, opts.NVMLVia = nvmlCommand(python)
		if !f.noCache {
			opts.Cache = factcache.Open()
		}
	}
	rep, err := doctor.Run(cmd.Context(), opts)
	if err != nil {
		// A root that does not open, a target without an ELF object: errors
		// (1), as resolve and check report them, not usage.
		return err
	}
	if err := a.printDoctor(rep); err != nil {
		return err
	}
	if rep.Summary.Fail > 0 {
		return exitWith(exitError)
	}
	return nil
}

// printDoctor prints the report: JSON, or text with FAIL in colour on a
// terminal.
func (a *app) printDoctor(rep *doctor.Report) error {
	if a.opts.json {
		return writeJSON(a.stdout, schemaDoctor, rep)
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		return err
	}
	text := b.String()
	if p := newPainter(a.stdout); p.on {
		lines := strings.SplitAfter(text, "\n")
		for i, l := range lines {
			if rest, ok := strings.CutPrefix(l, "FAIL"); ok {
				lines[i] = p.bad("FAIL") + rest
			}
		}
		text = strings.Join(lines, "")
	}
	_, err := io.WriteString(a.stdout, text)
	return err
}

// doctorTarget fills in what doctor examines for TARGET and returns the
// interpreter that loads it (python unless a distribution names another)
// and, for a distribution, the module its import check imports.
func doctorTarget(ctx context.Context, arg, python string, opts *doctor.Options) (string, string, error) {
	t, err := resolver.FindTarget(ctx, arg, resolver.TargetOptions{Python: python, Root: opts.System.Root, Cache: factcache.Open()})
	if err != nil {
		return "", "", err // as resolve and check report it: not a usage error
	}
	module := ""
	switch t.Kind {
	case resolver.KindPython:
		opts.TargetName, opts.TargetFiles, opts.Env, module = t.Dist.Name, t.Dist.Files, t.Python, t.Module
		// The interpreter is the program that will load the package: its
		// loader view is the one that matters.
		opts.From = t.Python.Executable
		if t.Python.RealExec != "" {
			opts.From = t.Python.RealExec
		}
		if python == "" {
			python = t.Python.Interpreter
		}
	case resolver.KindWheel:
		return "", "", usageError("%s: doctor examines what is installed; give the installed distribution's name or directory", arg)
	default:
		opts.Target = t.Path
	}
	return python, module, nil
}

// doctorAnalysis has doctor run, for TARGET, the analysis resolve and
// check make and, for a Python target, the import itself (from check's
// cache while nothing changed since both passed).
func (a *app) doctorAnalysis(cmd *cobra.Command, target, module string, f doctorFlags, opts *doctor.Options) error {
	co := check.Options{Target: target, Python: f.python, Timeout: doctor.ImportTimeout + time.Minute, Cache: factcache.Open()}
	if f.noCache {
		co.Cache = factcache.Dir{}
	}
	if err := a.checkSettings(cmd, &co); err != nil {
		return err
	}
	// Only an interpreter that was asked is run: never a root's.
	if opts.Env != nil && opts.Env.FromPython && module != "" {
		co.Import, co.ImportTimeout = []string{opts.Env.Executable, "-c", "import " + module}, doctor.ImportTimeout
	}
	opts.Analyze = func(ctx context.Context) (*check.Result, error) { return check.Run(ctx, co) }
	return nil
}

func doctorArgs(_ *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usageError("doctor takes at most one TARGET, got %d: %q", len(args), args)
	}
	return nil
}
