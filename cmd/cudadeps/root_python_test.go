package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// pythonRoot adds to a GPU host's tree (gpuRoot) Debian's python3.12,
// whose interpreter leaves a mark if anything runs it, and gpupkg twice:
// 1.0 from apt in /usr/lib/python3/dist-packages, and 2.0 from pip in
// /usr/local/lib/python3.12/dist-packages with its libcudart from
// nvidia-cuda-runtime beside it. sys.path puts pip's directory first.
func pythonRoot(t *testing.T) (root, chosen string) {
	t.Helper()
	root = gpuRoot(t, true)
	write := func(p, body string, mode os.FileMode) { writeTestFile(t, filepath.Join(root, p), body, mode) }
	write("usr/bin/python3.12", "#!/bin/sh\ntouch "+filepath.Join(root, "RAN")+"\n", 0o755)
	if err := os.Symlink("python3.12", filepath.Join(root, "usr/bin/python3")); err != nil {
		t.Fatal(err)
	}
	write("usr/lib/python3.12/os.py", "", 0o644)
	dist := func(site, name, version, requires string, libs map[string]elfwrite.Spec) {
		info := name + "-" + version + ".dist-info"
		record := info + "/METADATA,,\n" + info + "/RECORD,,\n"
		for p, spec := range libs {
			if err := elfwrite.Write(filepath.Join(root, site, p), spec); err != nil {
				t.Fatal(err)
			}
			record += p + ",,\n"
		}
		write(filepath.Join(site, info, "METADATA"), "Metadata-Version: 2.1\nName: "+strings.ReplaceAll(name, "_", "-")+"\nVersion: "+version+"\n"+requires, 0o644)
		write(filepath.Join(site, info, "RECORD"), record, 0o644)
	}
	rpath := "$ORIGIN/../../nvidia/cu13/lib"
	pip := "usr/local/lib/python3.12/dist-packages"
	dist(pip, "gpupkg", "2.0", "Requires-Dist: nvidia-cuda-runtime==13.0.96\n", map[string]elfwrite.Spec{
		"gpupkg/lib/libgpupkg.so": {Soname: "libgpupkg.so", Needed: []string{"libcudart.so.13", "libc.so.6"}, RPath: &rpath}})
	dist(pip, "nvidia_cuda_runtime", "13.0.96", "", map[string]elfwrite.Spec{
		"nvidia/cu13/lib/libcudart.so.13": {Soname: "libcudart.so.13", Needed: []string{"libc.so.6"}}})
	dist("usr/lib/python3/dist-packages", "gpupkg", "1.0", "", map[string]elfwrite.Spec{
		"gpupkg/lib/libgpupkg.so": {Soname: "libgpupkg.so", Needed: []string{"libcudart.so.13"}}})
	return root, filepath.Join(root, pip)
}

// TestRootPythonEnvironment: with --root and no --python or
// --site-packages, resolve, check and doctor find the distribution in the
// root's own Python installation, read from its files (its interpreter is
// never run), in the site directory sys.path would import it from, and
// say which; a root without one, or without the distribution, is one line
// naming the root and where it looked, exit status 1.
func TestRootPythonEnvironment(t *testing.T) {
	env := doctorEnv(t)
	root, chosen := pythonRoot(t)
	const installation = "python3.12 in /usr, Debian's layout"
	described := "gpupkg 2.0 (" + chosen + ": the root's " + installation + ")"

	r := runBinary(t, env, "", "resolve", "gpupkg", "--root", root, "--dry-run", "--ld-library-path", "")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "python: "+described) {
		t.Errorf("resolve --dry-run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runBinary(t, env, "", "resolve", "gpupkg", "--root", root, "--dry-run", "--json", "--ld-library-path", "")
	var doc struct {
		Target struct {
			Dist struct {
				Version string `json:"version"`
				SiteDir string `json:"site_dir"`
			} `json:"dist"`
			Python struct {
				Installation string   `json:"installation"`
				SiteDirs     []string `json:"site_dirs"`
			} `json:"python"`
		} `json:"target"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("resolve --json: %v\n%s", err, r.stderr)
	}
	if doc.Target.Dist.SiteDir != chosen || doc.Target.Dist.Version != "2.0" || doc.Target.Python.Installation != installation ||
		len(doc.Target.Python.SiteDirs) != 2 || doc.Target.Python.SiteDirs[1] != filepath.Join(root, "usr/lib/python3/dist-packages") {
		t.Errorf("resolve --json: target %+v", doc.Target)
	}

	r = runBinary(t, env, "", "check", "gpupkg", "--root", root, "--ld-library-path", "")
	if r.code != exitOK || r.stdout != "ok: "+described+" loads whole\n" {
		t.Errorf("check: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runBinary(t, env, "", "doctor", "gpupkg", "--root", root, "--ld-library-path", "")
	if r.code != exitOK || !strings.Contains(r.stdout, "ok    target           "+described+" loads whole") {
		t.Errorf("doctor: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "RAN")); err == nil {
		t.Error("the root's python3 was run")
	}

	empty := gpuRoot(t, true)
	for _, c := range []struct{ root, dist, want string }{
		{root, "tensorflow", "root " + root + `: no installed distribution "tensorflow" in its Python installations (looked in ` + chosen + ", " + filepath.Join(root, "usr/lib/python3/dist-packages") + ")"},
		{empty, "gpupkg", "root " + empty + ": no Python environment: none of " + empty + "/usr/local/lib/python3.*/site-packages, "},
	} {
		for _, cmd := range [][]string{{"resolve", "--dry-run"}, {"check"}, {"doctor"}} {
			r := runBinary(t, env, "", append(cmd, c.dist, "--root", c.root)...)
			if r.code != exitError || r.stdout != "" || !strings.HasPrefix(r.stderr, "cudadeps: "+c.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("%s %s --root %s: exit %d, stdout %q, stderr %q; want exit 1 and one line %q", cmd[0], c.dist, c.root, r.code, r.stdout, r.stderr, c.want)
			}
		}
	}
}

// doctorEnv is userEnv without what doctor reads from the environment
// besides the root (quietEnv, for the built binary).
func doctorEnv(t *testing.T) []string {
	var env []string
	for _, kv := range userEnv(t) {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "KUBERNETES_SERVICE_HOST",
			"APPTAINER_CONTAINER", "SINGULARITY_CONTAINER", "container":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "TRITON_LIBCUDA_PATH=/usr/lib64")
}

// TestNotInstalledIsAnError: a distribution that is not installed is an
// error (exit status 1) for resolve, check and doctor alike, in one line
// naming the distribution and the environment looked in.
func TestNotInstalledIsAnError(t *testing.T) {
	env := doctorEnv(t)
	site := t.TempDir()
	python := filepath.Join(t.TempDir(), "python3")
	report, _ := json.Marshal(map[string]any{"executable": python, "prefix": "/venv", "base_prefix": "/usr", "version": "3.12.3",
		"machine": "x86_64", "site_dirs": []string{site}, "markers": map[string]string{"sys_platform": "linux"}})
	if err := os.WriteFile(python, []byte("#!/bin/sh\ncat <<'EOF'\n"+string(report)+"\nEOF\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := `cudadeps: no installed distribution "tensorflow" in the environment of ` + python + " (" + site + ")\n"
	for _, cmd := range [][]string{{"resolve", "--dry-run"}, {"check"}, {"doctor"}} {
		r := runBinary(t, env, "", append(cmd, "tensorflow", "--python", python)...)
		if r.code != exitError || r.stdout != "" || r.stderr != want {
			t.Errorf("%s tensorflow: exit %d, stdout %q, stderr %q; want exit 1 and %q", cmd[0], r.code, r.stdout, r.stderr, want)
		}
	}
}

// TestRootErrorsNameTheRootOnce: every command that takes --root says in
// one line, naming the root once, that it is absent or not a directory,
// and exits with status 1.
func TestRootErrorsNameTheRootOnce(t *testing.T) {
	env := userEnv(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libok.so")
	if err := elfwrite.Write(lib, elfwrite.Spec{Soname: "libok.so"}); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(dir, "plan.json")
	r := runBinary(t, env, "", "resolve", lib, "--dry-run", "--json", "--ld-library-path", "")
	if err := os.WriteFile(planFile, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		{"scan", lib}, {"why", "libc.so.6", "--from", lib}, {"resolve", lib, "--dry-run"}, {"resolve", "torch", "--dry-run"},
		{"check", lib}, {"check", "torch"}, {"doctor"}, {"doctor", lib}, {"doctor", "torch"},
		{"apply", planFile, "--mirror", "file://" + dir + "/"}, {"mirror", "--target", lib, filepath.Join(dir, "mirror")}, {"undo"},
	}
	for root, reason := range map[string]string{filepath.Join(dir, "absent"): "no such file or directory", file: "not a directory"} {
		for _, args := range commands {
			r := runBinary(t, env, "", append(args, "--root", root)...)
			if want := "cudadeps: root " + root + ": " + reason + "\n"; r.code != exitError || r.stderr != want {
				t.Errorf("%v --root %s: exit %d, stderr %q; want exit 1 and %q", args, root, r.code, r.stderr, want)
			}
		}
	}
}
