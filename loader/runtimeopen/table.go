// Package runtimeopen knows which libraries CUDA libraries and Python frameworks open at run time with dlopen, and finds them as dlopen would from the object that opens them.
package runtimeopen

import (
	_ "embed"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed table.yaml
var tableYAML []byte

// Entry is one curated fact: an opener and the names it passes to dlopen.
type Entry struct {
	// Opener is the opening library's DT_SONAME (or file name).
	Opener string `yaml:"opener"`
	// OpenerPath is instead a glob relative to site-packages naming the
	// library beside which a framework's Python code does the opening.
	OpenerPath string `yaml:"opener_path"`
	// When is a glob relative to site-packages that must match for the
	// entry to apply (the distribution that does the opening).
	When string `yaml:"when"`
	// Opens are the names passed to dlopen; "a|b" is a, or else b.
	Opens []string `yaml:"opens"`
	// Dirs are tried by path before dlopen's own search: relative to
	// site-packages (which ones: Sites), or to the opener's directory when
	// they start with $ORIGIN.
	Dirs []string `yaml:"dirs"`
	// Sites says in which site-packages directories relative Dirs are
	// looked for (one of the Sites* constants; SitesOwn when empty).
	Sites string `yaml:"sites"`
	// DirsOnly: the opener loads by path only (no search by name).
	DirsOnly bool `yaml:"dirs_only"`
	// Optional opens are survived when they fail.
	Optional bool `yaml:"optional"`
	// Driver libraries belong to the GPU driver: reported, never fetched.
	Driver bool `yaml:"driver"`
	// Preload (opener_path entries): the framework loads these by path,
	// in order, before it imports the module at opener_path, so the
	// module's own needs of them are met by those copies.
	Preload bool `yaml:"preload"`
	// Fallback (opener_path entries): the framework loads the library at
	// opener_path itself while its package is imported; only when that
	// load fails for want of one of these does it load them by path, in
	// order, and then the library again (see Resolver.Fallback).
	Fallback bool   `yaml:"fallback"`
	Source   string `yaml:"source"`
}

// Where relative Dirs are looked for (Entry.Sites).
const (
	// SitesOwn: the site-packages directory the opener lies in.
	SitesOwn = "own"
	// SitesSysPath: every site directory of the environment in sys.path
	// order, each of Dirs in one before the next one (torch's search of
	// sys.path for NVIDIA's libraries).
	SitesSysPath = "sys_path"
	// SitesUserFirst: each of Dirs in turn, in the user site when the
	// interpreter enables it, then in the other site directories in
	// sys.path order (CUDA Python's pathfinder).
	SitesUserFirst = "user_first"
	// SitesFirstPackage: for each of Dirs, only the first site directory
	// in sys.path order that holds the directory above it (nvidia/cu13 for
	// nvidia/cu13/lib): where importing the package nvidia.cu13 finds it,
	// across the nvidia namespace package (JAX's CUDA plugin).
	SitesFirstPackage = "first_package"
)

// Table is the curated list of run-time opens.
type Table struct {
	Entries []Entry
	bySo    map[string][]int
	byPath  []int
}

// Load parses the built-in table.
func Load() (*Table, error) { return Parse(tableYAML) }

// Parse reads a table and checks every entry.
func Parse(data []byte) (*Table, error) {
	var entries []Entry
	if err := yaml.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("run-time open table: %w", err)
	}
	t := &Table{Entries: entries, bySo: map[string][]int{}}
	for i, e := range entries {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("run-time open table, entry %d (%s%s): %w", i+1, e.Opener, e.OpenerPath, err)
		}
		if e.Opener != "" {
			t.bySo[e.Opener] = append(t.bySo[e.Opener], i)
		} else {
			t.byPath = append(t.byPath, i)
		}
	}
	return t, nil
}

// sonameRE is a library file name: lib (or a plain stem), ".so", then
// numeric version parts; globs may stand for the version.
var sonameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]*\.so(\.[0-9]+|\.\*(\[0-9\])?|\.[0-9]+\*)*$`)

// WellFormed reports whether name can be a library name passed to dlopen:
// no directory, ends in .so with numeric version parts.
func WellFormed(name string) bool {
	return !strings.Contains(name, "/") && sonameRE.MatchString(name)
}

func (e Entry) check() error {
	switch {
	case (e.Opener == "") == (e.OpenerPath == ""):
		return fmt.Errorf("needs exactly one of opener and opener_path")
	case e.Opener != "" && !WellFormed(e.Opener):
		return fmt.Errorf("opener %q is not a library name", e.Opener)
	case strings.TrimSpace(e.Source) == "":
		return fmt.Errorf("no source")
	case len(e.Opens) == 0:
		return fmt.Errorf("opens nothing")
	case e.Driver && e.Optional:
		return fmt.Errorf("driver and optional at once")
	case e.DirsOnly && len(e.Dirs) == 0:
		return fmt.Errorf("dirs_only without dirs")
	case e.Fallback && (e.OpenerPath == "" || e.Preload || len(e.Dirs) == 0):
		return fmt.Errorf("fallback needs opener_path and dirs, and is no preload")
	}
	switch e.Sites {
	case "", SitesOwn, SitesSysPath, SitesUserFirst, SitesFirstPackage:
	default:
		return fmt.Errorf("sites %q is none of %s, %s, %s, %s", e.Sites, SitesOwn, SitesSysPath, SitesUserFirst, SitesFirstPackage)
	}
	for _, pat := range []string{e.OpenerPath, e.When} {
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("bad glob %q", pat)
		}
	}
	for _, o := range e.Opens {
		for _, n := range Alternatives(o) {
			if !WellFormed(n) {
				return fmt.Errorf("opens %q, not a library name", n)
			}
			if strings.ContainsAny(n, "*[") && len(e.Dirs) == 0 {
				return fmt.Errorf("opens the pattern %q without dirs to list", n)
			}
		}
	}
	for _, d := range e.Dirs {
		if d == "" || path.IsAbs(d) || strings.Contains(d, "..") {
			return fmt.Errorf("dir %q must be relative to site-packages or start with $ORIGIN", d)
		}
		if strings.HasPrefix(d, "$ORIGIN") && e.Sites != "" && e.Sites != SitesOwn {
			return fmt.Errorf("dir %q is relative to the opener, and sites %q are site-packages directories", d, e.Sites)
		}
	}
	return nil
}

// Alternatives splits an opens item into the names tried in order.
func Alternatives(open string) []string {
	var out []string
	for _, n := range strings.Split(open, "|") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// ForSoname returns the entries whose opener answers to one of names. An
// entry keyed on an unversioned name (libtorch_cpu.so, as a wheel names
// it) also answers to that name with numeric version parts after ".so":
// Debian's build of the same library is libtorch_cpu.so.2.6.
func (t *Table) ForSoname(names ...string) []Entry {
	var out []Entry
	var seen []int // few: most names are in no entry
	add := func(key string) {
		for _, i := range t.bySo[key] {
			if !slices.Contains(seen, i) {
				seen = append(seen, i)
				out = append(out, t.Entries[i])
			}
		}
	}
	for _, n := range names {
		add(n)
		if stem, ok := unversioned(n); ok {
			add(stem)
		}
	}
	return out
}

// unversioned strips the numeric version parts after ".so" from a library
// name: libtorch_cpu.so.2.6 is libtorch_cpu.so; false when the name has
// none, or parts that are not numbers.
func unversioned(name string) (string, bool) {
	i := strings.LastIndex(name, ".so.")
	if i < 0 {
		return "", false
	}
	// Each part between the dots a number: no part empty, no other byte.
	rest := name[i+len(".so."):]
	digits := 0
	for j := 0; j < len(rest); j++ {
		switch c := rest[j]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && digits > 0:
			digits = 0
		default:
			return "", false
		}
	}
	if digits == 0 {
		return "", false
	}
	return name[:i+len(".so")], true
}

// ForPath returns the entries anchored at a file and the site-packages
// directory they are relative to: file must end in the entry's
// opener_path glob.
func (t *Table) ForPath(file string) (entries []Entry, sitePackages []string) {
	file = path.Clean(file)
	for _, i := range t.byPath {
		e := t.Entries[i]
		// The last n components of file, n those of the entry's path: cut
		// at the n-th slash from the end.
		n := strings.Count(e.OpenerPath, "/") + 1
		cut := len(file)
		for ; n > 0 && cut >= 0; n-- {
			cut = strings.LastIndexByte(file[:cut], '/')
		}
		if cut < 0 {
			continue
		}
		if ok, _ := path.Match(e.OpenerPath, file[cut+1:]); ok {
			entries = append(entries, e)
			sitePackages = append(sitePackages, file[:cut])
		}
	}
	return entries, sitePackages
}
