package pyenv

import (
	"cmp"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cudadeps/cudadeps/internal/rootfs"
)

// installation is one Python environment of a root, as its files show it.
type installation struct {
	what    string   // for messages: "python3.12 in /usr, Debian's layout"
	prefix  string   // a venv's directory on this machine; "" for a system installation
	version string   // "3.12"; "" when nothing tells
	sites   []string // site directories, as the root sees them, in sys.path order
	inputs  []string // what else decided it (links, pyvenv.cfg), as the root sees them
}

// Holds reports whether p, a path of this machine, lies inside the tree of
// root (a directory other than "/"), by name: a program there belongs to
// the root's system and is read, never run, even when root does not open.
func Holds(root, p string) bool {
	r, err := filepath.Abs(root)
	if err != nil || root == "" || r == "/" {
		return false
	}
	abs, err := filepath.Abs(p)
	return err == nil && strings.HasPrefix(abs, r+"/")
}

// InRoot finds the Python environment of the system under root (a
// container's rootfs, a sysroot) that holds the distribution name, by
// reading the root's files: no program of the root is run, as the tree may
// be another architecture's. python, when set, is an interpreter inside
// the root (its path on this machine): a venv's (by its pyvenv.cfg, with
// its base installation's site directories when it includes them) or an
// installation's. Otherwise the root's own installations are tried in the
// order rootInstallations gives, and the first whose site directories hold
// name is the environment. The error is one line naming the root and every
// directory looked in.
func InRoot(root, python, name string) (*Env, error) {
	r, err := rootfs.Open(root)
	if err != nil {
		return nil, err
	}
	var insts []installation
	if python != "" {
		in, err := namedInstallation(r, python)
		if err != nil {
			return nil, err
		}
		insts = []installation{in}
	} else {
		insts = rootInstallations(r)
	}
	var looked []string
	for _, in := range insts {
		env := in.env(r)
		for _, d := range env.SiteDirs {
			if !slices.Contains(looked, d) {
				looked = append(looked, d)
			}
		}
		if _, ok := env.lookup(name); ok {
			return env, nil
		}
	}
	where := "its Python installations"
	if python != "" {
		where = insts[0].what
	}
	if len(looked) == 0 {
		patterns := candidatePatterns(r)
		if python != "" {
			patterns = nil
			for _, s := range insts[0].sites {
				patterns = append(patterns, r.Path(s))
			}
			return nil, fmt.Errorf("root %s: %s has no site directory: none of %s is a directory", r.Dir(), where, strings.Join(patterns, ", "))
		}
		return nil, fmt.Errorf("root %s: no Python environment: none of %s is a directory (name one with --site-packages, or a venv's interpreter with --python)", r.Dir(), strings.Join(patterns, ", "))
	}
	return nil, fmt.Errorf("root %s: no installed distribution %q in %s (looked in %s)", r.Dir(), name, where, strings.Join(looked, ", "))
}

// env is the environment of the installation: its site directories that
// exist, as paths of this machine, each once.
func (in installation) env(r *rootfs.Root) *Env {
	env := &Env{Prefix: in.prefix, Version: in.version, Markers: Markers{}, Installation: in.what, files: files{root: r}}
	if in.version != "" {
		env.Markers["python_version"] = in.version
	}
	seen := map[string]bool{}
	for _, s := range in.sites {
		env.Inputs = append(env.Inputs, r.Path(s))
		resolved, err := r.Walk(s, nil)
		if err != nil || seen[resolved] {
			continue
		}
		if st, err := r.Stat(s); err != nil || !st.IsDir() {
			continue
		}
		seen[resolved] = true
		env.SiteDirs = append(env.SiteDirs, r.Path(s))
	}
	for _, p := range in.inputs {
		env.Inputs = append(env.Inputs, r.Path(p))
	}
	return env.remember()
}

// rootInstallations are the Python installations of the root, in the order
// its python3 would be found on the default PATH (/usr/local/bin before
// /usr/bin), each with its site directories in its sys.path order:
//
//   - /usr/local: an interpreter built there (python's container images,
//     make install); it counts only with its standard library there
//     (lib/python3.X/os.py), as Fedora's pip also installs into
//     /usr/local/lib/python3.X/site-packages for the interpreter in /usr.
//     Site: /usr/local/lib/python3.X/site-packages.
//   - /usr with Debian's layout (Debian, Ubuntu), told by
//     /usr/lib/python3/dist-packages, which only their python3 reads:
//     /usr/local/lib/python3.X/dist-packages (pip), then
//     /usr/lib/python3/dist-packages (apt), then
//     /usr/lib/python3.X/dist-packages; no site-packages is on its path.
//   - /usr otherwise (Fedora, RHEL, Arch, Alpine): upstream's
//     PREFIX/{lib64,lib}/python3.X/site-packages, after the same two under
//     /usr/local, which Fedora puts first and the others do not have.
//
// Within a prefix, the version its bin/python3 links to comes first, then
// the others, newest first. A venv is never guessed: it is named (python).
func rootInstallations(r *rootfs.Root) []installation {
	var out []installation
	for _, v := range orderedVersions(r, "/usr/local", versionsIn(r, "/usr/local/lib")) {
		if st, err := r.Stat("/usr/local/lib/python" + v + "/os.py"); err == nil && st.Mode().IsRegular() {
			out = append(out, systemInstallation(r, "/usr/local", v))
		}
	}
	usr := append(versionsIn(r, "/usr/lib"), versionsIn(r, "/usr/lib64")...)
	if len(usr) == 0 {
		usr = versionsIn(r, "/usr/local/lib")
	}
	if len(usr) == 0 {
		usr = []string{""} // Debian's version-independent directory may still be there
	}
	for _, v := range orderedVersions(r, "/usr", usr) {
		out = append(out, systemInstallation(r, "/usr", v))
	}
	return out
}

// candidatePatterns names the site directories rootInstallations looks
// for, with the version as a wildcard: what an error says was looked in.
func candidatePatterns(r *rootfs.Root) []string {
	var out []string
	for _, p := range []string{
		"/usr/local/lib/python3.*/site-packages", "/usr/local/lib/python3.*/dist-packages",
		"/usr/lib/python3/dist-packages", "/usr/lib/python3.*/dist-packages",
		"/usr/lib64/python3.*/site-packages", "/usr/lib/python3.*/site-packages",
	} {
		out = append(out, r.Path(p))
	}
	return out
}

// systemInstallation is the installation of python3.X (version; "" when
// unknown) whose prefix is prefix, with its site directories as the rule of
// rootInstallations orders them.
func systemInstallation(r *rootfs.Root, prefix, version string) installation {
	py := "python" + version
	if version == "" {
		py = "python3"
	}
	in := installation{what: py + " in " + prefix, version: version, inputs: []string{path.Join(prefix, "bin/python3")}}
	debian := prefix == "/usr" && isDir(r, "/usr/lib/python3/dist-packages")
	switch {
	case debian:
		in.what += ", Debian's layout"
		if version != "" {
			in.sites = append(in.sites, "/usr/local/lib/"+py+"/dist-packages")
		}
		in.sites = append(in.sites, "/usr/lib/python3/dist-packages")
		if version != "" {
			in.sites = append(in.sites, "/usr/lib/"+py+"/dist-packages")
		}
	case version == "":
	case prefix == "/usr":
		in.sites = append(in.sites, "/usr/local/lib64/"+py+"/site-packages", "/usr/local/lib/"+py+"/site-packages",
			"/usr/lib64/"+py+"/site-packages", "/usr/lib/"+py+"/site-packages")
	default:
		in.sites = append(in.sites, path.Join(prefix, "lib64", py, "site-packages"), path.Join(prefix, "lib", py, "site-packages"))
	}
	return in
}

// namedInstallation is the environment of the interpreter python, a path
// of this machine inside the root, read from the root's files.
func namedInstallation(r *rootfs.Root, python string) (installation, error) {
	abs, err := filepath.Abs(python)
	if err != nil {
		return installation{}, err
	}
	guest, ok := r.Guest(abs)
	if !ok {
		return installation{}, fmt.Errorf("root %s: python %s is not inside it", r.Dir(), python)
	}
	if _, err := r.Stat(guest); err != nil {
		return installation{}, fmt.Errorf("root %s: python %s: %s", r.Dir(), python, rootfs.Reason(err))
	}
	// The link to the base interpreter that a venv's python usually is
	// decides its version, not where pyvenv.cfg is looked for: beside the
	// program and one directory up, as site.py looks.
	resolved, _ := r.Walk(guest, nil)
	version := versionOf(path.Base(resolved))
	for _, dir := range []string{path.Dir(guest), path.Dir(path.Dir(guest))} {
		cfgPath := path.Join(dir, "pyvenv.cfg")
		data, err := r.ReadFile(cfgPath, 64<<10)
		if err != nil {
			continue
		}
		cfg := parseVenvConfig(string(data))
		if v := majorMinor(cmp.Or(cfg["version_info"], cfg["version"])); v != "" {
			version = v
		}
		if version == "" {
			if vs := versionsIn(r, path.Join(dir, "lib")); len(vs) > 0 {
				version = vs[0]
			}
		}
		if version == "" {
			return installation{}, fmt.Errorf("root %s: venv %s: neither its pyvenv.cfg nor its lib directory says its Python version", r.Dir(), r.Path(dir))
		}
		in := installation{what: "venv " + dir + " of python" + version, prefix: r.Path(dir), version: version,
			inputs: []string{cfgPath, guest}}
		in.sites = []string{path.Join(dir, "lib/python"+version+"/site-packages"), path.Join(dir, "lib64/python"+version+"/site-packages")}
		if strings.EqualFold(cfg["include-system-site-packages"], "true") && cfg["home"] != "" {
			base := systemInstallation(r, path.Dir(path.Clean(cfg["home"])), version)
			in.sites = append(in.sites, base.sites...)
		}
		return in, nil
	}
	// An installation's interpreter: its prefix is the directory above
	// the bin/ it lies in.
	prefix := path.Dir(path.Dir(resolved))
	if version == "" {
		if vs := versionsIn(r, path.Join(prefix, "lib")); len(vs) > 0 {
			version = vs[0]
		}
	}
	in := systemInstallation(r, prefix, version)
	in.inputs = append(in.inputs, guest)
	return in, nil
}

// parseVenvConfig reads pyvenv.cfg's "key = value" lines.
func parseVenvConfig(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok {
			out[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return out
}

// versionsIn lists the versions X.Y of the python3.Y directories in dir,
// newest first.
func versionsIn(r *rootfs.Root, dir string) []string {
	ents, err := r.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if v := versionOf(e.Name()); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return minor(b) - minor(a) })
	return out
}

// orderedVersions puts first among versions the one prefix/bin/python3
// links to.
func orderedVersions(r *rootfs.Root, prefix string, versions []string) []string {
	resolved, err := r.Walk(path.Join(prefix, "bin/python3"), nil)
	if err != nil {
		return versions
	}
	first := versionOf(path.Base(resolved))
	if i := slices.Index(versions, first); i > 0 {
		versions = append(append([]string{first}, versions[:i]...), versions[i+1:]...)
	}
	return versions
}

// versionOf is "3.12" for "python3.12", else "".
func versionOf(name string) string {
	v, ok := strings.CutPrefix(name, "python")
	if !ok || minor(v) < 0 {
		return ""
	}
	return v
}

// minor is Y of "3.Y", -1 for anything else.
func minor(v string) int {
	y, ok := strings.CutPrefix(v, "3.")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(y)
	if err != nil || n < 0 || strconv.Itoa(n) != y {
		return -1
	}
	return n
}

// majorMinor is "3.12" of "3.12.3" or "3.12.3.final.0", "" when it is no
// Python 3 version.
func majorMinor(v string) string {
	f := strings.SplitN(v, ".", 3)
	if len(f) < 2 || minor(f[0]+"."+f[1]) < 0 {
		return ""
	}
	return f[0] + "." + f[1]
}

func isDir(r *rootfs.Root, guest string) bool {
	st, err := r.Stat(guest)
	return err == nil && st.IsDir()
}
