package resolver

import (
	"debug/elf"
	"fmt"
	"path"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/loader/elfscan"
	"github.com/cudadeps/cudadeps/loader/scan"
	"github.com/cudadeps/cudadeps/platform"
)

// JetPackLib is a missing library that JetPack's CUDA on a Jetson
// provides: it is taken from there, never downloaded.
type JetPackLib struct {
	Soname   string   `json:"soname"`
	NeededBy []string `json:"needed_by"`
	// Path is the file, Dir its directory, as the system sees them.
	Path string `json:"path"`
	Dir  string `json:"dir"`
	// JetPack names the release it comes with ("JetPack 6 (L4T R36.4.7)").
	JetPack string `json:"jetpack"`
}

// choosePlatform decides the host, the CUDA major and the platform from the
// scan: the ELF machine of the objects, the host's evidence (under the
// root), the libcudart soname in the closure. --platform overrides the
// host's platform, and the outcome says what it overrode.
func (s *session) choosePlatform(rep *scan.Report) error {
	o, opts := s.out, s.opts
	machine, major := scanFacts(rep)
	if major == 0 {
		// The wheels the package requires say it: nvidia-cudnn-cu13.
		major = s.layout.CUDAMajor()
	}
	switch {
	case major == 0:
		major = opts.CUDAMajor
	case opts.CUDAMajor != 0 && opts.CUDAMajor != major:
		opts.Logger.Warn("--cuda differs from the libcudart the package links; using libcudart's", "cuda", opts.CUDAMajor, "libcudart", major)
	}
	o.CUDAMajor = major
	o.Host = platform.Detect(platform.Probe{Root: s.root, Machine: machine})
	if machine == elf.EM_NONE && opts.Platform == "" {
		return nil // nothing to scan, nothing to plan
	}
	p, err := o.Host.Platform(major)
	if opts.Platform != "" {
		if err == nil && p != opts.Platform {
			o.PlatformOverride = fmt.Sprintf("--platform %s instead of %s (%s)", opts.Platform, p, o.Host.Name)
		}
		o.Platform = opts.Platform
		return nil
	}
	if err != nil {
		return fmt.Errorf("choose the NVIDIA platform: %w (use --platform)", err)
	}
	o.Platform = p
	return nil
}

// scanFacts reads the machine of the scanned objects and the CUDA major
// their libraries say: libcudart's soname, failing that the libraries
// whose major follows CUDA's (libcublas.so.13). Misses count: a missing
// libcudart.so.13 still says 13.
func scanFacts(rep *scan.Report) (elf.Machine, int) {
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
			names := append([]string{path.Base(obj.Name)}, r.Result.Names(obj)...)
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
	return machine, major
}

// fromJetPack takes out of needs what JetPack's CUDA provides on a Jetson
// whose platform the plan is for: a regular file of the need's soname, of
// the host's machine, in JetPack's CUDA library directories.
func (s *session) fromJetPack(needs []*Need) (jetpack []JetPackLib, rest []*Need) {
	h := s.out.Host
	if h == nil || !h.IsJetson() {
		return nil, needs
	}
	if want, err := h.Platform(s.out.CUDAMajor); err != nil || want != s.out.Platform {
		return nil, needs // --platform asked for another platform's archives
	}
	release := h.JetPack()
	if h.L4T != "" {
		release += " (L4T " + h.L4T + ")"
	}
	for _, n := range needs {
		if file, dir := s.jetPackFile(n.Soname); file != "" {
			jetpack = append(jetpack, JetPackLib{Soname: n.Soname, NeededBy: n.NeededBy, Path: file, Dir: dir, JetPack: release})
			continue
		}
		rest = append(rest, n)
	}
	return jetpack, rest
}

// jetPackFile finds soname in JetPack's CUDA directories, as the system
// sees it (links resolved inside the root).
func (s *session) jetPackFile(soname string) (file, dir string) {
	for _, d := range s.out.Host.JetPackCUDADirs() {
		guest := path.Join(d, soname)
		st, err := s.root.Stat(guest)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		host, err := s.root.Resolve(guest)
		if err != nil {
			continue
		}
		in, err := elfscan.ReadInfo(host)
		if err != nil || platform.MachineName(in.Machine) != s.out.Host.Machine {
			continue
		}
		return guest, d
	}
	return "", ""
}

// refuseWrongPlatform moves to Unresolved every step whose archive is
// built for another platform than the host takes: the two aarch64
// platforms are different builds, and a catalog layer or mirror may list
// an archive under the wrong one (its file name says which it is).
func (s *session) refuseWrongPlatform(p *Plan) {
	h := s.out.Host
	var keep []*Step
	for _, st := range p.Steps {
		built := platform.ArchivePlatform(st.URL)
		if built == "" || st.Source == SourcePyPI {
			built = st.Platform
		}
		why := ""
		if h != nil {
			why = h.Refuse(built, s.out.CUDAMajor)
		}
		if why == "" && built != st.Platform {
			why = fmt.Sprintf("a %s build listed for %s", built, st.Platform)
		}
		if why == "" {
			keep = append(keep, st)
			continue
		}
		file := path.Base(st.URL)
		for _, n := range st.needs {
			p.Unresolved = append(p.Unresolved, Unresolved{Soname: n.Soname, NeededBy: n.NeededBy,
				Reason: fmt.Sprintf("%s %s (%s) is %s", st.Component, st.Version, file, why),
				Advice: wrongPlatformAdvice(h, s.out)})
		}
	}
	p.Steps = keep
}

func wrongPlatformAdvice(h *platform.Host, o *Outcome) string {
	if o.PlatformOverride != "" {
		return "drop --platform: " + o.PlatformOverride
	}
	want := o.Platform
	if h != nil {
		if p, err := h.Platform(o.CUDAMajor); err == nil {
			want = p
		}
	}
	return "use a catalog or mirror that lists NVIDIA's " + want + " archive (cudadeps catalog update)"
}

// useJetPack puts JetPack's CUDA directories of the plan on the
// activation script's LD_LIBRARY_PATH: the libraries stay where JetPack
// installed them.
func (s *session) useJetPack(p *Plan) {
	if s.change == nil {
		return
	}
	for _, j := range p.JetPack {
		s.handled[j.Soname] = s.change.AddSystemScriptDir(j.Dir)
		s.viaEnv[j.Soname] = true
	}
}

// String says where the library is taken from, on one line.
func (j JetPackLib) String() string {
	return fmt.Sprintf("%s: taken from %s, %s", j.Soname, j.JetPack, j.Path)
}

// jetsonL4T names the host when it is a Jetson whose CUDA is the L4T
// build (up to CUDA 12), where NVIDIA's aarch64 wheels (SBSA builds) do
// not run; "" for any other host.
func jetsonL4T(h *platform.Host, cudaMajor int) string {
	if h == nil || !h.L4TCUDA12(cudaMajor) {
		return ""
	}
	s := h.Name
	if h.L4T != "" {
		s += " with L4T " + h.L4T
	}
	return s
}
