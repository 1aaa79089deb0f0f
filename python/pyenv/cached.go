package pyenv

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
)

// cachedEnv is what an interpreter said, with the state of what decided it.
type cachedEnv struct {
	Exe    string // what python named, found on PATH
	Inputs factcache.Inputs
	Env    Env
}

// DiscoverCached is Discover, answered from cache when the interpreter, its
// environment variables and every path its answer depends on are as they
// were when it was last asked: starting an interpreter costs tens of
// milliseconds, a check of a healthy environment should not. A cache that
// cannot be read or written only makes it ask again.
func DiscoverCached(ctx context.Context, python string, cache factcache.Dir) (*Env, error) {
	return discoverCached(ctx, python, cache, factcache.SettleMargin)
}

func discoverCached(ctx context.Context, python string, cache factcache.Dir, margin time.Duration) (*Env, error) {
	if python == "" {
		python = DefaultPython()
	}
	exe, err := exec.LookPath(python)
	if err != nil || cache.Path() == "" {
		return Discover(ctx, python)
	}
	// A wrapper's choice is part of the key (Selected): slower than an
	// answer kept for the wrapper, never an answer for another Python.
	runs := Selected(ctx, python)
	if runs == "" {
		return Discover(ctx, python)
	}
	key := factcache.Key("python", append([]string{python, exe, runs}, pythonEnviron()...)...)
	var c cachedEnv
	if cache.Load(key, &c) && c.Exe == exe && c.Inputs.Unchanged() {
		return c.Env.remember(), nil
	}
	start := time.Now()
	env, err := Discover(ctx, python)
	if err != nil {
		return nil, err
	}
	paths := append([]string{exe, env.Executable, env.RealExec}, env.Inputs...)
	paths = append(paths, env.SiteDirs...)
	c = cachedEnv{Exe: exe, Inputs: factcache.Capture(paths), Env: *env}
	if c.Inputs.Settled(start, margin) {
		_ = cache.Save(key, c)
	}
	return env, nil
}

// pythonEnviron is the part of the environment an interpreter's paths
// depend on, sorted: PYTHON* (PYTHONPATH, PYTHONHOME, PYTHONUSERBASE,
// PYTHONNOUSERSITE, ...), the active environment, the home and PATH.
func pythonEnviron() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PYTHON") || slices.Contains([]string{"PATH", "HOME", "VIRTUAL_ENV", "CONDA_PREFIX", "XDG_DATA_HOME"}, name) {
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return out
}
