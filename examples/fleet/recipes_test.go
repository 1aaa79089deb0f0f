// Package fleet_test runs the recipes of this directory: the Slurm
// prologue and the container entrypoint end to end against a registry
// that wants a login over TLS, and the Kubernetes manifests checked field
// by field (no cluster is at hand).
package fleet_test

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cudadeps/cudadeps/fleet/registry"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/internal/testkit/mirrortest"
	"github.com/cudadeps/cudadeps/internal/testkit/registrytest"
)

var build struct {
	once sync.Once
	path string
	err  error
}

// binary builds cudadeps once.
func binary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "cudadeps-recipes-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "cudadeps")
		if out, err := exec.Command("go", "build", "-o", build.path, "../../cmd/cudadeps").CombinedOutput(); err != nil {
			build.err = &buildError{string(out)}
		}
	})
	if build.err != nil {
		t.Fatalf("go build: %v", build.err)
	}
	return build.path
}

type buildError struct{ out string }

func (e *buildError) Error() string { return e.out }

func TestMain(m *testing.M) {
	code := m.Run()
	if build.path != "" {
		os.RemoveAll(filepath.Dir(build.path))
	}
	os.Exit(code)
}

// appTree is one node's application: a library that needs cuDSS beside
// the libcudart it ships.
func appTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libapp.so"), elfwrite.Spec{Soname: "libapp.so",
		Needed: []string{"libcudss.so.0", "libcudart.so.13", "libc.so.6"}, RunPath: elfwrite.Str("$ORIGIN")}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.Write(filepath.Join(dir, "app/lib/libcudart.so.13"), elfwrite.Spec{Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// site is a registry with a plan for appTree pushed at /fleet/app:v1.
type site struct {
	reg   *registrytest.Registry
	front *registrytest.Front
}

func newSite(t *testing.T) *site {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		// Not an oracle: the stand-in archives are x86_64, which another machine does not apply.
		t.Skip("the stand-in archives are x86_64")
	}
	reg := registrytest.Start(t, registrytest.Options{})
	nv := mirrortest.Serve(t, []mirrortest.Archive{{Component: "libcudss", Product: "cudss", Version: "0.9.9.9", Platform: "linux-x86_64", Variant: "cuda13", Machine: elf.EM_X86_64,
		Libs:  map[string]elfwrite.Spec{"libcudss.so.0.9.9": {Soname: "libcudss.so.0", Needed: []string{"libc.so.6"}}},
		Links: map[string]string{"libcudss.so.0": "libcudss.so.0.9.9"}}})
	s := &site{reg: reg, front: reg.Front(t)}
	env := append(s.env(t), "CUDADEPS_CATALOG="+nv.Catalog, "CUDADEPS_MIRROR="+nv.URL)
	planFile := filepath.Join(t.TempDir(), "plan.json")
	out, err := command(t, env, binary(t), "resolve", appTree(t), "--dry-run", "--json", "--ld-library-path", "").Output()
	if len(out) == 0 {
		t.Fatalf("resolve --dry-run: %v", err)
	}
	if err := os.WriteFile(planFile, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := command(t, env, binary(t), "mirror", "--plan", planFile, "--to", "oci://"+reg.Host+"/fleet/app:v1", "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	nv.Forbid(t)
	return s
}

// env is a node's environment: its own cache, store and config, the
// registry's login (for its front too) and CA.
func (s *site) env(t *testing.T) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"XDG_CACHE_HOME=" + t.TempDir(),
		"XDG_DATA_HOME=" + t.TempDir(),
		"XDG_CONFIG_HOME=" + t.TempDir(),
		"XDG_CONFIG_DIRS=" + t.TempDir(),
		"DOCKER_CONFIG=" + s.reg.DockerConfig(t, s.reg.Host, s.front.Host),
		"SSL_CERT_FILE=" + s.reg.CA.File,
	}
}

func command(t *testing.T, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	return cmd
}

type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

func run(t *testing.T, env []string, name string, args ...string) result {
	t.Helper()
	cmd := command(t, env, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{cmd.ProcessState.ExitCode(), out.String(), errb.String(), time.Since(start)}
}

func needTimeout(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("timeout")
	lddtest.Need(t, err == nil, "timeout(1) (coreutils) is not installed")
}

// TestSlurmPrologue runs the prologue as slurmd would, on nodes of a site
// whose plan is in a registry that wants a login over TLS: on a node that
// lacks the libraries it applies the plan and exits 0; run again it exits
// 0 after the check alone, asking the registry nothing; where the
// registry cannot be reached it drains the node (exit 1), or lets the job
// start with CUDADEPS_ON_FAILURE=continue; a cudadeps that hangs is cut
// off by the timeout.
func TestSlurmPrologue(t *testing.T) {
	needTimeout(t)
	s := newSite(t)
	prologue, _ := filepath.Abs("slurm-prologue.sh")
	tree := appTree(t)
	env := append(s.env(t),
		"CUDADEPS_PROLOGUE_CONFIG="+filepath.Join(t.TempDir(), "none.env"),
		"CUDADEPS_PROLOGUE_STDERR=1",
		"SLURM_JOB_ID=4242",
		"CUDADEPS_BIN="+binary(t),
		"CUDADEPS_TARGET="+tree,
		"CUDADEPS_REFERENCE=oci://"+s.front.Host+"/fleet/app:v1",
		"CUDADEPS_PREFIX="+filepath.Join(t.TempDir(), "prefix"),
		"CUDADEPS_LOCK="+filepath.Join(t.TempDir(), "lock"),
	)
	r := run(t, env, prologue)
	if r.code != 0 || !strings.Contains(r.stderr, "job 4242: cudadeps-ensure: "+tree+": libraries are missing; applying") || !strings.Contains(r.stderr, "whole (applied oci://") {
		t.Fatalf("first prologue: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(tree, "app/lib/libcudss.so.0")); err != nil {
		t.Fatalf("the prologue placed nothing: %v", err)
	}
	asked := len(s.front.Requests())
	r = run(t, env, prologue)
	if r.code != 0 || r.stderr != "" || len(s.front.Requests()) != asked {
		t.Fatalf("second prologue: exit %d, %d requests to the registry\n%s%s", r.code, len(s.front.Requests())-asked, r.stdout, r.stderr)
	}
	t.Logf("the prologue on a whole node took %s", r.took)

	// A node that lacks the libraries, and a registry that is not there.
	down := append(s.env(t),
		"CUDADEPS_PROLOGUE_CONFIG=/nonexistent", "CUDADEPS_PROLOGUE_STDERR=1", "CUDADEPS_BIN="+binary(t),
		"CUDADEPS_TARGET="+appTree(t), "CUDADEPS_REFERENCE=oci://127.0.0.1:1/fleet/app:v1", "CUDADEPS_PREFIX="+filepath.Join(t.TempDir(), "prefix"))
	r = run(t, down, prologue)
	if r.code != 1 || !strings.Contains(r.stderr, "the apply failed") || !strings.Contains(r.stderr, "Slurm drains the node") {
		t.Fatalf("registry down: exit %d\n%s", r.code, r.stderr)
	}
	r = run(t, append(down, "CUDADEPS_ON_FAILURE=continue"), prologue)
	if r.code != 0 || !strings.Contains(r.stderr, "the job starts anyway") {
		t.Fatalf("registry down, continue: exit %d\n%s", r.code, r.stderr)
	}

	// A cudadeps that never answers.
	hang := filepath.Join(t.TempDir(), "cudadeps")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = run(t, append(down, "CUDADEPS_BIN="+hang, "CUDADEPS_CHECK_TIMEOUT=1"), prologue)
	if r.code != 1 || !strings.Contains(r.stderr, "did not end within 1s") || r.took > 30*time.Second {
		t.Fatalf("a hung cudadeps: exit %d after %s\n%s", r.code, r.took, r.stderr)
	}
}

// TestEntrypoint runs the container entrypoint: the command runs once the
// target is whole, with the activation script sourced; it does not run
// when the target cannot be made whole, unless CUDADEPS_ON_FAILURE says
// continue.
func TestEntrypoint(t *testing.T) {
	needTimeout(t)
	s := newSite(t)
	entry, _ := filepath.Abs("entrypoint.sh")
	tree := appTree(t)
	prefix := filepath.Join(t.TempDir(), "prefix")
	env := append(s.env(t), "CUDADEPS_BIN="+binary(t), "CUDADEPS_TARGET="+tree,
		"CUDADEPS_REFERENCE=oci://"+s.front.Host+"/fleet/app:v1", "CUDADEPS_PREFIX="+prefix)
	probe := `test -L "$1/app/lib/libcudss.so.0" && echo "the command ran: $2"`
	r := run(t, env, entry, "sh", "-c", probe, "sh", tree, "with arguments")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "the command ran: with arguments" {
		t.Fatalf("entrypoint: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	down := append(s.env(t), "CUDADEPS_BIN="+binary(t), "CUDADEPS_TARGET="+appTree(t),
		"CUDADEPS_REFERENCE=oci://127.0.0.1:1/fleet/app:v1", "CUDADEPS_PREFIX="+filepath.Join(t.TempDir(), "prefix"))
	r = run(t, down, entry, "echo", "ran")
	if r.code != 1 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "not running the command") {
		t.Fatalf("registry down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, append(down, "CUDADEPS_ON_FAILURE=continue"), entry, "echo", "ran")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "ran" {
		t.Fatalf("registry down, continue: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// manifest is the part of a Pod the recipes use.
type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		Volumes []struct {
			Name   string `yaml:"name"`
			Secret *struct {
				SecretName string `yaml:"secretName"`
				Items      []struct {
					Key  string `yaml:"key"`
					Path string `yaml:"path"`
				} `yaml:"items"`
			} `yaml:"secret"`
			ConfigMap *struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
			PersistentVolumeClaim *struct {
				ClaimName string `yaml:"claimName"`
			} `yaml:"persistentVolumeClaim"`
			Image *struct {
				Reference  string `yaml:"reference"`
				PullPolicy string `yaml:"pullPolicy"`
			} `yaml:"image"`
		} `yaml:"volumes"`
		InitContainers []container `yaml:"initContainers"`
		Containers     []container `yaml:"containers"`
	} `yaml:"spec"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

func (c container) env(name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// mountOf is the mount of c under which p lies, and its volume's name.
func (c container) mountOf(p string) (string, string) {
	for _, m := range c.VolumeMounts {
		if p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/") {
			return m.MountPath, m.Name
		}
	}
	return "", ""
}

// TestKubernetesManifests reads the manifests as YAML and checks what
// makes them work: the init container runs cudadeps-ensure with a target
// and a registry reference with a tag; the login is a dockerconfigjson
// secret mounted as config.json where DOCKER_CONFIG points; the CA file
// lies in a mounted config map; the store, the download cache and the
// target lie on the volume the workload mounts at the same path; every
// mount names a volume; the settings are ones cudadeps-ensure reads; and,
// in the image-volume recipe, cudadeps comes from an image volume.
func TestKubernetesManifests(t *testing.T) {
	script, err := os.ReadFile("cudadeps-ensure")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"k8s/apply-initcontainer.yaml", "k8s/apply-image-volume.yaml"} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var m manifest
			dec := yaml.NewDecoder(bytes.NewReader(data))
			dec.KnownFields(false)
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			if m.APIVersion != "v1" || m.Kind != "Pod" || len(m.Spec.InitContainers) != 1 || len(m.Spec.Containers) != 1 {
				t.Fatalf("%s: want a v1 Pod with one init container and one container: %+v", file, m)
			}
			volumes := map[string]int{}
			for i, v := range m.Spec.Volumes {
				volumes[v.Name] = i
			}
			init, work := m.Spec.InitContainers[0], m.Spec.Containers[0]
			for _, c := range []container{init, work} {
				for _, vm := range c.VolumeMounts {
					if _, ok := volumes[vm.Name]; !ok {
						t.Errorf("%s mounts %s, which is no volume", c.Name, vm.Name)
					}
				}
			}
			if len(init.Command) != 1 || filepath.Base(init.Command[0]) != "cudadeps-ensure" {
				t.Errorf("the init container runs %q, not cudadeps-ensure", init.Command)
			}
			for _, e := range init.Env {
				if strings.HasPrefix(e.Name, "CUDADEPS_") && e.Name != "CUDADEPS_PREFIX" && !regexp.MustCompile(`\b`+e.Name+`\b`).Match(script) {
					t.Errorf("%s is set, and cudadeps-ensure does not read it", e.Name)
				}
			}
			ref, err := registry.ParseReference(init.env("CUDADEPS_REFERENCE"))
			if err != nil || ref.Tag == "" || init.env("CUDADEPS_TARGET") == "" {
				t.Errorf("target %q, reference %q: %v", init.env("CUDADEPS_TARGET"), init.env("CUDADEPS_REFERENCE"), err)
			}

			mount, vol := init.mountOf(init.env("DOCKER_CONFIG") + "/config.json")
			if v := m.Spec.Volumes[volumes[vol]]; mount != init.env("DOCKER_CONFIG") || v.Secret == nil || len(v.Secret.Items) != 1 ||
				v.Secret.Items[0].Key != ".dockerconfigjson" || v.Secret.Items[0].Path != "config.json" {
				t.Errorf("DOCKER_CONFIG=%s is not a dockerconfigjson secret mounted as config.json", init.env("DOCKER_CONFIG"))
			}
			if _, vol := init.mountOf(init.env("SSL_CERT_FILE")); vol == "" || m.Spec.Volumes[volumes[vol]].ConfigMap == nil {
				t.Errorf("SSL_CERT_FILE=%s lies in no mounted config map", init.env("SSL_CERT_FILE"))
			}
			where := init.env("CUDADEPS_SITE_PACKAGES") + init.env("CUDADEPS_PYTHON")
			envMount, envVol := init.mountOf(where)
			if envVol == "" || m.Spec.Volumes[volumes[envVol]].PersistentVolumeClaim == nil {
				t.Fatalf("the target's environment (%s) lies on no persistent volume", where)
			}
			for _, v := range []string{"CUDADEPS_PREFIX", "XDG_CACHE_HOME", "CUDADEPS_LOCK"} {
				if mnt, _ := init.mountOf(init.env(v)); mnt != envMount {
					t.Errorf("%s=%s is not on the environment's volume (%s)", v, init.env(v), envMount)
				}
			}
			if mnt, vol := work.mountOf(envMount); mnt != envMount || vol != envVol {
				t.Errorf("the workload mounts the environment's volume at %q, the init container at %q", mnt, envMount)
			}
			if work.env("CUDADEPS_PREFIX") != init.env("CUDADEPS_PREFIX") || !strings.Contains(strings.Join(work.Command, " "), "env.sh") {
				t.Errorf("the workload does not source the activation script of the init container's prefix: %q", work.Command)
			}
			if bin := init.env("CUDADEPS_BIN"); bin != "" {
				_, vol := init.mountOf(bin)
				if vol == "" || m.Spec.Volumes[volumes[vol]].Image == nil || m.Spec.Volumes[volumes[vol]].Image.Reference == "" {
					t.Errorf("CUDADEPS_BIN=%s is not on an image volume", bin)
				}
				if mnt, _ := init.mountOf(init.Command[0]); mnt == "" || !strings.HasPrefix(bin, mnt) {
					t.Errorf("cudadeps-ensure (%s) and cudadeps (%s) do not come from the same image volume", init.Command[0], bin)
				}
			}
		})
	}
}
