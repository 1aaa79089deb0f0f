package gpuarch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/rootfs"
)

// Where a device's compute capability was read.
const (
	SourceNVML       = "nvml"        // the driver's NVML: nvmlDeviceGetCudaComputeCapability
	SourcePCI        = "pci"         // the PCI device ID of /sys/bus/pci/devices, through the device table
	SourceDeviceTree = "device-tree" // a Jetson's /proc/device-tree/compatible, through the device table
	SourceFlag       = "--sm"        // given on the command line
)

// GPU is one GPU a source found.
type GPU struct {
	Index int    `json:"index"`
	Name  string `json:"name,omitempty"`
	CC    CC     `json:"cc"`
	// PCIID is "10de:2330"; Address the PCI address (0000:17:00.0).
	PCIID   string `json:"pci_id,omitempty"`
	Address string `json:"pci_address,omitempty"`
}

// SourceResult is what one source said.
type SourceResult struct {
	Source string `json:"source"`
	GPUs   []GPU  `json:"gpus,omitempty"`
	// Via says how NVML was reached (this binary, or python3's ctypes).
	Via string `json:"via,omitempty"`
	// DriverCUDA is the newest CUDA the driver runs (NVML).
	DriverCUDA *Version `json:"driver_cuda,omitempty"`
	// Error says why the source found nothing.
	Error string `json:"error,omitempty"`
}

// Device is the device coverage is judged for, and how it was found.
type Device struct {
	CC     CC     `json:"cc"`
	Name   string `json:"name,omitempty"`
	Source string `json:"source"`
	// DriverCUDA is the newest CUDA release the driver runs; nil when
	// unknown (PTX is then judged without the driver's version).
	DriverCUDA *Version `json:"driver_cuda,omitempty"`
	// Note explains a choice: GPUs of several compute capabilities, a
	// renamed architecture.
	Note string `json:"note,omitempty"`
	// Sources are every source's answer, in the order they are trusted.
	Sources []SourceResult `json:"sources,omitempty"`
}

// MarshalJSON writes the compute capability as null when it is unknown.
func (d Device) MarshalJSON() ([]byte, error) {
	type plain Device
	out := struct {
		CC *CC `json:"cc"`
		plain
	}{plain: plain(d)}
	if d.Known() {
		out.CC = &d.CC
	}
	return json.Marshal(out)
}

// Driver is the driver's CUDA release, zero when unknown.
func (d *Device) Driver() Version {
	if d == nil || d.DriverCUDA == nil {
		return Version{}
	}
	return *d.DriverCUDA
}

// Known reports a device whose compute capability is known.
func (d *Device) Known() bool { return d != nil && !d.CC.IsZero() }

// Failures are why the sources that failed gave nothing, each as
// "SOURCE: ERROR": what to show when no device is known.
func (d *Device) Failures() []string {
	if d == nil {
		return nil
	}
	var out []string
	for _, s := range d.Sources {
		if s.Error != "" {
			out = append(out, s.Source+": "+s.Error)
		}
	}
	return out
}

// Exec runs a command and returns its standard output.
type Exec func(ctx context.Context, argv []string) ([]byte, error)

// DetectOptions configure Detect.
type DetectOptions struct {
	// Root is the system whose /sys and /proc are read ("" for this host).
	Root string
	// NVMLCommand runs the NVML query (NVMLChild, or python3 with
	// NVMLScript); nil skips NVML (under a root, whose GPU is not this
	// machine's).
	NVMLCommand []string
	// Via describes NVMLCommand for the report.
	Via string
	// Exec runs NVMLCommand (RunCommand when nil).
	Exec Exec
	// Timeout bounds the NVML query (DefaultNVMLTimeout when zero):
	// nvmlInit can take seconds on a large node without persistence mode.
	Timeout time.Duration
	Tables  *Tables
}

// DefaultNVMLTimeout bounds the NVML query.
const DefaultNVMLTimeout = 30 * time.Second

// Detect finds the compute capability of the device: from NVML, as
// nvidia-smi --query-gpu=compute_cap reports it; else from the PCI device
// IDs through the device table; else from a Jetson's device tree. Never
// from cuInit, which fails (999) in containers where NVML works. Every
// source is asked, so that the report can show where they disagree.
func Detect(ctx context.Context, opts DetectOptions) (*Device, error) {
	t := opts.Tables
	if t == nil {
		var err error
		if t, err = LoadTables(); err != nil {
			return nil, err
		}
	}
	var results []SourceResult
	if len(opts.NVMLCommand) > 0 {
		results = append(results, queryNVML(ctx, opts))
	}
	results = append(results, fromPCI(opts.Root, t), fromDeviceTree(opts.Root, t))
	dev := &Device{Sources: results}
	for _, r := range results {
		if r.DriverCUDA != nil && dev.DriverCUDA == nil {
			dev.DriverCUDA = r.DriverCUDA
		}
		if len(r.GPUs) == 0 || !dev.CC.IsZero() {
			continue
		}
		g := r.GPUs[0]
		dev.CC, dev.Name, dev.Source = g.CC, g.Name, r.Source
		var others []string
		for _, o := range r.GPUs[1:] {
			if o.CC != g.CC && !containsString(others, o.CC.String()) {
				others = append(others, o.CC.String())
			}
		}
		if len(others) > 0 {
			dev.Note = fmt.Sprintf("GPUs of several compute capabilities (%s, and %s): coverage is judged for GPU %d; --sm judges another", g.CC, strings.Join(others, ", "), g.Index)
		}
	}
	if dev.Known() {
		if k := t.ByCC(dev.CC); k != nil && k.Note != "" && dev.Note == "" {
			dev.Note = k.Name + ": " + k.Note
		}
	}
	return dev, nil
}

// FromFlag is the device --sm names, with no source asked.
func FromFlag(cc CC, k *KnownDevice) *Device {
	d := &Device{CC: cc, Source: SourceFlag}
	if k != nil {
		d.Name = k.Name
		d.Note = k.Note
	}
	return d
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// readRoot reads a small file of the system under root. Every read of
// another system's files goes through readRoot and listRoot, that is
// through rootfs: links resolve inside the root, and only regular files are
// read.
func readRoot(root, p string, limit int64) ([]byte, error) {
	return rootfs.ReadFile(root, p, limit)
}

// listRoot lists a directory of the system under root.
func listRoot(root, p string) ([]os.DirEntry, error) {
	r, err := rootfs.Open(root)
	if err != nil {
		return nil, err
	}
	return r.ReadDir(p)
}

// maxPCIDevices bounds the devices looked at.
const maxPCIDevices = 1024

// fromPCI reads vendor, class and device of every PCI device: NVIDIA's
// display controllers (class 0x03), through the device table.
func fromPCI(root string, t *Tables) SourceResult {
	r := SourceResult{Source: SourcePCI}
	const dir = "/sys/bus/pci/devices"
	ents, err := listRoot(root, dir)
	if err != nil {
		r.Error = "cannot list " + dir + ": " + rootfs.Reason(err)
		return r
	}
	if len(ents) > maxPCIDevices {
		ents = ents[:maxPCIDevices]
	}
	var unknown []string
	for _, e := range ents {
		read := func(attr string) (uint64, bool) {
			b, err := readRoot(root, path.Join(dir, e.Name(), attr), 4096)
			if err != nil {
				return 0, false
			}
			v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 32)
			return v, err == nil
		}
		vendor, ok := read("vendor")
		if !ok || vendor != 0x10de {
			continue
		}
		class, ok := read("class")
		if !ok || class>>16 != 0x03 {
			continue // NVSwitch, audio and USB functions of a card
		}
		id, ok := read("device")
		if !ok || id > 0xffff {
			continue
		}
		pciID := fmt.Sprintf("10de:%04x", id)
		k := t.ByPCI(uint16(id))
		if k == nil {
			unknown = append(unknown, pciID)
			continue
		}
		r.GPUs = append(r.GPUs, GPU{Index: len(r.GPUs), Name: k.Name, CC: k.cc, PCIID: pciID, Address: e.Name()})
	}
	sort.SliceStable(r.GPUs, func(i, j int) bool { return r.GPUs[i].Address < r.GPUs[j].Address })
	for i := range r.GPUs {
		r.GPUs[i].Index = i
	}
	switch {
	case len(unknown) > 0 && len(r.GPUs) == 0:
		r.Error = "NVIDIA GPU " + strings.Join(unknown, ", ") + " is not in the device table"
	case len(unknown) > 0:
		r.Error = "also NVIDIA GPU " + strings.Join(unknown, ", ") + ", not in the device table"
	case len(r.GPUs) == 0:
		r.Error = "no NVIDIA display controller in " + dir
	}
	return r
}

// fromDeviceTree reads a Jetson's SoC from the device tree.
func fromDeviceTree(root string, t *Tables) SourceResult {
	r := SourceResult{Source: SourceDeviceTree}
	var data []byte
	var err error
	for _, p := range []string{"/proc/device-tree/compatible", "/sys/firmware/devicetree/base/compatible"} {
		if data, err = readRoot(root, p, 4096); err == nil {
			break
		}
	}
	if err != nil {
		r.Error = "no device tree (not a Jetson)"
		return r
	}
	for _, s := range bytes.Split(data, []byte{0}) {
		if k := t.ByTegra(string(s)); k != nil {
			r.GPUs = []GPU{{Name: k.Name, CC: k.cc}}
			return r
		}
	}
	r.Error = "the device tree names no Jetson SoC of the device table"
	return r
}

// RunCommand runs argv with this process's environment and returns its
// standard output; a command that exits non-zero but printed something
// still answers (the protocol says what failed).
func RunCommand(ctx context.Context, argv []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.Bytes(), fmt.Errorf("%s did not answer in time", path.Base(argv[0]))
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, err
	}
	if err != nil && out.Len() == 0 {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return nil, fmt.Errorf("%s: %v: %s", path.Base(argv[0]), err, msg)
	}
	return out.Bytes(), nil
}
