package doctor

import (
	"debug/elf"
	"fmt"
	"strings"

	"github.com/cudadeps/cudadeps/platform"
)

// HostKind is the kind of host doctor examined, in the report: the kind,
// the platform whose archives it takes for the CUDA major in question, and
// the evidence, in the order a user can check it.
type HostKind struct {
	*platform.Host
	// Platform is the NVIDIA platform for CUDAMajor (the target's, or 0 for
	// none); PlatformErr says why there is none.
	Platform    string `json:"platform,omitempty"`
	PlatformErr string `json:"platform_error,omitempty"`
	CUDAMajor   int    `json:"cuda_major,omitempty"`
}

// targetMachine is the ELF machine of the target's objects, EM_NONE
// without a target.
func (d *diag) targetMachine() elf.Machine {
	if d.target == nil {
		return elf.EM_NONE
	}
	for _, o := range d.target.objects {
		if o.info != nil && o.info.Machine != elf.EM_NONE {
			return o.info.Machine
		}
	}
	return elf.EM_NONE
}

func (d *diag) hostKind() *HostKind {
	k := &HostKind{Host: d.host.platform}
	if d.target != nil {
		k.CUDAMajor = d.targetMajor()
	}
	p, err := k.Host.Platform(k.CUDAMajor)
	if err != nil {
		k.PlatformErr = err.Error()
	}
	k.Platform = p
	return k
}

// checkHost names the host and the platform whose archives it takes. It
// warns only when the target cannot load here at all: its objects are
// built for another machine than this host's.
func (d *diag) checkHost() Check {
	k := d.hostKind()
	ev := k.Brief()
	if k.L4T != "" && k.IsJetson() {
		ev += " (" + k.JetPack() + ")"
	}
	if m := d.targetMachine(); m != elf.EM_NONE && d.sys.root.IsHost() && platform.HostMachine() != elf.EM_NONE && m != platform.HostMachine() {
		return check(CheckHost, Warn, fmt.Sprintf("%s; the target's objects are built for %s", ev, platform.MachineName(m)),
			fmt.Sprintf("%s objects cannot load on this %s host: install the package built for %s, or examine the target with --root and a %s system tree", platform.MachineName(m), platform.MachineName(platform.HostMachine()), platform.MachineName(platform.HostMachine()), platform.MachineName(m)))
	}
	if k.PlatformErr != "" {
		return check(CheckHost, OK, ev+"; platform: "+k.PlatformErr, "")
	}
	cuda := "any CUDA"
	switch {
	case k.CUDAMajor > 0:
		cuda = fmt.Sprintf("CUDA %d", k.CUDAMajor)
	case k.IsJetson() && k.Platform == platform.LinuxAarch64:
		cuda = "JetPack's CUDA 12"
	}
	return check(CheckHost, OK, fmt.Sprintf("%s → %s archives for %s", ev, k.Platform, cuda), "")
}

// jetsonDriver is the driver check of a Jetson: JetPack's driver goes with
// its L4T release, and the dGPU driver branches' CUDA table does not apply.
func (d *diag) jetsonDriver() Check {
	k := d.host.platform
	ev := k.Name
	if k.L4T != "" {
		ev += " with L4T " + k.L4T
	}
	ev += ": the integrated GPU's driver comes with " + k.JetPack()
	if d.host.kernel.ok() {
		ev += fmt.Sprintf(" (kernel module %s)", d.host.kernel)
	}
	return check(CheckDriver, OK, ev, "")
}

// writeEvidence lists the host's evidence under its check, one line each.
func (k *HostKind) writeEvidence(b *strings.Builder, indent int) {
	if k == nil || k.Host == nil {
		return
	}
	width := 0
	for _, e := range k.Evidence {
		width = max(width, len(e.Source))
	}
	for _, e := range k.Evidence {
		fmt.Fprintf(b, "%*s%-*s  %s\n", indent, "", width, e.Source, e.Says)
	}
}
