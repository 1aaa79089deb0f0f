package ldso

import (
	"context"
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// system is a loader the model is compared with: the host's, or the loader
// of a tree run in a chroot or under qemu.
type system struct {
	name string
	root string // "" for the host
	m    elf.Machine
	// list runs the real loader in trace mode on a path as it sees it.
	list func(ctx context.Context, file string, env []string) (*lddtest.Output, error)
}

func hostSystem(t *testing.T) system {
	ldso, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	return system{name: "host", m: elf.EM_X86_64, list: func(ctx context.Context, file string, env []string) (*lddtest.Output, error) {
		return lddtest.List(ctx, ldso, file, env)
	}}
}

func chrootSystem(name string, c *lddtest.Chroot) system {
	return system{name: name, root: c.Root, m: elf.EM_X86_64, list: c.List}
}

func armSystem(name string, s *lddtest.Sysroot) system {
	return system{name: name, root: s.Root, m: elf.EM_AARCH64, list: s.List}
}

// buildSystem builds a loader by name: "host", "chroot" (the host's glibc
// in a tree of its own), "arm64" (Debian bookworm, glibc 2.36, under qemu),
// "trixie" and "trixie-arm64" (glibc 2.41; skipped without the packages).
// A loader that cannot be had skips (or, under CUDADEPS_REQUIRE_ORACLES=1,
// fails) the test that asked for it.
func buildSystem(t *testing.T, name string) system {
	switch name {
	case "host":
		return hostSystem(t)
	case "chroot":
		return chrootSystem(name, lddtest.HostChroot(t))
	case "arm64":
		return armSystem(name, lddtest.ArmSysroot(t))
	case "trixie":
		return chrootSystem(name, lddtest.TrixieChroot(t))
	case "trixie-arm64":
		return armSystem(name, lddtest.TrixieArmSysroot(t))
	}
	t.Fatalf("no system %q", name)
	return system{}
}

// fixture is a tree placed under a fresh directory of a system; "@" in link
// targets, LD_PRELOAD and the preload file stands for that directory as the
// loader sees it.
type fixture struct {
	tree        tree
	main        string
	preload     string  // LD_PRELOAD
	preloadFile *string // the contents of /etc/ld.so.preload (chroots only)
}

// run places the fixture, runs the model and the real loader, compares
// them, and returns the model's result and the fixture directory as the
// loader sees it.
func (sys system) run(t *testing.T, fx fixture) (*Result, string) {
	t.Helper()
	ctx := context.Background()
	var dir, guest string
	if sys.root == "" {
		dir = t.TempDir()
		guest = dir
	} else {
		guest = "/opt/" + strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
		dir = sys.root + guest
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tr := fx.tree
	links := map[string]string{}
	for p, target := range tr.links {
		links[p] = strings.ReplaceAll(target, "@", guest)
	}
	tr.links = links
	tr.write(t, dir, sys.m)
	env := []string{"LC_ALL=C"}
	opts := Options{Root: sys.root, PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }}
	if fx.preload != "" {
		v := strings.ReplaceAll(fx.preload, "@", guest)
		env = append(env, "LD_PRELOAD="+v)
		opts.Preload = []string{v}
	}
	if sys.root != "" {
		pf := filepath.Join(sys.root, "etc", "ld.so.preload")
		_ = os.Remove(pf)
		if fx.preloadFile != nil {
			if err := os.WriteFile(pf, []byte(strings.ReplaceAll(*fx.preloadFile, "@", guest)), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(pf) })
		}
	} else if fx.preloadFile != nil {
		t.Fatal("a preload file needs a tree of its own")
	}
	l, err := New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Closure(ctx, dir+"/"+fx.main)
	if err != nil {
		t.Fatal(err)
	}
	want, err := sys.list(ctx, guest+"/"+fx.main, env)
	if err != nil {
		t.Fatal(err)
	}
	compareOrFatal(t, guest+"/"+fx.main, got, want)
	return got, guest
}

// TestPlatformMatchesLoader checks $PLATFORM against each loader: glibc
// 2.36 on this host and on arm64, glibc 2.41 (which no longer prints it in
// --help) on x86-64 in a chroot and on arm64. Every candidate platform has
// its directory, so the loader's choice shows in the path it takes.
func platformRule(t *testing.T, sys system) {
	{
		{
			objs := map[string]elfwrite.Spec{
				"plat.so": {Soname: "plat.so", Needed: []string{"libP.so", "libQ.so"}, RunPath: str("$ORIGIN/$PLATFORM:$ORIGIN/lib/${PLATFORM}/x")},
			}
			for _, p := range []string{"x86_64", "haswell", "xeon_phi", "aarch64", "i686"} {
				objs[p+"/libP.so"] = leaf("libP.so")
				objs["lib/"+p+"/x/libQ.so"] = leaf("libQ.so")
			}
			got, dir := sys.run(t, fixture{tree: tree{objs: objs}, main: "plat.so"})
			p := got.Arch.Platform
			t.Logf("%s: $PLATFORM = %q (%s)", sys.name, p, got.Arch.Source)
			wantFound(t, got, "libP.so", ViaRunPath, dir+"/"+p+"/libP.so")
			wantFound(t, got, "libQ.so", ViaRunPath, dir+"/lib/"+p+"/x/libQ.so")
		}
	}
}

// dotDotTree is $ORIGIN/../deps reached through pkg/lib, a link to
// real/lib: the kernel takes ".." from real/lib. kernelSide and textSide
// say whether real/deps and pkg/deps hold a libB.so; the two differ in what
// they need, so the closure shows which one was taken.
func dotDotTree(link string, kernelSide, textSide bool) tree {
	objs := map[string]elfwrite.Spec{
		"pkg/main.so":      {Soname: "main.so", Needed: []string{"libA.so", "libc.so.6"}, RunPath: str("$ORIGIN/lib")},
		"real/lib/libA.so": {Soname: "libA.so", Needed: []string{"libB.so", "libc.so.6"}, RunPath: str("$ORIGIN/../deps")},
	}
	if kernelSide {
		objs["real/deps/libB.so"] = elfwrite.Spec{Soname: "libB.so", Needed: []string{"libKernelSide.so", "libc.so.6"}, RunPath: str("$ORIGIN")}
		objs["real/deps/libKernelSide.so"] = leaf("libKernelSide.so")
	}
	if textSide {
		objs["pkg/deps/libB.so"] = elfwrite.Spec{Soname: "libB.so", Needed: []string{"libTextSide.so", "libc.so.6"}, RunPath: str("$ORIGIN")}
		objs["pkg/deps/libTextSide.so"] = leaf("libTextSide.so")
	}
	return tree{objs: objs, links: map[string]string{"pkg/lib": link}}
}

// TestDotDotAfterSymlinkEveryWay checks ".." after a symlinked directory on
// the host and inside trees (chroot and qemu): a different file found, one
// missed, a link inside the rest of the path, an absolute link inside the
// tree, and a main object named through an absolute link.
func dotDotRule(t *testing.T, sys system) {
	{
		{
			t.Run("different file", func(t *testing.T) {
				got, _ := sys.run(t, fixture{tree: dotDotTree("../real/lib", true, true), main: "pkg/main.so"})
				wantFound(t, got, "libKernelSide.so", ViaRunPath, "")
				if find(got, "libTextSide.so") != nil {
					t.Errorf("the model took pkg/deps, textually after pkg/lib/..")
				}
			})
			t.Run("missed", func(t *testing.T) {
				got, _ := sys.run(t, fixture{tree: dotDotTree("../real/lib", false, true), main: "pkg/main.so"})
				wantMissing(t, got, "libB.so")
			})
			t.Run("absolute link", func(t *testing.T) {
				got, _ := sys.run(t, fixture{tree: dotDotTree("@/real/lib", true, true), main: "pkg/main.so"})
				wantFound(t, got, "libKernelSide.so", ViaRunPath, "")
			})
			t.Run("link in the rest of the path", func(t *testing.T) {
				// a/b/.. is other, not real: b is a link inside a link.
				tr := tree{
					objs: map[string]elfwrite.Spec{
						"main.so":                     {Soname: "main.so", Needed: []string{"libB.so", "libc.so.6"}, RunPath: str("$ORIGIN/a/b/../deps")},
						"other/x/README.so":           leaf("README.so"),
						"other/deps/libB.so":          {Soname: "libB.so", Needed: []string{"libKernelSide.so", "libc.so.6"}, RunPath: str("$ORIGIN")},
						"other/deps/libKernelSide.so": leaf("libKernelSide.so"),
						"real/deps/libB.so":           {Soname: "libB.so", Needed: []string{"libTextSide.so", "libc.so.6"}, RunPath: str("$ORIGIN")},
						"real/deps/libTextSide.so":    leaf("libTextSide.so"),
					},
					links: map[string]string{"a": "real", "real/b": "../other/x"},
				}
				got, _ := sys.run(t, fixture{tree: tr, main: "main.so"})
				wantFound(t, got, "libKernelSide.so", ViaRunPath, "")
			})
			t.Run("main through an absolute link", func(t *testing.T) {
				tr := dotDotTree("../real/lib", true, false)
				tr.links["entry/main.so"] = "@/pkg/main.so"
				tr.objs["entry/lib/libA.so"] = leaf("libA.so")
				// $ORIGIN is the link's directory (entry), as the name was given.
				got, dir := sys.run(t, fixture{tree: tr, main: "entry/main.so"})
				wantFound(t, got, "libA.so", ViaRunPath, dir+"/entry/lib/libA.so")
			})
		}
	}
}

// preloadShapes are /etc/ld.so.preload files with comments in every
// position, separators of every kind, no final newline, and a NUL byte.
var preloadShapes = map[string]string{
	"comment line":                 "# @/p1.so\n@/p2.so\n",
	"comment at the end of a line": "@/p1.so # @/p2.so\n@/p3.so\n",
	"two comment lines":            "#a\n#b @/p1.so\n@/p2.so\n",
	"comment after a long line":    "@/p1.so @/p2.so @/p3.so\n# @/p4.so\n",
	"comments late in the file":    "@/p1.so\n#x\n@/p2.so\n# @/p3.so\n#y @/p4.so\n",
	// glibc restarts its search for "#" at the start of the file with
	// the count of bytes left: a second comment after a long first one
	// is not blanked, and its words ("#" too) are preloaded.
	"second comment after a long one": "#" + strings.Repeat("x", 60) + "\n# @/p1.so @/p2.so\n@/p3.so\n",
	"comment without newline":         "@/p1.so #@/p2.so",
	"hash inside a name":              "@/p1.so#@/p2.so\n@/p3.so\n",
	"last name unterminated":          "@/p1.so:@/p2.so\t@/p3.so",
	"only a name":                     "@/p1.so",
	"colons and tabs":                 "::@/p1.so\t\t:@/p2.so::\n\n",
	"missing object":                  "@/p1.so nothere.so @/p2.so\n",
	"NUL in the middle":               "@/p1.so\n@/p2.so\x00@/p3.so\n@/p4.so\n",
	"NUL in the last name":            "@/p1.so\n@/p2.so\x00xyz",
	"only comments":                   "#\n#\n#\n",
	"empty":                           "",
}

func preloadTree() tree {
	objs := map[string]elfwrite.Spec{
		"main.so": {Soname: "main.so", Needed: []string{"libc.so.6"}},
	}
	for _, p := range []string{"p1", "p2", "p3", "p4"} {
		objs[p+".so"] = leaf(p + ".so")
	}
	return tree{objs: objs}
}

// TestPreloadFileMatchesLoader checks each shape of /etc/ld.so.preload
// against the real loader reading it in a tree of its own.
func preloadFileRule(t *testing.T, sys system) {
	{
		{
			for name, body := range preloadShapes {
				t.Run(name, func(t *testing.T) {
					got, dir := sys.run(t, fixture{tree: preloadTree(), main: "main.so", preloadFile: &body})
					n := 0
					for _, o := range got.Objects {
						if o.Via == ViaPreload && strings.HasPrefix(o.Path, dir+"/p") {
							n++
						}
					}
					if strings.Count(body, "@/p") > 0 && n == 0 && !strings.HasPrefix(body, "#") {
						t.Errorf("nothing preloaded from %q", body)
					}
				})
			}
		}
	}
}

// TestPreloadMainOwnFile checks that a preload naming the main object's own
// file loads a second copy (ld.so matches the main object by DT_SONAME
// only), by the same path, another path, and in ld.so.preload; and that its
// soname is matched.
func preloadMainRule(t *testing.T, sys system) {
	tr := tree{objs: map[string]elfwrite.Spec{
		"main.so": {Soname: "libmain.so", Needed: []string{"libA.so", "libc.so.6"}, RunPath: str("$ORIGIN")},
		"libA.so": leaf("libA.so"),
	}}
	{
		{
			t.Run("same path", func(t *testing.T) {
				got, dir := sys.run(t, fixture{tree: tr, main: "main.so", preload: "@/main.so"})
				wantSecondCopy(t, got, dir+"/main.so")
			})
			t.Run("other path", func(t *testing.T) {
				got, dir := sys.run(t, fixture{tree: tr, main: "main.so", preload: "@/./main.so"})
				wantSecondCopy(t, got, dir+"/./main.so")
			})
			t.Run("ld.so itself by another path", func(t *testing.T) {
				sys.run(t, fixture{tree: tr, main: "main.so", preload: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"})
			})
			if sys.root != "" {
				t.Run("preload file", func(t *testing.T) {
					body := "@/main.so\n"
					got, dir := sys.run(t, fixture{tree: tr, main: "main.so", preloadFile: &body})
					wantSecondCopy(t, got, dir+"/main.so")
				})
			}
		}
	}
}

func wantSecondCopy(t *testing.T, r *Result, path string) {
	t.Helper()
	for _, o := range r.Objects {
		if o != r.Main && o.Via == ViaPreload && o.Path == path {
			return
		}
	}
	t.Errorf("%s: no second copy of the main object preloaded", path)
}

// TestLoaderListedWithoutLibc checks when ld.so lists itself for a closure
// that never reaches libc: glibc 2.41 always does, 2.36 does not.
func loaderListedRule(t *testing.T, sys system) {
	tr := tree{objs: map[string]elfwrite.Spec{
		"nolibc.so": {Soname: "nolibc.so", Needed: []string{"libZ.so"}, RunPath: str("$ORIGIN")},
		"libZ.so":   {Soname: "libZ.so"},
	}}
	{
		{
			got, _ := sys.run(t, fixture{tree: tr, main: "nolibc.so"})
			listed := false
			for _, o := range got.Objects {
				listed = listed || o.Via == ViaInterpreter
			}
			t.Logf("glibc %s: ld.so listed: %v", got.Arch.GlibcVersion, listed)
		}
	}
}

// stopRule checks the files on a search path that stop the loader at
// startup, and its message for each: ld.so prints errno values through its
// own short table (elf/dl-minimal.c), so a directory is "Error 21", not
// strerror's "Is a directory".
func stopRule(t *testing.T, sys system) {
	shapes := map[string]tree{
		"directory":    {files: map[string]string{"stop/libD.so/x": ""}},
		"empty file":   {files: map[string]string{"stop/libD.so": ""}},
		"short text":   {files: map[string]string{"stop/libD.so": "INPUT(-lD)\n"}},
		"long text":    {files: map[string]string{"stop/libD.so": "/* GNU ld script */\n" + strings.Repeat("INPUT(-lD)\n", 10)}},
		"ELF, no load": {files: map[string]string{"stop/libD.so": "\x7fELF" + strings.Repeat("\x00", 60)}},
	}
	for name, tr := range shapes {
		t.Run(name, func(t *testing.T) {
			tr.objs = map[string]elfwrite.Spec{
				"main.so": {Soname: "main.so", Needed: []string{"libD.so", "libc.so.6"}, RunPath: str("$ORIGIN/stop")},
			}
			got, _ := sys.run(t, fixture{tree: tr, main: "main.so"})
			if m := wantMissing(t, got, "libD.so"); !m.Fatal {
				t.Errorf("libD.so: the model does not stop the loader (%s)", m.Problem)
			}
		})
	}
}

// TestFidelityRules checks the rules above on every loader that can judge
// them, building each tree once: the host's loader, the host's glibc in a
// chroot, Debian bookworm arm64 (glibc 2.36) and, when fetched, Debian
// trixie x86-64 and arm64 (glibc 2.41).
func TestFidelityRules(t *testing.T) {
	rules := []struct {
		name  string
		check func(*testing.T, system)
		on    string // the systems that can judge it
	}{
		{"$PLATFORM", platformRule, "host chroot arm64 trixie trixie-arm64"},
		{"ld.so listed without libc", loaderListedRule, "host arm64 trixie trixie-arm64"},
		{".. after a symlink", dotDotRule, "host chroot arm64 trixie"},
		{"ld.so.preload shapes", preloadFileRule, "chroot arm64 trixie-arm64"},
		{"preloading the main object's file", preloadMainRule, "host chroot trixie"},
		{"files that stop the loader", stopRule, "host chroot arm64 trixie trixie-arm64"},
	}
	for _, name := range []string{"host", "chroot", "arm64", "trixie", "trixie-arm64"} {
		t.Run(name, func(t *testing.T) {
			sys := buildSystem(t, name)
			for _, r := range rules {
				if strings.Contains(" "+r.on+" ", " "+sys.name+" ") {
					t.Run(r.name, func(t *testing.T) { r.check(t, sys) })
				}
			}
		})
	}
}
