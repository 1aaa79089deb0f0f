package doctor

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/libprobe"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// fakeHost is a machine built in a directory: the files doctor reads under
// System.Root, an environment, an access table and a probe.
type fakeHost struct {
	t      *testing.T
	root   string
	env    map[string]string
	denied map[string]bool // guest paths access(2) refuses
	exec   libprobe.Exec
	// confDirs are the directories of /etc/ld.so.conf.d, searched before
	// the default ones when the cache is built; noCache leaves the host
	// without /etc/ld.so.cache (ldconfig never ran).
	confDirs []string
	noCache  bool
}

const interp = "/lib64/ld-linux-x86-64.so.2"

// newBareHost is a Linux system without any NVIDIA software: a loader, a
// libc, a shell to model the loader with.
func newBareHost(t *testing.T) *fakeHost {
	t.Helper()
	h := &fakeHost{t: t, root: t.TempDir(), env: map[string]string{}, denied: map[string]bool{}}
	h.elf(interp, elfwrite.Spec{Soname: "ld-linux-x86-64.so.2", VersionDefs: []string{"GLIBC_2.2.5", "GLIBC_2.3"}})
	h.elf("/lib64/libc.so.6", elfwrite.Spec{
		Soname: "libc.so.6", Interp: interp, Needed: []string{"ld-linux-x86-64.so.2"},
		VersionDefs: []string{"GLIBC_2.2.5", "GLIBC_2.34", "GLIBC_2.38"},
		Symbols: []elfwrite.Symbol{
			{Name: "dlsym", Defined: true, Func: true, Version: "GLIBC_2.34"},
			{Name: "malloc", Defined: true, Func: true, Version: "GLIBC_2.2.5"},
		},
	})
	h.elf("/bin/sh", elfwrite.Spec{Type: elf.ET_DYN, Flags1: elf.DF_1_PIE, Interp: interp, Needed: []string{"libc.so.6"}})
	h.dir("/usr/lib64")
	return h
}

// newGPUHost is a healthy host: driver 580.95.05, two GPUs with their
// device files, the driver's libcuda and libnvidia-ml in /usr/lib64.
func newGPUHost(t *testing.T) *fakeHost {
	h := newBareHost(t)
	h.kernel("580.95.05", true)
	h.devices(2, true)
	h.driverLibs("/usr/lib64", "580.95.05")
	return h
}

func (h *fakeHost) path(guest string) string { return filepath.Join(h.root, guest) }

func (h *fakeHost) dir(guest string) {
	h.t.Helper()
	if err := os.MkdirAll(h.path(guest), 0o755); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) file(guest, body string) {
	h.t.Helper()
	h.dir(filepath.Dir(guest))
	if err := os.WriteFile(h.path(guest), []byte(body), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) remove(guest string) {
	h.t.Helper()
	if err := os.RemoveAll(h.path(guest)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) elf(guest string, spec elfwrite.Spec) {
	h.t.Helper()
	if err := elfwrite.Write(h.path(guest), spec); err != nil {
		h.t.Fatal(err)
	}
}

func (h *fakeHost) link(guest, target string) {
	h.t.Helper()
	h.dir(filepath.Dir(guest))
	if err := os.Symlink(target, h.path(guest)); err != nil {
		h.t.Fatal(err)
	}
}

// kernel writes /proc/driver/nvidia/version as the driver does.
func (h *fakeHost) kernel(v string, open bool) {
	line := "NVRM version: NVIDIA UNIX x86_64 Kernel Module  " + v + "  Tue Sep 23 09:46:41 UTC 2025\n"
	if open {
		line = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  " + v + "  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:46:41 UTC 2025\n"
	}
	h.file("/proc/driver/nvidia/version", line+"GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
}

func (h *fakeHost) devices(n int, uvm bool) {
	h.file("/dev/nvidiactl", "")
	for i := 0; i < n; i++ {
		h.file("/dev/nvidia"+itoa(i), "")
		h.file("/proc/driver/nvidia/gpus/0000:0"+itoa(i)+":00.0/information", "Model: NVIDIA H100\n")
		h.pciGPU("0000:0"+itoa(i)+":00.0", "0x2330") // H100 SXM5
	}
	if uvm {
		h.file("/dev/nvidia-uvm", "")
		h.file("/dev/nvidia-uvm-tools", "")
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// driverSymbols are the entry points of a real libcuda.so.1.
func driverSymbols() []elfwrite.Symbol {
	var s []elfwrite.Symbol
	for _, n := range []string{"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuGetProcAddress", "cuGetProcAddress_v2", "cuMemAlloc_v2"} {
		s = append(s, elfwrite.Symbol{Name: n, Defined: true, Func: true})
	}
	return s
}

// driverLibs installs a driver's libcuda and libnvidia-ml in dir, named and
// linked as the driver packages do.
func (h *fakeHost) driverLibs(dir, v string) {
	h.elf(dir+"/libcuda.so."+v, elfwrite.Spec{Soname: "libcuda.so.1", Needed: []string{"libc.so.6"}, Symbols: driverSymbols()})
	h.link(dir+"/libcuda.so.1", "libcuda.so."+v)
	h.elf(dir+"/libnvidia-ml.so."+v, elfwrite.Spec{Soname: "libnvidia-ml.so.1", Needed: []string{"libc.so.6"},
		Symbols: []elfwrite.Symbol{{Name: "nvmlInit_v2", Defined: true, Func: true}, {Name: "nvmlDeviceGetCount_v2", Defined: true, Func: true}}})
	h.link(dir+"/libnvidia-ml.so.1", "libnvidia-ml.so."+v)
	h.elf(dir+"/libnvidia-ptxjitcompiler.so."+v, elfwrite.Spec{Soname: "libnvidia-ptxjitcompiler.so.1", Needed: []string{"libc.so.6"}})
	h.link(dir+"/libnvidia-ptxjitcompiler.so.1", "libnvidia-ptxjitcompiler.so."+v)
}

// cudart is a libcudart.so.N with versioned definitions.
func cudart(major string, syms ...string) elfwrite.Spec {
	so := "libcudart.so." + major
	spec := elfwrite.Spec{Soname: so, Needed: []string{"libc.so.6"}, VersionDefs: []string{so}}
	for _, s := range syms {
		spec.Symbols = append(spec.Symbols, elfwrite.Symbol{Name: s, Defined: true, Func: true, Version: so})
	}
	return spec
}

// cudartUser is a library that links libcudart.so.N and imports syms from
// it, as nvcc-built shared libraries do.
func cudartUser(soname, major string, rpath *string, syms ...string) elfwrite.Spec {
	so := "libcudart.so." + major
	spec := elfwrite.Spec{
		Soname: soname, Needed: []string{so, "libc.so.6"}, RPath: rpath,
		VersionNeeds: []elfwrite.VersionNeed{{File: so, Versions: []string{so}}},
	}
	for _, s := range syms {
		spec.Symbols = append(spec.Symbols, elfwrite.Symbol{Name: s, Func: true, Version: so})
	}
	return spec
}

func (h *fakeHost) lookup(k string) (string, bool) {
	v, ok := h.env[k]
	return v, ok
}

func (h *fakeHost) access(p string, mode uint32) error {
	rel, err := filepath.Rel(h.root, p)
	if err == nil && h.denied["/"+rel] {
		return os.ErrPermission
	}
	return nil
}

func (h *fakeHost) options() Options {
	return Options{System: System{Root: h.root, LookupEnv: h.lookup, Access: h.access, Exec: h.exec}}
}

func (h *fakeHost) run(opts Options) *Report {
	h.t.Helper()
	if !h.noCache {
		h.ldconfig()
	}
	rep, err := Run(context.Background(), opts)
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

func (h *fakeHost) report() *Report { return h.run(h.options()) }

func (h *fakeHost) reportFor(target string) *Report {
	opts := h.options()
	opts.Target = h.path(target)
	return h.run(opts)
}

func get(t *testing.T, r *Report, id string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no %s check in %+v", id, r.Checks)
	return Check{}
}

// expect asserts a check's verdict and the words its evidence and advice
// must carry.
func expect(t *testing.T, r *Report, id string, s Status, evidence []string, advice ...string) Check {
	t.Helper()
	c := get(t, r, id)
	if c.Status != s {
		t.Errorf("%s: status %s, want %s\n  evidence: %s\n  advice: %s", id, c.Status, s, c.Evidence, c.Advice)
	}
	for _, w := range evidence {
		if !strings.Contains(c.Evidence, w) {
			t.Errorf("%s: evidence %q lacks %q", id, c.Evidence, w)
		}
	}
	for _, w := range advice {
		if !strings.Contains(c.Advice, w) {
			t.Errorf("%s: advice %q lacks %q", id, c.Advice, w)
		}
	}
	if s != OK && c.Advice == "" && len(advice) > 0 {
		t.Errorf("%s: no advice", id)
	}
	return c
}

// onlyFailing asserts which checks do not pass; every other one must be ok.
func onlyFailing(t *testing.T, r *Report, ids ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, c := range r.Checks {
		if c.Status != OK && !want[c.ID] {
			t.Errorf("%s: unexpectedly %s: %s (%s)", c.ID, c.Status, c.Evidence, c.Advice)
		}
		if c.Status == OK && want[c.ID] {
			t.Errorf("%s: unexpectedly ok: %s", c.ID, c.Evidence)
		}
	}
}

// ldconfig writes /etc/ld.so.cache as ldconfig would for the libraries of
// confDirs and the default directories: each object's soname, mapped to
// the file of that name in its directory.
func (h *fakeHost) ldconfig() {
	h.t.Helper()
	type entry struct{ key, value string }
	var entries []entry
	seen := map[string]bool{}
	for _, dir := range append(slices.Clone(h.confDirs), "/lib64", "/usr/lib64") {
		ents, _ := os.ReadDir(h.path(dir))
		for _, e := range ents {
			info, err := elfscan.ReadInfo(h.path(path.Join(dir, e.Name())))
			if err != nil || info.Soname == "" || seen[info.Soname] {
				continue
			}
			if _, err := os.Stat(h.path(path.Join(dir, info.Soname))); err != nil {
				continue
			}
			seen[info.Soname] = true
			entries = append(entries, entry{info.Soname, path.Join(dir, info.Soname)})
		}
	}
	// ld.so searches the entries with _dl_cache_libcmp, descending.
	sort.Slice(entries, func(i, j int) bool { return libcmpTest(entries[i].key, entries[j].key) > 0 })
	const headerSize, entrySize = 48, 24
	var strs bytes.Buffer
	strBase := headerSize + entrySize*len(entries)
	b := make([]byte, strBase)
	copy(b, "glibc-ld.so.cache1.1")
	binary.LittleEndian.PutUint32(b[20:], uint32(len(entries)))
	b[28] = 2 // little-endian
	for i, e := range entries {
		at := headerSize + i*entrySize
		binary.LittleEndian.PutUint32(b[at:], 0x0303) // libc6, x86-64
		binary.LittleEndian.PutUint32(b[at+4:], uint32(strBase+strs.Len()))
		strs.WriteString(e.key + "\x00")
		binary.LittleEndian.PutUint32(b[at+8:], uint32(strBase+strs.Len()))
		strs.WriteString(e.value + "\x00")
	}
	binary.LittleEndian.PutUint32(b[24:], uint32(strs.Len()))
	h.file("/etc/ld.so.cache", string(append(b, strs.Bytes()...)))
}

// libcmpTest is glibc's _dl_cache_libcmp: runs of digits compare as numbers.
func libcmpTest(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			i, j := 0, 0
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			x, _ := strconv.Atoi(a[:i])
			y, _ := strconv.Atoi(b[:j])
			if x != y {
				return cmpInt(x, y)
			}
			a, b = a[i:], b[j:]
			continue
		}
		if isDigit(a[0]) {
			return 1
		}
		if isDigit(b[0]) {
			return -1
		}
		if a[0] != b[0] {
			return cmpInt(int(a[0]), int(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return cmpInt(len(a), len(b))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func cmpInt(x, y int) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
