package gpuarch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
)

// NVML's answer takes a subprocess, and python3's ctypes with nvmlInit
// costs a tenth of a second or more, on every run of doctor: the answer is
// kept (DetectOptions.Cache) while nothing it depends on changes. What it
// depends on, read on every run (a few small files):
//
//   - the driver: /proc/driver/nvidia/version, its text;
//   - the GPUs: NVIDIA's PCI functions (address, device, class) and the
//     /dev/nvidia* device files (a container sees only those it was given);
//   - the query: its command line (the script's text with it), the
//     program it runs (this binary or the interpreter) and the variables
//     the dynamic loader reads (LD_*), and the machine's name;
//
// and, by stat, the program, the libnvidia-ml.so.1 that answered,
// /etc/ld.so.cache, /etc/ld.so.preload and the LD_LIBRARY_PATH directories
// (a library added where the loader would find it first changes its
// directory's stamp). Only a whole answer is kept: a query that failed,
// found no GPU or did not say which library it loaded runs again next
// time. Without /proc/driver/nvidia/version or the PCI device list (a
// container without the driver's proc files) nothing is kept: the driver
// could change unseen.

// nvmlKeep bounds the NVML answers kept (one per machine and query).
const nvmlKeep = 16

// keptNVML is NVML's answer as the cache keeps it.
type keptNVML struct {
	Key    string
	Inputs factcache.Inputs
	At     time.Time
	Answer SourceResult
}

// nvml answers from the cache when it can, else queries NVML and keeps a
// whole answer.
func nvml(ctx context.Context, opts DetectOptions, pci []pciFunction, pciErr error) SourceResult {
	key, keyed := "", false
	if opts.Cache.Path() != "" && pciErr == nil {
		key, keyed = nvmlKey(opts, pci)
	}
	name := factcache.Key("nvml", key)
	if keyed {
		var kept keptNVML
		if opts.Cache.Load(name, &kept) && kept.Key == key && wholeAnswer(kept.Answer) && kept.Inputs.Unchanged() {
			r := kept.Answer
			at := kept.At
			r.Via, r.KeptFrom = opts.Via, &at
			return r
		}
	}
	at := time.Now().UTC().Truncate(time.Second)
	r, o := queryNVML(ctx, opts)
	if !keyed || o == nil || !o.Done || !wholeAnswer(r) {
		return r
	}
	kept := keptNVML{Key: key, At: at, Answer: r, Inputs: factcache.Capture(nvmlInputs(opts.NVMLCommand, r.Library))}
	kept.Answer.Via = ""
	if opts.Cache.Save(name, kept) == nil {
		opts.Cache.Trim("nvml-", nvmlKeep)
	}
	return r
}

// wholeAnswer reports an answer worth keeping: GPUs, no error, and the
// library that gave it.
func wholeAnswer(r SourceResult) bool {
	return r.Error == "" && len(r.GPUs) > 0 && r.Library != "" && r.KeptFrom == nil
}

// nvmlKey is the text of what NVML's answer depends on besides files;
// false when part of it cannot be read.
func nvmlKey(opts DetectOptions, pci []pciFunction) (string, bool) {
	version, err := readRoot(opts.Root, "/proc/driver/nvidia/version", 64<<10)
	if err != nil {
		return "", false
	}
	devs, err := listRoot(opts.Root, "/dev")
	if err != nil {
		return "", false
	}
	host, _ := os.Hostname()
	parts := []string{"nvml 1", "host=" + host, "root=" + opts.Root, "program=" + program(opts.NVMLCommand),
		"command=" + strings.Join(opts.NVMLCommand, "\x00"), "driver=" + string(version)}
	for _, f := range pci {
		parts = append(parts, fmt.Sprintf("pci=%s %#04x %#06x", f.Address, f.Device, f.Class))
	}
	for _, d := range devs {
		if strings.HasPrefix(d.Name(), "nvidia") {
			parts = append(parts, "dev="+d.Name())
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LD_") {
			env = append(env, "env="+kv)
		}
	}
	sort.Strings(env)
	return strings.Join(append(parts, env...), "\n"), true
}

// nvmlInputs are the files NVML's answer depends on, stamped: the
// query's program, the library that answered, and what decides which
// library the loader finds.
func nvmlInputs(argv []string, library string) []string {
	in := []string{program(argv), library, "/etc/ld.so.cache", "/etc/ld.so.preload"}
	for _, dir := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
		if filepath.IsAbs(dir) {
			in = append(in, dir)
		}
	}
	return in
}

// program is the file the query runs, as an absolute path: argv[0] found
// on PATH when it names no directory.
func program(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	p := argv[0]
	if !strings.Contains(p, "/") {
		if found, err := exec.LookPath(p); err == nil {
			p = found
		}
	}
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return p
}
