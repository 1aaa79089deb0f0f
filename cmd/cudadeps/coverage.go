package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/internal/humansize"
	"github.com/cudadeps/cudadeps/internal/libprobe"
	"github.com/cudadeps/cudadeps/loader/gpuarch"
)

// coverageFlags are --coverage and --sm, shared by scan, doctor and
// resolve.
type coverageFlags struct {
	on bool
	sm string
}

func (f *coverageFlags) register(cmd *cobra.Command, what string) {
	fl := cmd.Flags()
	fl.BoolVar(&f.on, "coverage", false, "judge whether the GPU code of "+what+" runs on this machine's GPU (compute capability from NVML, else the PCI ID)")
	fl.StringVar(&f.sm, "sm", "", "judge GPU code coverage for compute capability `N` instead of this machine's (9.0, 90, sm_121, or a device: thor, orin, gb10, h100, b200, rtx50)")
	_ = cmd.RegisterFlagCompletionFunc("sm", cobra.FixedCompletions([]string{"thor", "orin", "gb10", "gh200", "h100", "b200", "b300", "rtx50", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"}, cobra.ShellCompDirectiveNoFileComp))
}

// wanted reports whether coverage was asked for.
func (f *coverageFlags) wanted() bool { return f.on || f.sm != "" }

// device finds the device coverage is judged for: --sm, else this
// machine's GPU (NVML in a subprocess, the PCI ID, a Jetson's device tree;
// under --root only the root's files, never this machine's NVML).
func (a *app) device(ctx context.Context, f *coverageFlags, python string) (*gpuarch.Device, error) {
	t, err := gpuarch.LoadTables()
	if err != nil {
		return nil, err
	}
	if f.sm != "" {
		cc, k, err := t.ParseSM(f.sm)
		if err != nil {
			return nil, usageError("--sm: %v", err)
		}
		return gpuarch.FromFlag(cc, k), nil
	}
	opts := gpuarch.DetectOptions{Root: a.opts.root, Tables: t}
	if a.opts.root == "" {
		opts.NVMLCommand, opts.Via = nvmlCommand(python)
	}
	return gpuarch.Detect(ctx, opts)
}

// nvmlCommand is the NVML query subprocess and how it reaches NVML: this
// binary when it can load libraries itself, else Python, else none.
func nvmlCommand(python string) ([]string, string) {
	return libprobe.Command(python, []string{"doctor", "--nvml-child"}, gpuarch.NVMLScript)
}

// assessCoverage judges files for dev and logs what it cost.
func (a *app) assessCoverage(ctx context.Context, dev *gpuarch.Device, files []gpuarch.File) (*gpuarch.Report, error) {
	start := time.Now()
	rep, err := gpuarch.Assess(ctx, dev, files, nil, 0)
	if err != nil {
		return nil, err
	}
	a.logger.Info("coverage", "objects", rep.Summary.Objects, "containers", rep.Summary.Containers,
		"entries", rep.Summary.Entries, "seconds", time.Since(start).Seconds())
	return rep, nil
}

// deviceText writes the device and how it was found.
func deviceText(d *gpuarch.Device) string {
	if !d.Known() {
		msg := "no GPU compute capability known"
		if why := d.Failures(); len(why) > 0 {
			msg += " (" + strings.Join(why, "; ") + ")"
		}
		return msg + "; give --sm N"
	}
	s := "compute capability " + d.CC.String()
	var about []string
	if d.Name != "" {
		about = append(about, d.Name)
	}
	about = append(about, "from "+d.Source)
	if v := d.Driver(); !v.IsZero() {
		about = append(about, "driver CUDA "+v.String())
	}
	return s + " (" + strings.Join(about, ", ") + ")"
}

// renderCoverage prints the coverage: the objects that do not run
// natively, by verdict, and the counts.
func renderCoverage(w io.Writer, rep *gpuarch.Report, dev *gpuarch.Device, paint painter) {
	fmt.Fprintf(w, "GPU code coverage: %s\n", deviceText(dev))
	if dev.Note != "" {
		fmt.Fprintf(w, "  note: %s\n", dev.Note)
	}
	if !dev.Known() {
		s := rep.Summary
		fmt.Fprintf(w, "  %d object(s) read: %d carry GPU code\n", s.Objects, carrying(rep))
		return
	}
	groups := []struct {
		v     gpuarch.Verdict
		label string
	}{
		{gpuarch.None, paint.bad("NOTHING RUNS")},
		{gpuarch.JIT, "PTX JIT"},
		{gpuarch.RuntimeCompiled, "builds at run time"},
	}
	for _, g := range groups {
		for _, o := range rep.Objects {
			if o.Judgement != nil && o.Verdict == g.v {
				fmt.Fprintf(w, "  %s  %s\n      %s\n", g.label, o.Path, o.Reason)
			}
		}
	}
	for _, o := range rep.Objects {
		if o.Error != "" {
			fmt.Fprintf(w, "  unreadable  %s: %s\n", o.Path, o.Error)
		}
	}
	s := rep.Summary
	fmt.Fprintf(w, "  %d native, %d PTX JIT", s.Native, s.JIT)
	if s.JITBytes > 0 {
		fmt.Fprintf(w, " (%s of PTX compiled at first use)", humansize.Bytes(s.JITBytes))
	}
	fmt.Fprintf(w, ", %d built at run time, %d with nothing that runs, %d without GPU code\n", s.RuntimeCompiled, s.None, s.NoCode)
}

func carrying(rep *gpuarch.Report) int {
	n := 0
	for _, o := range rep.Objects {
		if o.Containers > 0 {
			n++
		}
	}
	return n
}
