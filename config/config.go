// Package config finds the defaults a site sets once — mirror, catalog layers, store prefix — in the environment and a config file, for the flags that are not given.
//
// Precedence, highest first: a command-line flag, an environment variable
// (CUDADEPS_MIRROR, CUDADEPS_CATALOG, CUDADEPS_PREFIX), the config file, the
// built-in default. The config file is CUDADEPS_CONFIG when set, else the
// first of $XDG_CONFIG_HOME/cudadeps/config.toml (~/.config/...) and
// DIR/cudadeps/config.toml for each DIR of $XDG_CONFIG_DIRS (/etc/xdg) that
// exists. It is a small, strict subset of TOML: `key = "string"` or
// `key = ["string", ...]` lines and # comments; an unknown key, a repeated
// key or any other line is an error naming the file and line.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cudadeps/cudadeps/internal/regfile"
)

// The environment variables.
const (
	EnvMirror  = "CUDADEPS_MIRROR"
	EnvCatalog = "CUDADEPS_CATALOG" // a list of files, separated by ':'
	EnvPrefix  = "CUDADEPS_PREFIX"
	EnvConfig  = "CUDADEPS_CONFIG" // the config file to read instead of searching
)

// The keys of the config file.
const (
	keyMirror  = "mirror"
	keyCatalog = "catalog"
	keyPrefix  = "prefix"
)

// FileName is the config file's name inside a cudadeps config directory.
const FileName = "config.toml"

// maxFileSize bounds the config file: it holds a few lines.
const maxFileSize = 1 << 20

// Setting is one default and where it came from.
type Setting struct {
	// Value is the mirror URL or the prefix directory; "" when unset.
	Value string `json:"value,omitempty"`
	// Values are the catalog files, in layering order.
	Values []string `json:"values,omitempty"`
	// Source names where the value came from: "CUDADEPS_MIRROR",
	// "FILE:LINE", "" when nothing set it (the built-in default applies).
	Source string `json:"source,omitempty"`
}

// Set reports whether anything set the setting.
func (s Setting) Set() bool { return s.Source != "" }

// Settings are the site defaults found outside the command line.
type Settings struct {
	// File is the config file read, "" when there is none.
	File    string  `json:"file,omitempty"`
	Mirror  Setting `json:"mirror"`
	Catalog Setting `json:"catalog"`
	Prefix  Setting `json:"prefix"`
}

// Load reads the environment (through lookupEnv: os.LookupEnv in the
// program, a map in tests) and the config file. Relative paths in the environment are
// made absolute against the working directory; in the file, against the
// file's directory. A mirror is not checked here (the caller knows the
// rules); paths are not required to exist.
func Load(lookupEnv func(string) (string, bool)) (*Settings, error) {
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	s := &Settings{}
	file, err := findFile(getenv)
	if err != nil {
		return nil, err
	}
	if file != "" {
		s.File = file
		if err := s.readFile(file); err != nil {
			return nil, err
		}
	}
	if v := getenv(EnvMirror); v != "" {
		s.Mirror = Setting{Value: v, Source: EnvMirror}
	}
	if v, ok := lookupEnv(EnvCatalog); ok {
		// Set but empty clears the file's catalogs.
		var files []string
		for _, f := range filepath.SplitList(v) {
			if f == "" {
				continue
			}
			abs, err := filepath.Abs(f)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvCatalog, err)
			}
			files = append(files, abs)
		}
		s.Catalog = Setting{Values: files, Source: EnvCatalog}
	}
	if v := getenv(EnvPrefix); v != "" {
		abs, err := filepath.Abs(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvPrefix, err)
		}
		s.Prefix = Setting{Value: abs, Source: EnvPrefix}
	}
	return s, nil
}

// findFile returns the config file to read, or "".
func findFile(getenv func(string) string) (string, error) {
	if v := getenv(EnvConfig); v != "" {
		abs, err := filepath.Abs(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", EnvConfig, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvConfig, v, err)
		}
		return abs, nil
	}
	for _, dir := range Dirs(getenv) {
		p := filepath.Join(dir, FileName)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !regfile.Absent(err) {
			return "", fmt.Errorf("config file %s: %w", p, err)
		}
	}
	return "", nil
}

// Dirs are the cudadeps config directories searched, most important first:
// $XDG_CONFIG_HOME/cudadeps (default ~/.config/cudadeps), then
// DIR/cudadeps for each DIR of $XDG_CONFIG_DIRS (default /etc/xdg).
func Dirs(getenv func(string) string) []string {
	var out []string
	if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		out = append(out, filepath.Join(d, "cudadeps"))
	} else if home := getenv("HOME"); filepath.IsAbs(home) {
		out = append(out, filepath.Join(home, ".config", "cudadeps"))
	}
	dirs := getenv("XDG_CONFIG_DIRS")
	if dirs == "" {
		dirs = "/etc/xdg"
	}
	for _, d := range filepath.SplitList(dirs) {
		if filepath.IsAbs(d) {
			out = append(out, filepath.Join(d, "cudadeps"))
		}
	}
	return out
}

func (s *Settings) readFile(file string) error {
	data, err := regfile.Read(file, maxFileSize)
	switch {
	case errors.Is(err, regfile.ErrTooLarge):
		return fmt.Errorf("%s: more than %d bytes: not a cudadeps config file", file, maxFileSize)
	case err != nil:
		return fmt.Errorf("config file: %w", err)
	}
	entries, err := parse(data)
	if err != nil {
		return fmt.Errorf("%s:%w", file, err)
	}
	dir := filepath.Dir(file)
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(dir, p)
	}
	for _, e := range entries {
		where := fmt.Sprintf("%s:%d", file, e.Line)
		switch e.Key {
		case keyMirror:
			v, err := e.one()
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			s.Mirror = Setting{Value: v, Source: where}
		case keyPrefix:
			v, err := e.one()
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if err := notTilde(v); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			s.Prefix = Setting{Value: abs(v), Source: where}
		case keyCatalog:
			files := []string{}
			for _, v := range e.Values {
				if err := notTilde(v); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				files = append(files, abs(v))
			}
			s.Catalog = Setting{Values: files, Source: where}
		default:
			return fmt.Errorf("%s: unknown key %q (known: %s, %s, %s)", where, e.Key, keyCatalog, keyMirror, keyPrefix)
		}
	}
	return nil
}

func notTilde(p string) error {
	if strings.HasPrefix(p, "~") {
		return fmt.Errorf("%q: ~ is not expanded; write the absolute path", p)
	}
	if p == "" {
		return errors.New("empty path")
	}
	return nil
}
