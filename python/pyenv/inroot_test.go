package pyenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rootTree writes files (empty unless given) and links into a new root.
func rootTree(t *testing.T, files map[string]string, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// trap is an interpreter that leaves a mark when run: InRoot must never
// run a program of the root.
func trap(root string) string {
	return "#!/bin/sh\ntouch " + filepath.Join(root, "RAN") + "\n"
}

func noneRan(t *testing.T, root string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, "RAN")); err == nil {
		t.Error("a program of the root was run")
	}
}

// TestInRootSysPathOrder: with several site directories of a root holding
// the target, the one the root's python3 imports from is chosen: Debian's
// pip directory before apt's, an interpreter built in /usr/local before
// Debian's, the version python3 links to before a newer one; and the
// environment is the chosen installation's, whose other directories
// supply the requirements.
func TestInRootSysPathOrder(t *testing.T) {
	debian := map[string]string{"usr/bin/python3.12": "", "usr/lib/python3.12/os.py": "", "usr/lib/python3/dist-packages/.keep": ""}
	for _, c := range []struct {
		name     string
		files    map[string]string
		links    map[string]string
		holders  []string // site directories holding gpupkg
		requires string   // where nvidia-cuda-runtime is installed
		want     string   // the site directory chosen
		what     string
	}{
		{name: "debian: pip's before apt's", files: debian, links: map[string]string{"usr/bin/python3": "python3.12"},
			holders:  []string{"usr/lib/python3/dist-packages", "usr/local/lib/python3.12/dist-packages", "usr/lib/python3.12/dist-packages"},
			requires: "usr/lib/python3/dist-packages",
			want:     "usr/local/lib/python3.12/dist-packages", what: "python3.12 in /usr, Debian's layout"},
		{name: "debian: apt's before the versioned one", files: debian,
			holders: []string{"usr/lib/python3.12/dist-packages", "usr/lib/python3/dist-packages"},
			want:    "usr/lib/python3/dist-packages", what: "python3.12 in /usr, Debian's layout"},
		{name: "debian: site-packages is not on its path", files: debian,
			holders: []string{"usr/lib/python3.12/site-packages", "usr/lib/python3.12/dist-packages"},
			want:    "usr/lib/python3.12/dist-packages", what: "python3.12 in /usr, Debian's layout"},
		{name: "python built in /usr/local before Debian's",
			files:   map[string]string{"usr/local/lib/python3.13/os.py": "", "usr/bin/python3.11": "", "usr/lib/python3.11/os.py": ""},
			links:   map[string]string{"usr/local/bin/python3": "python3.13", "usr/bin/python3": "python3.11"},
			holders: []string{"usr/lib/python3/dist-packages", "usr/local/lib/python3.13/site-packages"},
			want:    "usr/local/lib/python3.13/site-packages", what: "python3.13 in /usr/local"},
		{name: "the version python3 links to first",
			files:   map[string]string{"usr/lib/python3.11/os.py": "", "usr/lib/python3.13/os.py": "", "usr/bin/python3.11": ""},
			links:   map[string]string{"bin": "usr/bin", "usr/bin/python3": "/usr/bin/python3.11"},
			holders: []string{"usr/lib/python3.13/site-packages", "usr/lib/python3.11/site-packages"},
			want:    "usr/lib/python3.11/site-packages", what: "python3.11 in /usr"},
		{name: "fedora: /usr/local's site-packages belong to /usr's python3",
			files:    map[string]string{"usr/lib64/python3.12/os.py": "", "usr/bin/python3.12": ""},
			links:    map[string]string{"usr/bin/python3": "python3.12"},
			holders:  []string{"usr/lib64/python3.12/site-packages", "usr/local/lib/python3.12/site-packages"},
			requires: "usr/lib/python3.12/site-packages",
			want:     "usr/local/lib/python3.12/site-packages", what: "python3.12 in /usr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := rootTree(t, c.files, c.links)
			for p := range c.files {
				if strings.HasPrefix(p, "usr/bin/") || strings.HasPrefix(p, "usr/local/bin/") {
					if err := os.WriteFile(filepath.Join(root, p), []byte(trap(root)), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			requires := ""
			if c.requires != "" {
				requires = "Requires-Dist: nvidia-cuda-runtime==13.0.96"
				writeDistInfo(t, filepath.Join(root, c.requires), "nvidia-cuda-runtime", "13.0.96", "", []string{"nvidia/cu13/lib/libcudart.so.13"})
			}
			for i, h := range c.holders {
				writeDistInfo(t, filepath.Join(root, h), "gpupkg", "1."+string(rune('0'+i)), requires, []string{"gpupkg/libgpupkg.so"})
			}
			env, err := InRoot(root, "", "gpupkg")
			if err != nil {
				t.Fatal(err)
			}
			d, err := env.Find("gpupkg")
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(root, c.want); d.SiteDir != want || env.Installation != c.what {
				t.Errorf("chose %s (%s); want %s (%s); site dirs %v", d.SiteDir, env.Installation, want, c.what, env.SiteDirs)
			}
			if c.requires != "" {
				res, err := env.Resolve("gpupkg")
				if err != nil {
					t.Fatal(err)
				}
				if rt := res.Dist("nvidia-cuda-runtime"); rt == nil || rt.SiteDir != filepath.Join(root, c.requires) {
					t.Errorf("the requirement in %s is not the environment's: %v", c.requires, env.SiteDirs)
				}
			}
			noneRan(t, root)
		})
	}
}

// TestInRootNamedVenv: a venv of the root is read only when its python is
// named, its version from pyvenv.cfg, and with include-system-site-packages
// the base installation's directories follow its own.
func TestInRootNamedVenv(t *testing.T) {
	root := rootTree(t, map[string]string{
		"usr/bin/python3.12": "", "usr/lib/python3.12/os.py": "",
		"opt/venv/pyvenv.cfg": "home = /usr/bin\ninclude-system-site-packages = true\nversion_info = 3.12.3.final.0\n",
	}, map[string]string{"opt/venv/bin/python": "/usr/bin/python3.12", "usr/bin/python3": "python3.12"})
	if err := os.WriteFile(filepath.Join(root, "usr/bin/python3.12"), []byte(trap(root)), 0o755); err != nil {
		t.Fatal(err)
	}
	venvSite := filepath.Join(root, "opt/venv/lib/python3.12/site-packages")
	writeDistInfo(t, venvSite, "gpupkg", "1.0", "Requires-Dist: nvidia-cuda-runtime", []string{"gpupkg/libgpupkg.so"})
	system := filepath.Join(root, "usr/lib/python3/dist-packages")
	writeDistInfo(t, system, "nvidia-cuda-runtime", "13.0.96", "", []string{"nvidia/cu13/lib/libcudart.so.13"})

	// Not named: not guessed.
	_, err := InRoot(root, "", "gpupkg")
	if err == nil || !strings.Contains(err.Error(), "root "+root+": no installed distribution \"gpupkg\"") || !strings.Contains(err.Error(), system) || strings.Contains(err.Error(), venvSite) {
		t.Errorf("venv not named: %v; want not found, looked in %s only", err, system)
	}

	env, err := InRoot(root, filepath.Join(root, "opt/venv/bin/python"), "gpupkg")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(env.SiteDirs, ":") != venvSite+":"+system || env.Installation != "venv /opt/venv of python3.12" || env.Markers["python_version"] != "3.12" {
		t.Errorf("venv: site dirs %v, %q, markers %v", env.SiteDirs, env.Installation, env.Markers)
	}
	res, err := env.Resolve("gpupkg")
	if err != nil {
		t.Fatal(err)
	}
	if res.Dist("nvidia-cuda-runtime") == nil {
		t.Error("the system site directories the venv includes are not searched")
	}
	noneRan(t, root)
}

// TestInRootNotFound: one line naming the root and every directory looked
// in, whether the root has Python environments without the target or none.
func TestInRootNotFound(t *testing.T) {
	root := rootTree(t, map[string]string{"usr/lib/python3.12/os.py": ""}, nil)
	site := filepath.Join(root, "usr/lib/python3.12/site-packages")
	writeDistInfo(t, site, "numpy", "2.0", "", []string{"numpy/__init__.py"})
	_, err := InRoot(root, "", "torch")
	if want := "root " + root + ": no installed distribution \"torch\" in its Python installations (looked in " + site + ")"; err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}

	empty := t.TempDir()
	_, err = InRoot(empty, "", "torch")
	if err == nil || !strings.HasPrefix(err.Error(), "root "+empty+": no Python environment: none of ") ||
		!strings.Contains(err.Error(), empty+"/usr/lib/python3/dist-packages") || !strings.Contains(err.Error(), empty+"/usr/local/lib/python3.*/site-packages") ||
		strings.Contains(err.Error(), "\n") {
		t.Errorf("empty root: %v", err)
	}

	_, err = InRoot(empty, filepath.Join(empty, "opt/venv/bin/python"), "torch")
	if err == nil || !strings.Contains(err.Error(), "root "+empty+": python "+empty+"/opt/venv/bin/python: no such file or directory") {
		t.Errorf("named python absent: %v", err)
	}
}

func TestHolds(t *testing.T) {
	root := t.TempDir()
	for p, want := range map[string]bool{filepath.Join(root, "usr/bin/python3"): true, root + "x/bin/python": false, "/usr/bin/python3": false} {
		if Holds(root, p) != want {
			t.Errorf("Holds(%s, %s) = %v", root, p, !want)
		}
	}
	if Holds("/", "/usr/bin/python3") || Holds("", "/usr/bin/python3") {
		t.Error("this host's root holds no program apart")
	}
}
