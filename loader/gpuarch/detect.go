package gpuarch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/libprobe"
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
	// Via says how NVML was reached (this binary, or python3's ctypes);
	// Library is the file libnvidia-ml.so.1 was loaded from.
	Via     string `json:"via,omitempty"`
	Library string `json:"library,omitempty"`
	// KeptFrom is when NVML gave this answer, when it was kept in the
	// cache and nothing it depends on has changed since.
	KeptFrom *time.Time `json:"kept_from,omitempty"`
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
	// Exec runs NVMLCommand (libprobe.RunCommand(nil) when nil).
	Exec libprobe.Exec
	// Timeout bounds the NVML query (DefaultNVMLTimeout when zero):
	// nvmlInit can take seconds on a large node without persistence mode.
	Timeout time.Duration
	// Cache keeps NVML's answer while nothing it depends on changes (the
	// driver, the GPUs, the NVML library, the query's program); the zero
	// Dir asks NVML every time.
	Cache  factcache.Dir
	Tables *Tables
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
	pci, pciErr := listNVIDIA(opts.Root)
	if len(opts.NVMLCommand) > 0 {
		results = append(results, nvml(ctx, opts, pci, pciErr))
	}
	results = append(results, fromPCI(pci, pciErr, t), fromDeviceTree(opts.Root, t))
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

// pciDir lists the PCI devices.
const pciDir = "/sys/bus/pci/devices"

// pciFunction is one NVIDIA PCI function: a GPU, an NVSwitch, a GPU's
// audio or USB function.
type pciFunction struct {
	Address       string // 0000:17:00.0
	Device, Class uint64
}

// listNVIDIA reads vendor, class and device of every PCI device, and
// keeps NVIDIA's, sorted by address.
func listNVIDIA(root string) ([]pciFunction, error) {
	ents, err := listRoot(root, pciDir)
	if err != nil {
		return nil, err
	}
	if len(ents) > maxPCIDevices {
		ents = ents[:maxPCIDevices]
	}
	var out []pciFunction
	for _, e := range ents {
		read := func(attr string) (uint64, bool) {
			b, err := readRoot(root, path.Join(pciDir, e.Name(), attr), 4096)
			if err != nil {
				return 0, false
			}
			v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(b)), "0x"), 16, 32)
			return v, err == nil
		}
		if vendor, ok := read("vendor"); !ok || vendor != 0x10de {
			continue
		}
		class, ok1 := read("class")
		id, ok2 := read("device")
		if ok1 && ok2 && id <= 0xffff {
			out = append(out, pciFunction{Address: e.Name(), Device: id, Class: class})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out, nil
}

// fromPCI looks NVIDIA's display controllers (class 0x03) up in the device
// table.
func fromPCI(pci []pciFunction, listErr error, t *Tables) SourceResult {
	r := SourceResult{Source: SourcePCI}
	if listErr != nil {
		r.Error = "cannot list " + pciDir + ": " + rootfs.Reason(listErr)
		return r
	}
	var unknown []string
	for _, f := range pci {
		if f.Class>>16 != 0x03 {
			continue // NVSwitch, audio and USB functions of a card
		}
		pciID := fmt.Sprintf("10de:%04x", f.Device)
		k := t.ByPCI(uint16(f.Device))
		if k == nil {
			unknown = append(unknown, pciID)
			continue
		}
		r.GPUs = append(r.GPUs, GPU{Index: len(r.GPUs), Name: k.Name, CC: k.cc, PCIID: pciID, Address: f.Address})
	}
	switch {
	case len(unknown) > 0 && len(r.GPUs) == 0:
		r.Error = "NVIDIA GPU " + strings.Join(unknown, ", ") + " is not in the device table"
	case len(unknown) > 0:
		r.Error = "also NVIDIA GPU " + strings.Join(unknown, ", ") + ", not in the device table"
	case len(r.GPUs) == 0:
		r.Error = "no NVIDIA display controller in " + pciDir
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
