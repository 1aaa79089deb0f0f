package doctor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cudadeps/cudadeps/internal/regfile"
	"github.com/cudadeps/cudadeps/python/pyenv"
	"github.com/cudadeps/cudadeps/python/pymeta"
)

// maxLock bounds a uv.lock read: the largest real ones are a few MiB.
const maxLock = 32 << 20

// checkUV says, for a Python environment that belongs to a uv project
// (a uv.lock in the environment's directory or above it), which of the
// distributions cudadeps installed its lock does not name: `uv sync`
// removes those (it makes the environment exactly the lock's). nil when the
// environment is no uv project's.
func checkUV(env *pyenv.Env) *Check {
	if env == nil || env.Prefix == "" {
		return nil
	}
	lock := findUVLock(env.Prefix)
	if lock == "" {
		return nil
	}
	ours := installedByCudadeps(env)
	named, err := lockedNames(lock)
	if err != nil {
		c := check("uv", Warn, fmt.Sprintf("%s: %v", lock, err), "")
		return &c
	}
	var unnamed []string
	for _, n := range ours {
		if !slices.Contains(named, n) {
			unnamed = append(unnamed, n)
		}
	}
	switch {
	case len(unnamed) > 0:
		c := check("uv", Warn, fmt.Sprintf("the environment belongs to the uv project of %s, whose lock does not name %d distribution(s) cudadeps installed: %s", lock, len(unnamed), strings.Join(unnamed, ", ")),
			"`uv sync` removes what its lock does not name: run it with --inexact, or add them to the project (uv add)")
		return &c
	case len(ours) > 0:
		c := check("uv", OK, fmt.Sprintf("the environment belongs to the uv project of %s; its lock names all %d distribution(s) cudadeps installed, which `uv sync` keeps at the lock's versions", lock, len(ours)), "")
		return &c
	}
	c := check("uv", OK, fmt.Sprintf("the environment belongs to the uv project of %s; cudadeps installed no distribution in it", lock), "")
	return &c
}

// findUVLock looks for uv.lock in dir's parent directories (a project's
// .venv lies beside its lock), at most a few levels up.
func findUVLock(prefix string) string {
	dir := filepath.Clean(prefix)
	for i := 0; i < 4; i++ {
		p := filepath.Join(dir, "uv.lock")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return ""
}

// installedByCudadeps are the environment's distributions whose INSTALLER
// names cudadeps, by normalized name.
func installedByCudadeps(env *pyenv.Env) []string {
	dists, _ := env.Installed()
	var out []string
	for name, d := range dists {
		data, err := regfile.Read(filepath.Join(d.InfoDir, "INSTALLER"), 256)
		if err == nil && strings.TrimSpace(string(data)) == "cudadeps" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// lockedNames reads the package names of a uv.lock ([[package]] tables'
// name keys), normalized.
func lockedNames(lock string) ([]string, error) {
	data, err := regfile.Read(lock, maxLock)
	if err != nil {
		return nil, err
	}
	var out []string
	inPackage := false
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "["):
			inPackage = line == "[[package]]"
		case inPackage && strings.HasPrefix(line, "name"):
			k, v, ok := strings.Cut(line, "=")
			if ok && strings.TrimSpace(k) == "name" {
				out = append(out, pymeta.NormalizeName(strings.Trim(strings.TrimSpace(v), `"'`)))
			}
		}
	}
	return out, sc.Err()
}
