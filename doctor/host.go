package doctor

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/cudadeps/cudadeps/internal/rootfs"
	"github.com/cudadeps/cudadeps/platform"
)

// hostFacts is what the files of the host say, before any loading.
type hostFacts struct {
	// platform is the kind of host, with its evidence; the NVIDIA kernel
	// module's version is read there.
	platform   *platform.Host
	kernel     version // NVIDIA kernel module version
	kernelOpen bool    // the open kernel module
	kernelErr  string  // why the version is unknown
	wsl        bool    // WSL2 GPU paravirtualization (/dev/dxg)
	procGPUs   []string

	ctl      bool // /dev/nvidiactl
	uvm      bool // /dev/nvidia-uvm
	gpuNodes []int
	nvgpu    string // the Jetson integrated GPU's node, when present
	denied   []string

	container containerInfo
}

func (s System) exists(p string) bool { return s.root.Exists(p) }

var gpuNodeRE = regexp.MustCompile(`^nvidia(\d+)$`)

// gatherHost reads the host's files: its kind (for the target's machine,
// EM_NONE without a target), the driver's version, the device nodes and
// the container it runs in. Every file is read through the root.
func gatherHost(sys System, machine elf.Machine) *hostFacts {
	h := &hostFacts{platform: platform.Detect(platform.Probe{Root: sys.root, Machine: machine})}
	h.readKernel()
	h.wsl = sys.exists("/dev/dxg")
	if ents, err := sys.root.ReadDir("/proc/driver/nvidia/gpus"); err == nil {
		for _, e := range ents {
			h.procGPUs = append(h.procGPUs, e.Name())
		}
	}
	h.readDevices(sys)
	h.container = detectContainer(sys)
	return h
}

// readKernel takes the kernel module's version from the platform's
// evidence, or says why there is none.
func (h *hostFacts) readKernel() {
	if h.platform.Driver != "" {
		h.kernel, _ = parseVersion(h.platform.Driver)
		h.kernelOpen = h.platform.DriverOpen
		return
	}
	for _, e := range h.platform.Evidence {
		if e.Source != platform.DriverFile {
			continue
		}
		switch {
		case e.Found:
			h.kernelErr = platform.DriverFile + " names no kernel module version"
		case e.Says == "absent":
			h.kernelErr = "no " + platform.DriverFile + " (the nvidia kernel module is not loaded, or this is not an NVIDIA dGPU host)"
		default:
			h.kernelErr = "cannot read " + platform.DriverFile + ": " + strings.TrimPrefix(e.Says, "unreadable: ")
		}
	}
}

// readDevices finds the device nodes and those the user may not open.
func (h *hostFacts) readDevices(sys System) {
	h.ctl = sys.exists("/dev/nvidiactl")
	h.uvm = sys.exists("/dev/nvidia-uvm")
	if ents, err := sys.root.ReadDir("/dev"); err == nil {
		for _, e := range ents {
			if m := gpuNodeRE.FindStringSubmatch(e.Name()); m != nil {
				n, _ := strconv.Atoi(m[1])
				h.gpuNodes = append(h.gpuNodes, n)
			}
		}
	}
	sort.Ints(h.gpuNodes)
	for _, n := range []string{"/dev/nvhost-ctrl-gpu", "/dev/nvgpu/igpu0/ctrl"} {
		if sys.exists(n) {
			h.nvgpu = n
			break
		}
	}
	var nodes []string
	if h.ctl {
		nodes = append(nodes, "/dev/nvidiactl")
	}
	for _, n := range h.gpuNodes {
		nodes = append(nodes, fmt.Sprintf("/dev/nvidia%d", n))
	}
	if h.uvm {
		nodes = append(nodes, "/dev/nvidia-uvm")
	}
	for _, n := range nodes {
		host, err := sys.root.Resolve(n)
		if err == nil {
			err = sys.Access(host, 4|2)
		}
		if err != nil {
			h.denied = append(h.denied, n+" ("+deviceOwner(sys, n)+")")
		}
	}
}

// deviceOwner describes a device node's mode and group, for advice.
func deviceOwner(sys System, n string) string {
	st, err := sys.root.Stat(n)
	if err != nil {
		return rootfs.Reason(err)
	}
	desc := st.Mode().Perm().String()
	if stat, ok := st.Sys().(*syscall.Stat_t); ok {
		group := strconv.Itoa(int(stat.Gid))
		if name := groupName(sys, stat.Gid); name != "" {
			group = name
		}
		desc += ", group " + group
	}
	return desc
}

// groupName reads /etc/group of the root for a gid.
func groupName(sys System, gid uint32) string {
	data, err := sys.root.ReadFile("/etc/group", 16<<20)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && f[2] == strconv.FormatUint(uint64(gid), 10) {
			return f[0]
		}
	}
	return ""
}

// containerInfo says which container engine, if any, doctor runs under.
type containerInfo struct {
	kind     string // docker, podman, kubernetes, apptainer, containerd, lxc, systemd-nspawn
	evidence string
}

func detectContainer(sys System) containerInfo {
	look := func(k string) string { v, _ := sys.LookupEnv(k); return v }
	switch {
	case look("APPTAINER_CONTAINER") != "" || look("SINGULARITY_CONTAINER") != "":
		return containerInfo{"apptainer", "$APPTAINER_CONTAINER"}
	case sys.exists("/.singularity.d"):
		return containerInfo{"apptainer", "/.singularity.d"}
	case look("KUBERNETES_SERVICE_HOST") != "":
		return containerInfo{"kubernetes", "$KUBERNETES_SERVICE_HOST"}
	case sys.exists("/run/.containerenv"):
		return containerInfo{"podman", "/run/.containerenv"}
	case sys.exists("/.dockerenv"):
		return containerInfo{"docker", "/.dockerenv"}
	}
	if v := look("container"); v != "" {
		return containerInfo{v, "$container=" + v}
	}
	if data, err := sys.root.ReadFile("/proc/1/cgroup", 1<<20); err == nil {
		s := string(data)
		for _, c := range []struct{ needle, kind string }{
			{"kubepods", "kubernetes"}, {"libpod", "podman"}, {"docker", "docker"},
			{"containerd", "containerd"}, {"/lxc/", "lxc"},
		} {
			if strings.Contains(s, c.needle) {
				return containerInfo{c.kind, "/proc/1/cgroup"}
			}
		}
	}
	return containerInfo{}
}

// runtimeAdvice is how to give a container of this kind the GPU (seed of
// many reports: the GPU works on the host, not in the container).
func (c containerInfo) runtimeAdvice() string {
	switch c.kind {
	case "docker", "containerd":
		return "restart the container with the NVIDIA runtime: docker run --gpus all (nvidia-container-toolkit on the host), or --runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility"
	case "podman":
		return "restart the container with the GPU: podman run --device nvidia.com/gpu=all (CDI spec from nvidia-ctk cdi generate on the host)"
	case "kubernetes":
		return "request the GPU in the pod spec (resources.limits: nvidia.com/gpu: 1) with the NVIDIA device plugin or GPU operator on the node"
	case "apptainer":
		return "run the container with --nv (or --nvccli), which binds the host's driver libraries and devices"
	}
	return "start the container with the NVIDIA container runtime so that /dev/nvidia* and the driver's libcuda.so.1 are passed in"
}

// gpuAdvice is runtimeAdvice in short, for checks that see one symptom.
func (c containerInfo) gpuAdvice() string {
	switch c.kind {
	case "docker", "containerd":
		return "restart the container with the NVIDIA runtime (docker run --gpus all; see the container check)"
	case "podman":
		return "restart the container with --device nvidia.com/gpu=all (see the container check)"
	case "kubernetes":
		return "request nvidia.com/gpu in the pod spec (see the container check)"
	case "apptainer":
		return "run the container with --nv"
	}
	return "start the container with the NVIDIA container runtime (see the container check)"
}

func (c containerInfo) name() string {
	switch c.kind {
	case "docker":
		return "a Docker container"
	case "podman":
		return "a Podman container"
	case "kubernetes":
		return "a Kubernetes pod"
	case "apptainer":
		return "an Apptainer/Singularity container"
	}
	return "a container (" + c.kind + ")"
}
