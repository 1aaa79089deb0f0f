package plan

import (
	"context"
	"debug/elf"

	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/platform"
)

// Host is what a plan's archives need of the machine beyond the platform:
// its machine and its C library; and, for a plan a resolve made, the kind
// of host it was made for, with the evidence.
type Host struct {
	// Machine is the machine as uname names it: x86_64, aarch64.
	Machine string `json:"machine"`
	// Glibc is the glibc version of the system ("2.41"), "" when unknown.
	Glibc string `json:"glibc,omitempty"`
	// Kind, Name, L4T and Evidence are platform.Host's.
	Kind     platform.Kind       `json:"kind,omitempty"`
	Name     string              `json:"name,omitempty"`
	L4T      string              `json:"l4t,omitempty"`
	Evidence []platform.Evidence `json:"evidence,omitempty"`
}

// HostOf describes the system under root ("" for this one) for archives of
// plat: the platform's machine (this host's when plat is ""), and the
// glibc version that system's libc.so.6 defines.
func HostOf(ctx context.Context, root, plat string) Host {
	m := machineOf(plat)
	h := Host{Machine: platform.MachineName(m)}
	l, err := ldso.New(ctx, ldso.Options{Root: root, NoProbe: true, NoPreloadFile: true, PreloadSet: true,
		LookupEnv: func(string) (string, bool) { return "", false }})
	if err == nil && m != elf.EM_NONE {
		h.Glibc = l.Arch(ctx, m, elf.ELFCLASS64, 0).GlibcVersion
		l.Close()
	}
	return h
}

// machineOf is the machine of plat's archives, this host's when plat is "".
func machineOf(plat string) elf.Machine {
	if m := platform.Machine(plat); m != elf.EM_NONE {
		return m
	}
	return platform.HostMachine()
}
