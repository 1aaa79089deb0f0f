package gpuarch

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/internal/workers"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// File is one library whose coverage is asked for.
type File struct {
	// Path names it in the report (the loader's path); Host is where it is
	// read on this machine (they differ under a root).
	Path, Host string
	// Names are other names it answers to (its soname), for the builder
	// table.
	Names []string
}

// Report is the coverage of a set of libraries on one device. Its JSON
// form is documented in docs/coverage.md.
type Report struct {
	// Device is what was found out about the device; when its compute
	// capability is unknown the objects say only what they carry.
	Device  *Device  `json:"device"`
	Objects []Object `json:"objects"`
	Summary Summary  `json:"summary"`
}

// Object is one library: what it carries and, for a known device, the
// verdict.
type Object struct {
	Path       string     `json:"path"`
	Containers int        `json:"containers"`
	SASS       []CodeInfo `json:"sass"`
	PTX        []CodeInfo `json:"ptx"`
	// Other counts entries the driver does not load by itself, by kind
	// ("ir" for NVVM IR, else the kind number).
	Other map[string]int `json:"other,omitempty"`
	// Builds says how the library builds kernels at run time, when the
	// builder table knows it.
	Builds string `json:"builds_at_run_time,omitempty"`
	*Judgement
	// Error is why the file could not be read; it then carries nothing.
	Error string `json:"error,omitempty"`
}

// CodeInfo is Code in the report: "sm_90" or "compute_90" with its counts.
type CodeInfo struct {
	Arch    string `json:"arch"`
	ISA     string `json:"ptx_isa,omitempty"`
	Entries int    `json:"entries"`
	// Bytes is what the entries take in the file; Size their
	// uncompressed size, when the headers say.
	Bytes int64 `json:"bytes"`
	Size  int64 `json:"size,omitempty"`
	// VariantKnown is false when a header did not say whether the code is
	// an arch-specific build (then taken as plain).
	VariantKnown bool `json:"variant_known"`
}

// Summary counts the objects by verdict.
type Summary struct {
	Objects         int `json:"objects"`
	Native          int `json:"native"`
	JIT             int `json:"jit"`
	RuntimeCompiled int `json:"runtime_compiled"`
	None            int `json:"none"`
	NoCode          int `json:"no_gpu_code"`
	Unreadable      int `json:"unreadable"`
	// JITBytes is the PTX compiled at first use, over every object.
	JITBytes int64 `json:"jit_bytes"`
	// Containers and Entries count what was read.
	Containers int `json:"containers"`
	Entries    int `json:"entries"`
}

// Assess reads the fat binaries of files (each once, parallel bound
// jobs at a time; GOMAXPROCS when 0) and judges them for dev (nil or
// unknown: no verdicts). Objects come out sorted by path.
func Assess(ctx context.Context, dev *Device, files []File, t *Tables, parallel int) (*Report, error) {
	if t == nil {
		var err error
		if t, err = LoadTables(); err != nil {
			return nil, err
		}
	}
	// One read per file, whatever names it is listed under.
	uniq := map[string]int{}
	var list []File
	for _, f := range files {
		if i, ok := uniq[f.Path]; ok {
			list[i].Names = append(list[i].Names, f.Names...)
			continue
		}
		uniq[f.Path] = len(list)
		list = append(list, f)
	}
	objs := make([]Object, len(list))
	workers.Each(len(list), parallel, func(i int) {
		if ctx.Err() == nil {
			objs[i] = assessOne(dev, list[i], t)
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Path < objs[j].Path })
	rep := &Report{Objects: objs, Device: dev}
	for _, o := range objs {
		rep.Summary.add(o)
	}
	return rep, nil
}

func (s *Summary) add(o Object) {
	s.Objects++
	s.Containers += o.Containers
	for _, c := range o.SASS {
		s.Entries += c.Entries
	}
	for _, c := range o.PTX {
		s.Entries += c.Entries
	}
	for _, n := range o.Other {
		s.Entries += n
	}
	if o.Error != "" {
		s.Unreadable++
		return
	}
	if o.Judgement == nil {
		return
	}
	s.JITBytes += o.JITBytes
	switch o.Verdict {
	case Native:
		s.Native++
	case JIT:
		s.JIT++
	case RuntimeCompiled:
		s.RuntimeCompiled++
	case None:
		s.None++
	case NoCode:
		s.NoCode++
	}
}

func assessOne(dev *Device, f File, t *Tables) Object {
	o := Object{Path: f.Path, SASS: []CodeInfo{}, PTX: []CodeInfo{}}
	if strings.Contains(f.Host, ".whl!/") {
		o.Error = "a member of a wheel: coverage reads installed files only"
		return o
	}
	c, err := ReadFile(f.Host)
	if err != nil && !errors.Is(err, elfscan.ErrNotELF) {
		o.Error = err.Error()
		return o
	}
	if c == nil {
		c = &Carried{}
	}
	o.Containers = c.Containers
	for _, s := range c.SASS {
		o.SASS = append(o.SASS, CodeInfo{Arch: s.Target.SASS(), Entries: s.Entries, Bytes: s.Bytes, Size: s.Size, VariantKnown: s.VariantKnown})
	}
	for _, p := range c.PTX {
		o.PTX = append(o.PTX, CodeInfo{Arch: p.Target.PTX(), ISA: p.ISA.String(), Entries: p.Entries, Bytes: p.Bytes, Size: p.Size, VariantKnown: p.VariantKnown})
	}
	for k, n := range c.Other {
		if o.Other == nil {
			o.Other = map[string]int{}
		}
		o.Other[kindName(k)] += n
	}
	rt := t.Builder(append([]string{f.Path}, f.Names...)...)
	if rt != nil {
		o.Builds = rt.How
	}
	if dev.Known() {
		j := Judge(dev.CC, dev.Driver(), c, rt)
		o.Judgement = &j
	}
	return o
}

func kindName(k Kind) string {
	if k == KindIR {
		return "nvvm-ir"
	}
	return "kind-" + strconv.Itoa(int(k))
}
