package doctor

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/humansize"
	"github.com/cudadeps/cudadeps/loader/gpuarch"
)

// CheckCoverage judges the GPU code of the target's closure for the
// device, and whether the driver can compile PTX.
const CheckCoverage = "coverage"

// ptxJITCompiler is the driver library libcuda.so.1 loads to compile PTX.
const ptxJITCompiler = "libnvidia-ptxjitcompiler.so.1"

// runCoverage finds the device (Options.Device, else NVML, the PCI ID, the
// device tree) and, with a target, judges its closure.
func (d *diag) runCoverage(ctx context.Context) {
	dev := d.opts.Device
	if dev == nil {
		opts := gpuarch.DetectOptions{Root: d.sys.Root, NVMLCommand: d.opts.NVMLCommand, Via: d.opts.NVMLVia, Exec: d.sys.Exec, Cache: d.opts.Cache}
		var err error
		if dev, err = gpuarch.Detect(ctx, opts); err != nil {
			d.coverageErr = err.Error()
			return
		}
	}
	if dev.DriverCUDA == nil {
		// The driver's CUDA release decides which PTX it compiles: NVML
		// said nothing, the driver version says it.
		if drv, _ := d.effectiveDriver(); drv.ok() {
			if m, n, ok := maxCUDA(drv); ok {
				dev.DriverCUDA = &gpuarch.Version{Major: m, Minor: n}
			}
		}
	}
	var files []gpuarch.File
	if d.target != nil && d.model.result != nil {
		for _, o := range d.model.result.Objects {
			if !o.Found() || o.HostPath == "" {
				continue
			}
			names := append([]string{o.Name}, d.model.result.Names(o)...)
			if o.Info != nil {
				names = append(names, o.Info.Soname)
			}
			files = append(files, gpuarch.File{Path: o.Path, Host: o.HostPath, Names: names})
		}
	}
	rep, err := gpuarch.Assess(ctx, dev, files, nil, 0)
	if err != nil {
		d.coverageErr = err.Error()
		return
	}
	d.coverage = rep
	if lc := d.model.libcuda; lc.found() {
		d.ptxJIT = d.model.find(ptxJITCompiler, lc.obj)
	}
}

func (d *diag) checkCoverage() Check {
	if d.coverageErr != "" {
		return check(CheckCoverage, Warn, "cannot judge GPU code coverage: "+d.coverageErr, "")
	}
	rep := d.coverage
	dev := rep.Device
	var fs []finding
	if !dev.Known() {
		st := OK
		advice := ""
		if d.target != nil {
			st, advice = Warn, "give the device's compute capability with --sm (nvidia-smi --query-gpu=compute_cap shows it)"
		}
		fs = append(fs, finding{st, deviceEvidence(dev), advice})
	} else {
		fs = append(fs, d.deviceFinding(dev))
	}
	jit := false
	if dev.Known() && d.target != nil {
		s := rep.Summary
		var none, jits, built []string
		for _, o := range rep.Objects {
			if o.Judgement == nil {
				continue
			}
			switch o.Verdict {
			case gpuarch.None:
				none = append(none, path.Base(o.Path)+" ("+o.Reason+")")
			case gpuarch.JIT:
				jits = append(jits, path.Base(o.Path))
			case gpuarch.RuntimeCompiled:
				built = append(built, path.Base(o.Path))
			}
			if o.JITBytes > 0 {
				jit = true
			}
		}
		name := d.targetName()
		if len(none) > 0 {
			fs = append(fs, finding{Fail, fmt.Sprintf("%d of %s's libraries carry nothing that runs on %s: %s", len(none), name, dev.CC, strings.Join(limitList(none, 4), "; ")),
				fmt.Sprintf("install a build of %s made for compute capability %s (native sm_%d code, or PTX for %s or older)", name, dev.CC, dev.CC.SM(), dev.CC)})
		}
		if len(jits) > 0 {
			fs = append(fs, finding{Warn, fmt.Sprintf("%d of %s's libraries have no native code for %s and rely on the driver compiling %s of PTX at first use: %s", len(jits), name, dev.CC, humansize.Bytes(s.JITBytes), strings.Join(limitList(jits, 6), ", ")),
				"the first run compiles it (minutes for large libraries) into the JIT cache (~/.nv/ComputeCache; raise CUDA_CACHE_MAXSIZE to keep it); a build with native code for this device avoids it"})
		}
		ok := fmt.Sprintf("%d of %s's libraries carry native code for %s", s.Native, name, dev.CC)
		if len(built) > 0 {
			ok += fmt.Sprintf("; %d build their kernels at run time (%s)", len(built), strings.Join(limitList(built, 4), ", "))
		}
		fs = append(fs, finding{OK, ok, ""})
	}
	if f, ok := d.ptxJITFinding(jit); ok {
		fs = append(fs, f)
	}
	return combine(CheckCoverage, fs)
}

// deviceFinding names the device, and where its sources disagree.
func (d *diag) deviceFinding(dev *gpuarch.Device) finding {
	ev := deviceEvidence(dev)
	var other []string
	for _, s := range dev.Sources {
		if s.Source == dev.Source {
			continue
		}
		for _, g := range s.GPUs {
			if g.CC != dev.CC {
				other = append(other, fmt.Sprintf("%s says %s for GPU %d", s.Source, g.CC, g.Index))
			} else if g.Index == 0 {
				ev += "; " + s.Source + " agrees"
				if g.PCIID != "" {
					ev += " (" + g.PCIID + ")"
				}
			}
		}
	}
	if len(other) > 0 {
		return finding{Warn, ev + "; but " + strings.Join(other, ", "), "trust NVML (nvidia-smi --query-gpu=compute_cap); the device table of this cudadeps may be wrong for this GPU"}
	}
	if dev.Note != "" {
		ev += " (" + dev.Note + ")"
	}
	return finding{OK, ev, ""}
}

// deviceEvidence writes the device and where it was read.
func deviceEvidence(dev *gpuarch.Device) string {
	if !dev.Known() {
		return "no GPU compute capability known (" + strings.Join(dev.Failures(), "; ") + ")"
	}
	ev := "compute capability " + dev.CC.String()
	if dev.Name != "" {
		ev += ", " + dev.Name
	}
	ev += " (" + dev.Source
	for _, s := range dev.Sources {
		if s.Source != dev.Source {
			continue
		}
		if s.Via != "" {
			ev += " through " + s.Via
		}
		if s.KeptFrom != nil {
			ev += ", kept from " + s.KeptFrom.UTC().Format(time.RFC3339)
		}
	}
	ev += ")"
	if v := dev.Driver(); !v.IsZero() {
		ev += "; the driver runs CUDA " + v.String()
	}
	return ev
}

// ptxJITFinding: libcuda.so.1 loads libnvidia-ptxjitcompiler.so.1 to
// compile PTX; container runtimes do not always mount it.
func (d *diag) ptxJITFinding(needed bool) (finding, bool) {
	lb := d.ptxJIT
	if lb == nil {
		return finding{}, false // no libcuda: the libcuda check says so
	}
	if lb.found() {
		return finding{OK, fmt.Sprintf("libcuda.so.1 finds %s (%s)", lb.shown(), lb.how()), ""}, true
	}
	ev := "libcuda.so.1 finds no " + ptxJITCompiler
	if t := lb.tried(); t != "" {
		ev += " (tried " + t + ")"
	}
	advice := fmt.Sprintf("install the driver's %s beside its libcuda.so.1 (libnvidia-compute-%d on Debian/Ubuntu)", ptxJITCompiler, d.host.kernel.major())
	if d.inContainer() {
		advice = fmt.Sprintf("have the container runtime mount %s with libcuda.so.1 (NVIDIA_DRIVER_CAPABILITIES=compute,utility; a CDI spec from nvidia-ctk cdi generate lists it)", ptxJITCompiler)
	}
	if needed {
		return finding{Fail, ev + ": the PTX these libraries rely on cannot be compiled (CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221)", advice}, true
	}
	return finding{Warn, ev + ": code that carries only PTX for this GPU fails with CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221)", advice}, true
}

func limitList(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	return append(append([]string(nil), list[:n]...), fmt.Sprintf("and %d more", len(list)-n))
}
