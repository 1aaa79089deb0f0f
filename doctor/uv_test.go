package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/python/pyenv"
)

// A Python environment inside a uv project: the check names the
// distributions cudadeps installed that uv.lock does not name (`uv sync`
// would remove them); none outside a uv project.
func TestUVProject(t *testing.T) {
	project := t.TempDir()
	prefix := filepath.Join(project, ".venv")
	site := filepath.Join(prefix, "lib", "python3.12", "site-packages")
	dist := func(name, version, installer string) {
		info := filepath.Join(site, strings.ReplaceAll(name, "-", "_")+"-"+version+".dist-info")
		if err := os.MkdirAll(info, 0o755); err != nil {
			t.Fatal(err)
		}
		for base, data := range map[string]string{
			"METADATA":  "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n",
			"RECORD":    "",
			"INSTALLER": installer + "\n",
		} {
			if err := os.WriteFile(filepath.Join(info, base), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	dist("torch", "2.11.0", "uv")
	dist("nvidia-cublas", "13.1.0.3", "cudadeps")
	dist("nvidia-nvpl-blas", "0.4.1", "cudadeps")
	env := &pyenv.Env{Prefix: prefix, SiteDirs: []string{site}}
	if c := checkUV(env); c != nil {
		t.Fatalf("no uv.lock, yet a check: %+v", c)
	}
	lock := "version = 1\n\n[[package]]\nname = \"torch\"\nversion = \"2.11.0\"\n\n[[package]]\nname = \"nvidia-cublas\"\nversion = \"13.1.0.3\"\n[package.metadata]\nname = \"not-a-package\"\n"
	if err := os.WriteFile(filepath.Join(project, "uv.lock"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	c := checkUV(env)
	if c == nil || c.Status != Warn || !strings.Contains(c.Evidence, "nvidia-nvpl-blas") || strings.Contains(c.Evidence, "nvidia-cublas") || !strings.Contains(c.Advice, "--inexact") {
		t.Fatalf("check: %+v", c)
	}
	lock += "\n[[package]]\nname = \"nvidia_nvpl_blas\"\n"
	if err := os.WriteFile(filepath.Join(project, "uv.lock"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := checkUV(env); c == nil || c.Status != OK || !strings.Contains(c.Evidence, "all 2") {
		t.Fatalf("check with both named: %+v", c)
	}
}
