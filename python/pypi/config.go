package pypi

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cudadeps/cudadeps/internal/regfile"
)

// DefaultIndex is pip's index when nothing else is configured.
const DefaultIndex = "https://pypi.org/simple/"

// PipConfig is where pip's configuration is looked for; the zero value
// means this process's environment.
type PipConfig struct {
	// Getenv reads the environment (PIP_*, HOME, XDG_*, VIRTUAL_ENV).
	// Nil means os.Getenv.
	Getenv func(string) string
	// Prefix is the environment's sys.prefix, whose pip.conf is the site
	// file. "" means $VIRTUAL_ENV.
	Prefix string
	// EtcDir holds the last global file, pip.conf. "" means /etc.
	EtcDir string
}

// Indexes is what pip would ask: the index and the extra indexes.
type Indexes struct {
	Index   string   `json:"index_url,omitempty"` // "" with no-index
	Extra   []string `json:"extra_index_urls,omitempty"`
	Sources []string `json:"sources,omitempty"` // the files and variables that set them
}

// All is the index followed by the extra ones.
func (ix Indexes) All() []string {
	var out []string
	if ix.Index != "" {
		out = append(out, ix.Index)
	}
	return append(out, ix.Extra...)
}

// maxConfig bounds a pip.conf read.
const maxConfig = 1 << 20

// PipIndexes reads pip's index settings as pip would for `pip install`:
// the configuration files in pip's order (PIP_CONFIG_FILE first, then the
// global files in $XDG_CONFIG_DIRS and /etc/pip.conf, the user's legacy
// ~/.pip/pip.conf and $XDG_CONFIG_HOME/pip/pip.conf, the environment's
// PREFIX/pip.conf), each overriding the one before and [install]
// overriding [global] within a file, then PIP_INDEX_URL,
// PIP_EXTRA_INDEX_URL and PIP_NO_INDEX over all of them.
// PIP_CONFIG_FILE=/dev/null loads no file.
func PipIndexes(cfg PipConfig) (Indexes, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ix := Indexes{Index: DefaultIndex}
	noIndex := false
	for _, f := range cfg.files(getenv) {
		values, err := readPipConf(f)
		if regfile.Absent(err) {
			continue
		}
		if err != nil {
			return Indexes{}, err
		}
		if ix.apply(values, &noIndex) {
			ix.Sources = append(ix.Sources, f)
		}
	}
	if v := getenv("PIP_INDEX_URL"); v != "" {
		ix.Index = strings.TrimSpace(v)
		ix.Sources = append(ix.Sources, "PIP_INDEX_URL")
	}
	if v := getenv("PIP_EXTRA_INDEX_URL"); v != "" {
		ix.Extra = strings.Fields(v)
		ix.Sources = append(ix.Sources, "PIP_EXTRA_INDEX_URL")
	}
	if v := getenv("PIP_NO_INDEX"); v != "" {
		noIndex = isTrue(v)
		ix.Sources = append(ix.Sources, "PIP_NO_INDEX")
	}
	if noIndex {
		ix.Index, ix.Extra = "", nil
	}
	return ix, nil
}

// files are pip's configuration files in the order pip reads them, each
// overriding the one before; none with PIP_CONFIG_FILE=/dev/null.
func (cfg PipConfig) files(getenv func(string) string) []string {
	var files []string
	envFile := getenv("PIP_CONFIG_FILE")
	if envFile == os.DevNull {
		return nil
	}
	if envFile != "" {
		files = append(files, envFile)
	}
	dirs := getenv("XDG_CONFIG_DIRS")
	if dirs == "" {
		dirs = "/etc/xdg"
	}
	for _, d := range filepath.SplitList(dirs) {
		if filepath.IsAbs(d) {
			files = append(files, filepath.Join(d, "pip", "pip.conf"))
		}
	}
	etc := cfg.EtcDir
	if etc == "" {
		etc = "/etc"
	}
	files = append(files, filepath.Join(etc, "pip.conf"))
	home := getenv("HOME")
	if home != "" {
		files = append(files, filepath.Join(home, ".pip", "pip.conf"))
	}
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		files = append(files, filepath.Join(x, "pip", "pip.conf"))
	} else if home != "" {
		files = append(files, filepath.Join(home, ".config", "pip", "pip.conf"))
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = getenv("VIRTUAL_ENV")
	}
	if prefix != "" {
		files = append(files, filepath.Join(prefix, "pip.conf"))
	}
	return files
}

// apply takes one file's index settings, [install] over [global], and
// reports whether it had any.
func (ix *Indexes) apply(values map[string]map[string]string, noIndex *bool) bool {
	used := false
	for _, section := range []string{"global", "install"} {
		s := values[section]
		if v, ok := s["index-url"]; ok {
			ix.Index, used = v, true
		}
		if v, ok := s["extra-index-url"]; ok {
			ix.Extra, used = strings.Fields(v), true
		}
		if v, ok := s["no-index"]; ok {
			*noIndex, used = isTrue(v), true
		}
	}
	return used
}

func isTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "yes", "true", "on":
		return true
	}
	return false
}

// readPipConf reads an INI file as Python's configparser does for pip's
// keys: [section] headers, "key = value" or "key: value", continuation
// lines indented, comments with '#' or ';' at the start of a line. Keys
// are lowercase; "_" is read as "-" as pip does.
func readPipConf(path string) (map[string]map[string]string, error) {
	b, err := regfile.Read(path, maxConfig)
	if err != nil {
		return nil, fmt.Errorf("pip configuration: %w", err)
	}
	out := map[string]map[string]string{}
	section, key := "", ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), maxConfig)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || trimmed[0] == '#' || trimmed[0] == ';':
			continue
		case line[0] == ' ' || line[0] == '\t':
			if section == "" || key == "" {
				return nil, fmt.Errorf("pip configuration %s:%d: an indented line outside a value", path, n)
			}
			out[section][key] += "\n" + trimmed
			continue
		case trimmed[0] == '[':
			end := strings.IndexByte(trimmed, ']')
			if end < 0 {
				return nil, fmt.Errorf("pip configuration %s:%d: a section header without ']'", path, n)
			}
			section, key = strings.ToLower(strings.TrimSpace(trimmed[1:end])), ""
			if out[section] == nil {
				out[section] = map[string]string{}
			}
			continue
		}
		if section == "" {
			return nil, fmt.Errorf("pip configuration %s:%d: a value before any [section]", path, n)
		}
		i := strings.IndexAny(trimmed, "=:")
		if i < 0 {
			return nil, fmt.Errorf("pip configuration %s:%d: want KEY = VALUE", path, n)
		}
		key = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(trimmed[:i])), "_", "-")
		out[section][key] = strings.TrimSpace(trimmed[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("pip configuration %s: %w", path, err)
	}
	return out, nil
}
