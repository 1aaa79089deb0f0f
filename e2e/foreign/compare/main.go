//go:build linux

// Command compare checks `cudadeps scan --root TREE --json` against the real loader of a foreign tree, edge by edge, for every ELF object of the tree and in several loader setups.
//
// The oracle is the tree's own ld.so in trace mode (LD_TRACE_LOADED_OBJECTS=1),
// run inside the tree with chroot(2); an arm64 tree's loader runs under
// qemu-aarch64-static, copied into the tree. An edge is one line of the
// loader's list: a requested name and the file it resolved to, or "not
// found" (the loader's own line is the edge "<interpreter>"). Each name is
// taken once per object, at its first line, on both sides.
//
// Usage (as root, on a tree made by build-tree.sh):
//
//	go run ./e2e/foreign/compare -cudadeps BIN [-j N] [-variants a,b] [-show N] TREE
//
// Each variant changes the tree for its run (a preload file, a symlinked
// directory, libraries in glibc-hwcaps subdirectories, with the cache
// rebuilt by the tree's ldconfig) and puts it back afterwards.
package main

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

func main() {
	bin := flag.String("cudadeps", "cudadeps", "the cudadeps binary to check")
	jobs := flag.Int("j", 2, "loader runs at once")
	variants := flag.String("variants", strings.Join(variantNames, ","), "the variants to run, in order")
	show := flag.Int("show", 10, "disagreeing edges printed per variant")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: compare [-cudadeps BIN] [-j N] [-variants a,b] [-show N] TREE")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "compare: runs the tree's loader with chroot(2), which needs root")
		os.Exit(1)
	}
	tree, err := filepath.Abs(flag.Arg(0))
	if err == nil {
		tree, err = filepath.EvalSymlinks(tree)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
	t, err := openTree(tree)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	failed := false
	for _, name := range strings.Split(*variants, ",") {
		v, ok := variantByName(name)
		if !ok {
			fmt.Fprintf(os.Stderr, "compare: no variant %q (have %s)\n", name, strings.Join(variantNames, ", "))
			os.Exit(2)
		}
		r, err := t.run(ctx, v, *bin, *jobs)
		if err != nil {
			fmt.Fprintf(os.Stderr, "compare: %s: %v\n", name, err)
			failed = true
			continue
		}
		r.print(os.Stdout, t, v, *show)
		if r.edges != r.agree {
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// tree is a foreign tree and how to run its loader.
type tree struct {
	root    string
	arch    string // amd64 or arm64
	triplet string
	machine elf.Machine
	interp  string // the loader's path inside the tree
	qemu    string // the copy of qemu-aarch64-static inside the tree
}

func openTree(root string) (*tree, error) {
	t := &tree{root: root}
	switch {
	case exists(filepath.Join(root, "usr/lib/ld-linux-aarch64.so.1")):
		t.arch, t.triplet, t.machine, t.interp = "arm64", "aarch64-linux-gnu", elf.EM_AARCH64, "/lib/ld-linux-aarch64.so.1"
		t.qemu = "/.qemu-aarch64-static"
		if !exists(root + t.qemu) {
			return nil, fmt.Errorf("%s: no %s in the tree (build-tree.sh puts it there)", root, t.qemu)
		}
	case exists(filepath.Join(root, "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")):
		t.arch, t.triplet, t.machine, t.interp = "amd64", "x86_64-linux-gnu", elf.EM_X86_64, "/lib64/ld-linux-x86-64.so.2"
	default:
		return nil, fmt.Errorf("%s: neither an amd64 nor an arm64 Debian tree", root)
	}
	if !exists(filepath.Join(root, "etc/ld.so.cache")) {
		return nil, fmt.Errorf("%s: no etc/ld.so.cache", root)
	}
	return t, nil
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// ldconfig rebuilds the tree's cache with the tree's own ldconfig.
func (t *tree) ldconfig() error {
	args := []string{t.root, "/usr/sbin/ldconfig"}
	if t.qemu != "" {
		args = []string{t.root, t.qemu, "/usr/sbin/ldconfig"}
	}
	if out, err := exec.Command("chroot", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ldconfig in %s: %v: %s", t.root, err, out)
	}
	return nil
}

// list runs the tree's loader in trace mode on file (a path inside the
// tree).
func (t *tree) list(ctx context.Context, file string, env []string) (*lddtest.Output, error) {
	if t.qemu == "" {
		c := lddtest.Chroot{Root: t.root, Interp: t.interp}
		return c.List(ctx, file, env)
	}
	s := lddtest.Sysroot{Root: t.root, Qemu: t.qemu}
	return s.List(ctx, file, env)
}

// objects lists the ELF shared objects and executables of the tree's own
// machine under dir (a path inside the tree), as paths inside the tree,
// without following links to directories except dir itself.
func (t *tree) objects(dir string) ([]string, error) {
	real, err := t.resolve(dir)
	if err != nil {
		return nil, err
	}
	start := t.root + real
	var out []string
	err = filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := elf.Open(p)
		if err != nil {
			return nil // not ELF, or not a file debug/elf reads
		}
		defer f.Close()
		if f.Machine != t.machine || (f.Type != elf.ET_DYN && f.Type != elf.ET_EXEC) {
			return nil
		}
		rel, err := filepath.Rel(start, p)
		if err != nil {
			return err
		}
		out = append(out, filepath.Join(dir, rel))
		return nil
	})
	sort.Strings(out)
	return out, err
}

// setup is one variant's state of the tree.
type setup struct {
	env      []string // the loader's environment (besides LC_ALL=C)
	args     []string // cudadeps's flags for the same
	roots    []string // the objects compared, inside the tree
	describe string
}

type variant struct {
	name string
	// apply changes the tree and returns the setup and how to undo it.
	apply func(t *tree) (setup, func() error, error)
}

var variantNames = []string{"plain", "ld_library_path", "preload", "symlinked_dirs", "hwcaps", "stoppers", "old_libstdc++"}

func variantByName(name string) (variant, bool) {
	switch name {
	case "plain":
		return variant{name, plain}, true
	case "ld_library_path":
		return variant{name, ldLibraryPath}, true
	case "preload":
		return variant{name, preload}, true
	case "symlinked_dirs":
		return variant{name, symlinkedDirs}, true
	case "hwcaps":
		return variant{name, hwcaps}, true
	case "stoppers":
		return variant{name, stoppers}, true
	case "old_libstdc++":
		return variant{name, oldLibstdcxx}, true
	}
	return variant{}, false
}

func allObjects(t *tree) ([]string, error) { return t.objects("/") }

func plain(t *tree) (setup, func() error, error) {
	roots, err := allObjects(t)
	return setup{roots: roots, describe: "no environment, no preload file"}, func() error { return nil }, err
}

// undoer collects what a variant added to the tree, removed in reverse.
type undoer struct {
	t       *tree
	added   []string
	recache bool
}

func (u *undoer) add(p string) { u.added = append(u.added, p) }

func (u *undoer) undo() error {
	var errs []error
	for i := len(u.added) - 1; i >= 0; i-- {
		errs = append(errs, os.RemoveAll(u.added[i]))
	}
	if u.recache {
		errs = append(errs, u.t.ldconfig())
	}
	return errors.Join(errs...)
}

// copyFile copies the file inside the tree at src (links followed inside
// the tree by the kernel's rules, as the loader would) to dst.
func (u *undoer) copyFile(src, dst string) error {
	real, err := u.t.resolve(src)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(u.t.root + real)
	if err != nil {
		return err
	}
	if err := u.mkdirAll(filepath.Dir(dst)); err != nil {
		return err
	}
	u.add(u.t.root + dst)
	return os.WriteFile(u.t.root+dst, data, 0o644)
}

// mkdirAll makes dir (inside the tree) and records the first directory it
// created.
func (u *undoer) mkdirAll(dir string) error {
	first := ""
	for d := dir; d != "/" && !exists(u.t.root+d); d = filepath.Dir(d) {
		first = d
	}
	if first == "" {
		return nil
	}
	u.add(u.t.root + first)
	return os.MkdirAll(u.t.root+dir, 0o755)
}

func (u *undoer) symlink(target, link string) error {
	if err := u.mkdirAll(filepath.Dir(link)); err != nil {
		return err
	}
	u.add(u.t.root + link)
	return os.Symlink(target, u.t.root+link)
}

func (u *undoer) writeFile(p, data string) error {
	if exists(u.t.root + p) {
		return fmt.Errorf("%s already exists in the tree", p)
	}
	if err := u.mkdirAll(filepath.Dir(p)); err != nil {
		return err
	}
	u.add(u.t.root + p)
	return os.WriteFile(u.t.root+p, []byte(data), 0o644)
}

// resolve follows links in p (a path inside the tree) as the kernel would
// after chroot(2), one component at a time (".." after a link is taken
// from the link's target), returning the path inside the tree.
func (t *tree) resolve(p string) (string, error) {
	cur := "/"
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for hops := 0; len(parts) > 0; {
		c := parts[0]
		parts = parts[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		target, err := os.Readlink(t.root + next)
		if err != nil {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many links", p)
		}
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		parts = append(strings.Split(strings.Trim(target, "/"), "/"), parts...)
	}
	if !exists(t.root + cur) {
		return "", fmt.Errorf("%s: no such file in the tree", p)
	}
	return cur, nil
}

// ldLibraryPath puts copies of common libraries in /opt/llp and the NVIDIA
// driver's directory (reached in Debian through alternatives only) on
// LD_LIBRARY_PATH, with an empty entry (the working directory, "/").
func ldLibraryPath(t *tree) (setup, func() error, error) {
	u := &undoer{t: t}
	lib := "/usr/lib/" + t.triplet
	for _, name := range []string{"libz.so.1", "libstdc++.so.6", "libgcc_s.so.1", "libzstd.so.1"} {
		if err := u.copyFile(lib+"/"+name, "/opt/llp/"+name); err != nil {
			return setup{}, u.undo, err
		}
	}
	llp := "/opt/llp::" + lib + "/nvidia/current"
	roots, err := allObjects(t)
	return setup{
		env:      []string{"LD_LIBRARY_PATH=" + llp},
		args:     []string{"--ld-library-path", llp},
		roots:    roots,
		describe: "LD_LIBRARY_PATH=" + llp + " (copies of libz, libstdc++, libgcc_s, libzstd in /opt/llp)",
	}, u.undo, err
}

// preload writes an /etc/ld.so.preload with comments in every position
// and sets LD_PRELOAD too.
func preload(t *tree) (setup, func() error, error) {
	u := &undoer{t: t}
	lib := "/usr/lib/" + t.triplet
	file := "# preloads of this system\n" +
		lib + "/libz.so.1 # a comment after a name\n" +
		"libm.so.6\t#tab, then a comment\n" +
		"#" + lib + "/libnotthere.so\n" +
		"  libgcc_s.so.1:libnuma.so.1   # two names, a colon between\n" +
		"libexpat.so.1#no space before the comment\n" +
		"\n"
	if err := u.writeFile("/etc/ld.so.preload", file); err != nil {
		return setup{}, u.undo, err
	}
	pre := lib + "/libzstd.so.1"
	roots, err := allObjects(t)
	return setup{
		env:      []string{"LD_PRELOAD=" + pre},
		args:     []string{"--preload", pre},
		roots:    roots,
		describe: fmt.Sprintf("LD_PRELOAD=%s and /etc/ld.so.preload %q", pre, file),
	}, u.undo, err
}

// symlinkedDirs reaches LibreOffice, torch and the NVIDIA driver's
// directory through links (relative and absolute), and compares every
// object under them by the linked path: $ORIGIN is then the link's
// directory, and $ORIGIN/.. is resolved by the kernel.
func symlinkedDirs(t *tree) (setup, func() error, error) {
	u := &undoer{t: t}
	lib := "/usr/lib/" + t.triplet
	torch := "/usr/lib/python3/dist-packages/torch"
	links := [][2]string{
		{"../../usr/lib/libreoffice/program", "/opt/links/lo-program"},
		{"/usr/lib/libreoffice", "/opt/links/lo"},
		{torch, "/opt/links/torch"},
		{"../../usr/lib/firefox-esr", "/opt/links/firefox"},
		{lib + "/nvidia/current", "/opt/links/nvidia"},
		{"/opt/links/nvidia", "/opt/links/nvidia-again"},
		{torch + "/bin", "/opt/links/torch-bin"},
	}
	var roots, made []string
	for _, l := range links {
		// Only links to what this tree has (bookworm has no NVIDIA
		// driver library, no torch/bin).
		target := l[0]
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(l[1]), target)
		}
		if _, err := t.resolve(target); err != nil {
			continue
		}
		if err := u.symlink(l[0], l[1]); err != nil {
			return setup{}, u.undo, err
		}
		made = append(made, path.Base(l[1])+" -> "+l[0])
		if l[1] == "/opt/links/nvidia-again" {
			continue
		}
		objs, err := t.objects(l[1])
		if err != nil {
			return setup{}, u.undo, err
		}
		roots = append(roots, objs...)
	}
	desc := "objects under /opt/links, links to directories (" + strings.Join(made, ", ") + ")"
	if _, err := t.resolve(torch + "/bin"); err == nil {
		// torch's test programs have RUNPATH ":$ORIGIN/../lib": through
		// /opt/links/torch-bin the kernel takes ".." from torch/bin, so
		// torch/lib is searched, not /opt/links/lib. Both hold a
		// libstdc++, a copy of the real one and one that needs
		// libTextSide.so.1, so the closure shows which was taken.
		if err := u.copyFile(lib+"/libstdc++.so.6", torch+"/lib/libstdc++.so.6"); err != nil {
			return setup{}, u.undo, err
		}
		decoy, err := elfwrite.Build(elfwrite.Spec{Machine: t.machine, Soname: "libstdc++.so.6", Needed: []string{"libTextSide.so.1", "libc.so.6"}})
		if err != nil {
			return setup{}, u.undo, err
		}
		if err := u.writeFile("/opt/links/lib/libstdc++.so.6", string(decoy)); err != nil {
			return setup{}, u.undo, err
		}
		desc += "; torch-bin's RUNPATH $ORIGIN/../lib through the link: a copy of libstdc++ in torch/lib, one needing libTextSide.so.1 in /opt/links/lib"
	}
	// ".." after a link in LD_LIBRARY_PATH too: textually the first entry
	// would be /opt/links/current, which does not exist.
	llp := "/opt/links/nvidia/../current:/opt/links/nvidia-again"
	return setup{
		env:      []string{"LD_LIBRARY_PATH=" + llp},
		args:     []string{"--ld-library-path", llp},
		roots:    roots,
		describe: desc + "; LD_LIBRARY_PATH=" + llp + " ('..' after a link, a link to a link)",
	}, u.undo, nil
}

// hwcaps puts copies of common libraries in glibc-hwcaps subdirectories of
// the multiarch directory (found through the cache, rebuilt) and of an
// LD_LIBRARY_PATH directory (searched directly).
func hwcaps(t *tree) (setup, func() error, error) {
	u := &undoer{t: t, recache: true}
	lib := "/usr/lib/" + t.triplet
	subdirs := []string{"x86-64-v2", "x86-64-v3", "x86-64-v4"}
	if t.arch == "arm64" {
		// glibc 2.41 has no aarch64 subdirectories: the loader should
		// ignore all of these.
		subdirs = append(subdirs, "aarch64", "generic")
	}
	for _, sub := range subdirs {
		for _, name := range []string{"libz.so.1", "libstdc++.so.6"} {
			if err := u.copyFile(lib+"/"+name, lib+"/glibc-hwcaps/"+sub+"/"+name); err != nil {
				return setup{}, u.undo, err
			}
		}
		if err := u.copyFile(lib+"/libgcc_s.so.1", "/opt/hw/glibc-hwcaps/"+sub+"/libgcc_s.so.1"); err != nil {
			return setup{}, u.undo, err
		}
	}
	if err := u.copyFile(lib+"/libgcc_s.so.1", "/opt/hw/libgcc_s.so.1"); err != nil {
		return setup{}, u.undo, err
	}
	// $PLATFORM: a directory for each name the loader might choose.
	platforms := []string{"x86_64", "haswell", "xeon_phi", "i686", "aarch64"}
	for _, p := range platforms {
		if err := u.copyFile(lib+"/libz.so.1", "/opt/plat/"+p+"/libz.so.1"); err != nil {
			return setup{}, u.undo, err
		}
	}
	if err := t.ldconfig(); err != nil {
		return setup{}, u.undo, err
	}
	roots, err := allObjects(t)
	llp := "/opt/hw:/opt/plat/$PLATFORM"
	return setup{
		env:      []string{"LD_LIBRARY_PATH=" + llp},
		args:     []string{"--ld-library-path", llp},
		roots:    roots,
		describe: "libz, libstdc++ in " + lib + "/glibc-hwcaps/{" + strings.Join(subdirs, ",") + "} (cache rebuilt), libgcc_s in /opt/hw and its glibc-hwcaps subdirectories, libz in /opt/plat/{" + strings.Join(platforms, ",") + "}, LD_LIBRARY_PATH=" + llp,
	}, u.undo, err
}

// countShape tallies an agreeing edge by the rule its path shows.
func (r *result) countShape(p string) {
	if r.shapes == nil {
		r.shapes = map[string]int{}
	}
	switch {
	case p == "":
		r.shapes["not found"]++
	case strings.Contains(p, "/glibc-hwcaps/"):
		r.shapes["glibc-hwcaps"]++
	case strings.Contains(p, "/opt/plat/"):
		r.shapes["$PLATFORM"]++
	case strings.Contains(p, "/../"):
		r.shapes["'..'"]++
	case strings.HasPrefix(p, "/opt/"):
		r.shapes["/opt (the variant's files)"]++
	}
}

// stoppers puts files the loader skips or stops on first on
// LD_LIBRARY_PATH: a library of the other machine (skipped), a directory
// (skipped) and an empty file (the loader stops: "file too short").
func stoppers(t *tree) (setup, func() error, error) {
	u := &undoer{t: t}
	other := elf.EM_AARCH64
	if t.machine == elf.EM_AARCH64 {
		other = elf.EM_X86_64
	}
	if err := u.mkdirAll("/opt/stop/libz.so.1"); err != nil {
		return setup{}, u.undo, err
	}
	data, err := elfwrite.Build(elfwrite.Spec{Machine: other, Soname: "libgcc_s.so.1"})
	if err != nil {
		return setup{}, u.undo, err
	}
	if err := u.writeFile("/opt/stop/libgcc_s.so.1", string(data)); err != nil {
		return setup{}, u.undo, err
	}
	if err := u.writeFile("/opt/stop/libzstd.so.1", ""); err != nil {
		return setup{}, u.undo, err
	}
	roots, err := allObjects(t)
	llp := "/opt/stop"
	return setup{
		env:      []string{"LD_LIBRARY_PATH=" + llp},
		args:     []string{"--ld-library-path", llp},
		roots:    roots,
		describe: "LD_LIBRARY_PATH=/opt/stop: libgcc_s.so.1 of another machine, libz.so.1 a directory, libzstd.so.1 empty",
	}, u.undo, err
}

// oldLibstdcxx puts an older libstdc++ (GCC 12, unpacked by build-tree.sh
// beside the tree in TREE.old) first on LD_LIBRARY_PATH: the objects built
// with GCC 14 need symbol versions it lacks.
func oldLibstdcxx(t *tree) (setup, func() error, error) {
	u := &undoer{t: t}
	src := t.root + ".old/usr/lib/" + t.triplet + "/libstdc++.so.6"
	real, err := filepath.EvalSymlinks(src)
	if err != nil {
		return setup{}, u.undo, fmt.Errorf("no older libstdc++ beside the tree (build-tree.sh unpacks it): %w", err)
	}
	data, err := os.ReadFile(real)
	if err != nil {
		return setup{}, u.undo, err
	}
	if err := u.mkdirAll("/opt/old"); err != nil {
		return setup{}, u.undo, err
	}
	if err := u.writeFile("/opt/old/libstdc++.so.6", string(data)); err != nil {
		return setup{}, u.undo, err
	}
	roots, err := allObjects(t)
	return setup{
		env:      []string{"LD_LIBRARY_PATH=/opt/old"},
		args:     []string{"--ld-library-path", "/opt/old"},
		roots:    roots,
		describe: "LD_LIBRARY_PATH=/opt/old, with the libstdc++.so.6 of GCC 12 (" + filepath.Base(real) + ")",
	}, u.undo, err
}

// result is one variant's figures.
type result struct {
	objects, agreeObjects int
	static, stopped       int // objects the loader refused, or stopped on
	edges, agree          int
	loaderOnly, ourOnly   int
	// Version errors: "provider: version V not found (required by X)".
	versionErrors, versionAgree int
	// Preloads ignored with a warning: "object 'X' from SOURCE".
	preloadWarnings, preloadAgree int
	// shapes counts agreeing edges by what they went through.
	shapes map[string]int
	diffs  []string
	desc   string
}

func (r *result) print(w io.Writer, t *tree, v variant, show int) {
	pct := 100.0
	if r.edges > 0 {
		pct = 100 * float64(r.agree) / float64(r.edges)
	}
	fmt.Fprintf(w, "%s %s: %d objects (%d agree entirely; %d without DT_NEEDED or not dynamic, %d stopped by the loader), %d edges, %d agree (%.2f %%); %d only in ld.so, %d only in cudadeps\n",
		filepath.Base(t.root), v.name, r.objects, r.agreeObjects, r.static, r.stopped, r.edges, r.agree, pct, r.loaderOnly, r.ourOnly)
	fmt.Fprintf(w, "  version errors: %d, %d agree; preloads ignored with a warning: %d, %d agree\n", r.versionErrors, r.versionAgree, r.preloadWarnings, r.preloadAgree)
	var shapes []string
	for _, k := range slices.Sorted(maps.Keys(r.shapes)) {
		shapes = append(shapes, fmt.Sprintf("%s %d", k, r.shapes[k]))
	}
	fmt.Fprintf(w, "  agreeing edges among them: %s\n", strings.Join(shapes, ", "))
	fmt.Fprintf(w, "  setup: %s\n", r.desc)
	for i, d := range r.diffs {
		if i == show {
			fmt.Fprintf(w, "  ... %d more\n", len(r.diffs)-show)
			break
		}
		fmt.Fprintf(w, "  DIFF %s\n", d)
	}
}

// scanJSON is the part of `scan --json` compared.
type scanJSON struct {
	Roots []struct {
		Path    string `json:"path"`
		Closure []struct {
			Soname   string   `json:"soname"`
			Path     *string  `json:"path"`
			Via      string   `json:"via"`
			NeededBy []string `json:"needed_by"`
		} `json:"closure"`
		Warnings      []string `json:"warnings"`
		VersionErrors []struct {
			Object   string `json:"object"`
			Provider string `json:"provider"`
			Version  string `json:"version"`
			Weak     bool   `json:"weak"`
		} `json:"version_errors"`
		Missing []struct {
			Soname  string `json:"soname"`
			Fatal   bool   `json:"fatal"`
			Problem string `json:"problem"`
		} `json:"missing"`
	} `json:"roots"`
	Errors []struct {
		Path  string `json:"path"`
		Error string `json:"error"`
	} `json:"errors"`
}

const interpKey = "<interpreter>"

func (t *tree) run(ctx context.Context, v variant, bin string, jobs int) (*result, error) {
	s, undo, err := v.apply(t)
	defer func() {
		if err := undo(); err != nil {
			slog.Error("putting the tree back", "variant", v.name, "err", err)
		}
	}()
	if err != nil {
		return nil, err
	}
	ours, err := t.scan(ctx, bin, s)
	if err != nil {
		return nil, err
	}
	type answer struct {
		out *lddtest.Output
		err error
	}
	answers := make([]answer, len(s.roots))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(jobs, 1))
	for i, file := range s.roots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := t.list(ctx, file, append([]string{"LC_ALL=C"}, s.env...))
			answers[i] = answer{out, err}
		}()
	}
	wg.Wait()
	r := &result{desc: s.describe}
	for i, file := range s.roots {
		r.objects++
		a := answers[i]
		if a.err != nil {
			return nil, a.err
		}
		if a.out.Static {
			// ld.so prints "statically linked" instead of its list when
			// the object has no DT_NEEDED (its preloads are loaded, not
			// printed): cudadeps agrees when it lists nothing the object
			// itself needs.
			r.static++
			g := ours[file]
			var extra []string
			for n, e := range g.edges {
				if e.via != "interpreter" && e.via != "preload" && slices.Contains(e.neededBy, file) {
					extra = append(extra, n)
				}
			}
			if len(extra) == 0 {
				r.agreeObjects++
			} else {
				sort.Strings(extra)
				r.diffs = append(r.diffs, fmt.Sprintf("%s: ld.so: no DT_NEEDED; cudadeps lists %s", file, strings.Join(extra, ", ")))
			}
			continue
		}
		if strings.Contains(a.out.Fatal, "not a dynamic executable") {
			r.static++
			if _, ok := ours[file]; !ok {
				r.agreeObjects++
			} else {
				r.diffs = append(r.diffs, file+": ld.so: not a dynamic executable; cudadeps scanned it")
			}
			continue
		}
		got, ok := ours[file]
		if !ok {
			r.diffs = append(r.diffs, file+": cudadeps has no root for it")
			continue
		}
		if a.out.Fatal != "" {
			// The loader prints no list when it stops: the object
			// agrees when cudadeps predicts the stop with its message.
			r.stopped++
			if got.fatal != "" && strings.Contains(a.out.Fatal, got.fatal) {
				r.agreeObjects++
			} else {
				r.diffs = append(r.diffs, fmt.Sprintf("%s: ld.so stopped (%s); cudadeps predicts %q", file, a.out.Fatal, got.fatal))
			}
			continue
		}
		want := loaderEdges(t, a.out)
		same := ok
		names := map[string]bool{}
		for n := range want {
			names[n] = true
		}
		for n := range got.edges {
			names[n] = true
		}
		for _, n := range sortedKeys(names) {
			w, inW := want[n]
			ge, inG := got.edges[n]
			g := ge.path
			r.edges++
			switch {
			case inW && inG && w == g:
				r.agree++
				r.countShape(w)
				continue
			case !inG:
				r.loaderOnly++
			case !inW:
				r.ourOnly++
			}
			same = false
			r.diffs = append(r.diffs, fmt.Sprintf("%s: %s: ld.so %s, cudadeps %s", file, n, show(w, inW), show(g, inG)))
		}
		wantV, allV := map[string]bool{}, map[string]bool{}
		for _, v := range a.out.VersionErrors {
			k := versionKey(v.Provider, v.Version, v.RequiredBy, v.Weak)
			wantV[k], allV[k] = true, true
		}
		for k := range got.versionErrors {
			allV[k] = true
		}
		for _, k := range sortedKeys(allV) {
			r.versionErrors++
			inW, inG := wantV[k], got.versionErrors[k]
			if inW && inG {
				r.versionAgree++
				continue
			}
			same = false
			side := "ld.so"
			if inG {
				side = "cudadeps"
			}
			r.diffs = append(r.diffs, fmt.Sprintf("%s: version error only in %s: %s", file, side, k))
		}
		// Preloads the loader ignores, with a warning.
		wantW, allW := map[string]bool{}, map[string]bool{}
		for _, w := range a.out.Warnings {
			if m := rePreloadWarning.FindStringSubmatch(w); m != nil {
				wantW[m[1]], allW[m[1]] = true, true
			}
		}
		for k := range got.preloadWarnings {
			allW[k] = true
		}
		for _, k := range sortedKeys(allW) {
			r.preloadWarnings++
			if wantW[k] && got.preloadWarnings[k] {
				r.preloadAgree++
				continue
			}
			same = false
			r.diffs = append(r.diffs, fmt.Sprintf("%s: preload warning only in %s: %s", file, map[bool]string{true: "ld.so", false: "cudadeps"}[wantW[k]], k))
		}
		if got.fatal != "" {
			same = false
			r.diffs = append(r.diffs, fmt.Sprintf("%s: cudadeps predicts a stop (%s); ld.so went on", file, got.fatal))
		}
		if same {
			r.agreeObjects++
		}
	}
	return r, nil
}

func show(p string, present bool) string {
	switch {
	case !present:
		return "(no such edge)"
	case p == "":
		return "not found"
	}
	return p
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// loaderEdges turns the loader's list into edges, each name once.
func loaderEdges(t *tree, out *lddtest.Output) map[string]string {
	m := map[string]string{}
	for _, l := range out.Lines {
		name := l.Name
		if l.Path != "" && l.Name == l.Path && strings.Contains(l.Path, "/ld-linux") {
			name = interpKey
		}
		if _, ok := m[name]; ok {
			continue
		}
		m[name] = l.Path
	}
	return m
}

// ourEdge is one closure entry of cudadeps's answer.
type ourEdge struct {
	path, via string
	neededBy  []string
}

func versionKey(provider, version, requiredBy string, weak bool) string {
	w := ""
	if weak {
		w = "weak "
	}
	return fmt.Sprintf("%s: %sversion %s not found (required by %s)", provider, w, version, requiredBy)
}

var rePreloadWarning = regexp.MustCompile(`(object '.*' from \S+) cannot be preloaded`)

// ourRoot is cudadeps's answer for one object.
type ourRoot struct {
	preloadWarnings map[string]bool
	versionErrors   map[string]bool
	edges           map[string]ourEdge
	fatal           string // the loader's message when it stops
}

// scan runs cudadeps on the variant's roots (as paths on this machine)
// and returns its edges by root (as paths inside the tree).
func (t *tree) scan(ctx context.Context, bin string, s setup) (map[string]ourRoot, error) {
	args := append([]string{"scan", "--root", t.root, "--json", "--symbols=false", "--no-runtime-opens"}, s.args...)
	if len(s.args) == 0 || !hasFlag(s.args, "--ld-library-path") {
		args = append(args, "--ld-library-path", "")
	}
	if !hasFlag(s.args, "--preload") {
		args = append(args, "--preload", "")
	}
	for _, r := range s.roots {
		args = append(args, t.root+r)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	// The working directory is the tree's root, which an empty search
	// path entry names, as for the loader run in the chroot at /.
	cmd.Dir = t.root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 3) {
		return nil, fmt.Errorf("cudadeps scan: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var rep scanJSON
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("cudadeps scan --json: %v", err)
	}
	for _, e := range rep.Errors {
		slog.Warn("cudadeps could not scan an object", "path", e.Path, "error", e.Error)
	}
	m := map[string]ourRoot{}
	for _, r := range rep.Roots {
		o := ourRoot{edges: map[string]ourEdge{}, versionErrors: map[string]bool{}, preloadWarnings: map[string]bool{}}
		for _, w := range r.Warnings {
			if m := rePreloadWarning.FindStringSubmatch(w); m != nil {
				o.preloadWarnings[m[1]] = true
			}
		}
		for _, v := range r.VersionErrors {
			o.versionErrors[versionKey(v.Provider, v.Version, v.Object, v.Weak)] = true
		}
		for _, c := range r.Closure {
			name := c.Soname
			if c.Via == "interpreter" {
				name = interpKey
			}
			if _, ok := o.edges[name]; ok {
				continue
			}
			p := ""
			if c.Path != nil {
				p = *c.Path
			}
			o.edges[name] = ourEdge{p, c.Via, c.NeededBy}
		}
		for _, mi := range r.Missing {
			if mi.Fatal && o.fatal == "" {
				// The loader's message, sometimes followed by the
				// file it opened, in parentheses.
				o.fatal, _, _ = strings.Cut(mi.Problem, " (")
			}
		}
		m[strings.TrimPrefix(r.Path, strings.TrimSuffix(t.root, "/"))] = o
		m[r.Path] = o
	}
	return m, nil
}

func hasFlag(args []string, f string) bool {
	for _, a := range args {
		if a == f {
			return true
		}
	}
	return false
}
