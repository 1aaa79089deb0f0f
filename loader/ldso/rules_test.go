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

// tree describes a fixture: ELF objects, symlinks and plain files.
type tree struct {
	objs  map[string]elfwrite.Spec
	links map[string]string // path → target
	files map[string]string // path → contents
}

func (tr tree) write(t *testing.T, dir string, m elf.Machine) {
	t.Helper()
	for p, spec := range tr.objs {
		if spec.Machine == elf.EM_NONE {
			spec.Machine = m
		}
		if err := elfwrite.Write(filepath.Join(dir, p), spec); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range tr.links {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	for p, body := range tr.files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rule is one loader rule, shown by a fixture, with what the model must
// conclude (checked on its own) and the real loader's verdict (compared).
type rule struct {
	name string
	tree tree
	main string
	llp  *string // LD_LIBRARY_PATH; "@" stands for the fixture directory
	// preload is LD_PRELOAD; "@" stands for the fixture directory.
	preload string
	check   func(t *testing.T, dir string, r *Result)
}

func str(s string) *string { return elfwrite.Str(s) }

func find(r *Result, name string) *Object {
	for _, o := range r.Objects {
		if o.Name == name {
			return o
		}
	}
	return nil
}

func wantFound(t *testing.T, r *Result, name string, via Via, path string) *Object {
	t.Helper()
	o := find(r, name)
	if o == nil || !o.Found() {
		t.Fatalf("%s: not found, want found via %s at %s", name, via, path)
	}
	if o.Via != via {
		t.Errorf("%s: found via %s (%s), want %s", name, o.Via, o.From, via)
	}
	if path != "" && o.Path != path {
		t.Errorf("%s: found at %s, want %s", name, o.Path, path)
	}
	return o
}

func wantMissing(t *testing.T, r *Result, name string) Miss {
	t.Helper()
	for _, m := range r.Missing {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("%s: found, want missing", name)
	return Miss{}
}

// leaf needs the C library, as every real library does.
func leaf(soname string) elfwrite.Spec {
	return elfwrite.Spec{Soname: soname, Needed: []string{"libc.so.6"}}
}

func rules(m elf.Machine, sysLib string) []rule {
	wrongMachine := elf.EM_AARCH64
	if m == elf.EM_AARCH64 {
		wrongMachine = elf.EM_X86_64
	}
	return []rule{
		{
			name: "rpath is inherited down the load chain",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":   {Soname: "main.so", Needed: []string{"libB.so"}, RPath: str("$ORIGIN/a")},
				"a/libB.so": {Soname: "libB.so", Needed: []string{"libC.so"}},
				"a/libC.so": leaf("libC.so"),
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				c := wantFound(t, r, "libC.so", ViaRPath, dir+"/a/libC.so")
				if !strings.Contains(c.From, "RPATH of "+dir+"/main.so") {
					t.Errorf("libC.so found by %q, want the RPATH of main.so", c.From)
				}
			},
		},
		{
			name: "runpath is not inherited",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":   {Soname: "main.so", Needed: []string{"libB.so"}, RunPath: str("$ORIGIN/a")},
				"a/libB.so": {Soname: "libB.so", Needed: []string{"libC.so"}},
				"a/libC.so": leaf("libC.so"),
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				wantFound(t, r, "libB.so", ViaRunPath, dir+"/a/libB.so")
				m := wantMissing(t, r, "libC.so")
				if len(m.NeededBy) != 1 || m.NeededBy[0].Name != "libB.so" {
					t.Errorf("libC.so needed by %v, want libB.so", m.NeededBy)
				}
			},
		},
		{
			name: "rpath is ignored when the object has runpath",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":   {Soname: "main.so", Needed: []string{"libB.so", "libC.so"}, RPath: str("$ORIGIN/r"), RunPath: str("$ORIGIN/u")},
				"r/libB.so": leaf("libB.so"),
				"u/libC.so": leaf("libC.so"),
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				wantMissing(t, r, "libB.so")
				wantFound(t, r, "libC.so", ViaRunPath, dir+"/u/libC.so")
			},
		},
		{
			name: "the chain goes on past an ancestor with runpath",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":     {Soname: "main.so", Needed: []string{"libB.so"}, RPath: str("$ORIGIN/a")},
				"a/libB.so":   {Soname: "libB.so", Needed: []string{"libC.so"}, RunPath: str("$ORIGIN/c"), RPath: str("$ORIGIN/d")},
				"a/c/libC.so": {Soname: "libC.so", Needed: []string{"libD.so", "libE.so"}},
				"a/libD.so":   leaf("libD.so"),
				"a/d/libE.so": leaf("libE.so"),
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				d := wantFound(t, r, "libD.so", ViaRPath, dir+"/a/libD.so")
				if !strings.Contains(d.From, "main.so") {
					t.Errorf("libD.so found by %q, want main.so's RPATH", d.From)
				}
				// libB's RPATH is dropped because it has RUNPATH.
				wantMissing(t, r, "libE.so")
			},
		},
		{
			name: "nodeflib skips the cache and the default directories",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so": {Soname: "main.so", Needed: []string{"libm.so.6"}, Flags1: elf.DF_1_NODEFLIB},
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				wantMissing(t, r, "libm.so.6")
			},
		},
		{
			name: "nodeflib still honours LD_LIBRARY_PATH",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so": {Soname: "main.so", Needed: []string{"libm.so.6"}, Flags1: elf.DF_1_NODEFLIB},
			}},
			main: "main.so",
			llp:  str(sysLib),
			check: func(t *testing.T, dir string, r *Result) {
				wantFound(t, r, "libm.so.6", ViaLDLibraryPath, "")
			},
		},
		{
			name: "$ORIGIN is the directory the object was opened from, not its real path",
			tree: tree{
				objs: map[string]elfwrite.Spec{
					"main.so":         {Soname: "main.so", Needed: []string{"libA.so"}, RunPath: str("$ORIGIN/lib")},
					"real/libA.so.1":  {Soname: "libA.so", Needed: []string{"libB.so"}, RunPath: str("$ORIGIN/dep")},
					"lib/dep/libB.so": leaf("libB.so"),
				},
				links: map[string]string{"lib/libA.so": "../real/libA.so.1"},
				files: map[string]string{"real/dep/README": "the real path's dep directory has no libB.so\n"},
			},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				wantFound(t, r, "libA.so", ViaRunPath, dir+"/lib/libA.so")
				wantFound(t, r, "libB.so", ViaRunPath, dir+"/lib/dep/libB.so")
			},
		},
		{
			name: "a candidate of another machine is skipped",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":   {Soname: "main.so", Needed: []string{"libB.so", "libW.so"}, RPath: str("$ORIGIN/a:$ORIGIN/b")},
				"a/libB.so": {Soname: "libB.so", Machine: wrongMachine},
				"b/libB.so": leaf("libB.so"),
				"a/libW.so": {Soname: "libW.so", Machine: wrongMachine},
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				wantFound(t, r, "libB.so", ViaRPath, dir+"/b/libB.so")
				m := wantMissing(t, r, "libW.so")
				if !strings.Contains(m.Problem, "a/libW.so") {
					t.Errorf("libW.so miss says %q, want the rejected candidate named", m.Problem)
				}
			},
		},
		{
			name: "a candidate of another class is skipped",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":   {Soname: "main.so", Needed: []string{"libB.so"}, RPath: str("$ORIGIN/a:$ORIGIN/b")},
				"a/libB.so": {Soname: "libB.so", Class: elf.ELFCLASS32, Machine: elf.EM_386},
				"b/libB.so": leaf("libB.so"),
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				wantFound(t, r, "libB.so", ViaRPath, dir+"/b/libB.so")
			},
		},
		{
			name: "a loaded soname satisfies later requests, and one file loads once",
			tree: tree{
				objs: map[string]elfwrite.Spec{
					"main.so":   {Soname: "main.so", Needed: []string{"libfoo.so", "libbar.so"}, RPath: str("$ORIGIN")},
					"libfoo.so": leaf("libfoo.so.1"),
					"libbar.so": {Soname: "libbar.so", Needed: []string{"libfoo.so.1", "libalias.so"}},
				},
				links: map[string]string{"libalias.so": "libfoo.so"},
			},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				foo := wantFound(t, r, "libfoo.so", ViaRPath, dir+"/libfoo.so")
				if find(r, "libfoo.so.1") != nil || find(r, "libalias.so") != nil {
					t.Errorf("libfoo loaded more than once")
				}
				if len(r.NeededBy(foo)) != 2 {
					t.Errorf("libfoo needed by %d objects, want main.so and libbar.so", len(r.NeededBy(foo)))
				}
			},
		},
		{
			name: "a missing symbol version is reported, a weak one is not fatal",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so": {Soname: "main.so", Needed: []string{"libW.so"}, RPath: str("$ORIGIN"),
					VersionNeeds: []elfwrite.VersionNeed{{File: "libW.so", Versions: []string{"W_1", "W_2", "W_3"}, Weak: []bool{false, false, true}}}},
				"libW.so": {Soname: "libW.so", Needed: []string{"libc.so.6"}, VersionDefs: []string{"W_1"}},
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				var got []string
				for _, v := range r.VersionErrors {
					s := v.Version
					if v.Weak {
						s += "(weak)"
					}
					got = append(got, s)
				}
				if strings.Join(got, ",") != "W_2,W_3(weak)" {
					t.Errorf("version errors %v, want W_2 and weak W_3", got)
				}
				if r.OK() {
					t.Errorf("closure reported OK despite a missing version")
				}
			},
		},
		{
			name: "an empty LD_LIBRARY_PATH entry is the working directory",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":     {Soname: "main.so", Needed: []string{"libB.so"}},
				"cwd/libB.so": leaf("libB.so"),
			}},
			main: "main.so",
			llp:  str(":/nonexistent"),
			check: func(t *testing.T, dir string, r *Result) {
				wantFound(t, r, "libB.so", ViaLDLibraryPath, "libB.so")
			},
		},
		{
			name: "LD_LIBRARY_PATH comes after RPATH and before RUNPATH",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":     {Soname: "main.so", Needed: []string{"libB.so", "libC.so"}, RPath: str("$ORIGIN/r")},
				"r/libB.so":   leaf("libB.so"),
				"llp/libB.so": leaf("libB.so"),
				"llp/libC.so": {Soname: "libC.so", Needed: []string{"libD.so"}, RunPath: str("$ORIGIN/../run")},
				"llp/libD.so": leaf("libD.so"),
				"run/libD.so": leaf("libD.so"),
			}},
			main: "main.so",
			llp:  str("@/llp"),
			check: func(t *testing.T, dir string, r *Result) {
				wantFound(t, r, "libB.so", ViaRPath, dir+"/r/libB.so")
				wantFound(t, r, "libD.so", ViaLDLibraryPath, dir+"/llp/libD.so")
			},
		},
		{
			name: "a file that is not a loadable object stops the loader",
			tree: tree{
				objs:  map[string]elfwrite.Spec{"main.so": {Soname: "main.so", Needed: []string{"libI.so"}, RPath: str("$ORIGIN/a:$ORIGIN/b")}, "b/libI.so": leaf("libI.so")},
				files: map[string]string{"a/libI.so": "INPUT(-lfoo)\n"},
			},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				m := wantMissing(t, r, "libI.so")
				if !m.Fatal || !strings.Contains(m.Problem, "file too short") {
					t.Errorf("libI.so miss = %+v, want a fatal 'file too short'", m)
				}
			},
		},
		{
			name: "an object whose dynamic segment has no bytes stops the loader",
			tree: tree{
				objs:  map[string]elfwrite.Spec{"main.so": {Soname: "main.so", Needed: []string{"libND.so"}, RPath: str("$ORIGIN/a")}},
				files: map[string]string{"a/libND.so": withoutDynamicBytes(m, leaf("libND.so"))},
			},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				m := wantMissing(t, r, "libND.so")
				if !m.Fatal || !strings.Contains(m.Problem, "no dynamic section") {
					t.Errorf("libND.so miss = %+v, want a fatal 'no dynamic section'", m)
				}
			},
		},
		{
			name: "a needed path with $ORIGIN is opened directly",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":     {Soname: "main.so", Needed: []string{"$ORIGIN/sub/libP.so"}},
				"sub/libP.so": leaf("libP.so"),
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				// The loader knows it by its expanded name.
				wantFound(t, r, dir+"/sub/libP.so", ViaPath, dir+"/sub/libP.so")
			},
		},
		{
			name: "preloaded objects load first and satisfy later requests",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":    {Soname: "main.so", Needed: []string{"libQ.so"}},
				"p/libP.so":  leaf("libQ.so"),
				"p/libP2.so": leaf("libP2.so"),
			}},
			main:    "main.so",
			preload: "@/p/libP.so libnothere.so:@/p/libP2.so",
			check: func(t *testing.T, dir string, r *Result) {
				q := wantFound(t, r, dir+"/p/libP.so", ViaPreload, dir+"/p/libP.so")
				if len(r.NeededBy(q)) != 1 || r.NeededBy(q)[0] != r.Main {
					t.Errorf("the preload should satisfy main.so's libQ.so")
				}
				if r.Objects[1] != q {
					t.Errorf("the preload is not loaded first")
				}
				if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "libnothere.so") {
					t.Errorf("warnings %q, want one for libnothere.so", r.Warnings)
				}
			},
		},
		{
			name: "hwcaps subdirectories come before the directory itself",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so":                          {Soname: "main.so", Needed: []string{"libH.so", "libT.so"}, RPath: str("$ORIGIN/a")},
				"a/libH.so":                        leaf("libH.so"),
				"a/glibc-hwcaps/x86-64-v2/libH.so": leaf("libH.so"),
				"a/libT.so":                        leaf("libT.so"),
				"a/tls/libT.so":                    leaf("libT.so"),
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				h := dir + "/a/libH.so"
				for _, c := range r.Arch.HWCaps {
					if c == "x86-64-v2" {
						h = dir + "/a/glibc-hwcaps/x86-64-v2/libH.so"
					}
				}
				wantFound(t, r, "libH.so", ViaRPath, h)
				tls := dir + "/a/libT.so"
				if len(r.Arch.Legacy) > 0 {
					tls = dir + "/a/tls/libT.so"
				}
				wantFound(t, r, "libT.so", ViaRPath, tls)
			},
		},
		{
			name: "$LIB and ${PLATFORM} expand to the loader's values",
			tree: tree{objs: map[string]elfwrite.Spec{
				"main.so": {Soname: "main.so", Needed: []string{"libL.so", "libP.so"}, RPath: str("$ORIGIN/$LIB:$ORIGIN/${PLATFORM}/x")},
			}},
			main: "main.so",
			check: func(t *testing.T, dir string, r *Result) {
				a := r.Arch
				wantFound(t, r, "libL.so", ViaRPath, dir+"/"+a.Lib+"/libL.so")
				wantFound(t, r, "libP.so", ViaRPath, dir+"/"+a.Platform+"/x/libP.so")
			},
		},
	}
}

// addPlatformFiles places the libraries whose location depends on the
// loader's own $LIB and $PLATFORM.
func addPlatformFiles(t *testing.T, dir string, a *ArchConfig, m elf.Machine) {
	for p, soname := range map[string]string{a.Lib + "/libL.so": "libL.so", a.Platform + "/x/libP.so": "libP.so"} {
		spec := leaf(soname)
		spec.Machine = m
		if err := elfwrite.Write(filepath.Join(dir, p), spec); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRulesMatchHostLoader(t *testing.T) {
	ldso, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	ctx := context.Background()
	for _, rl := range rules(elf.EM_X86_64, "/lib/x86_64-linux-gnu") {
		t.Run(rl.name, func(t *testing.T) {
			dir := t.TempDir()
			rl.tree.write(t, dir, elf.EM_X86_64)
			var llp *string
			if rl.llp != nil {
				v := strings.ReplaceAll(*rl.llp, "@", dir)
				llp = &v
			}
			env, opts := hostEnv(llp)
			if rl.preload != "" {
				v := strings.ReplaceAll(rl.preload, "@", dir)
				env = append(env, "LD_PRELOAD="+v)
				opts.Preload = []string{v}
			}
			if _, err := os.Stat(filepath.Join(dir, "cwd")); err == nil {
				t.Chdir(filepath.Join(dir, "cwd"))
			}
			l, err := New(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			main := filepath.Join(dir, rl.main)
			if strings.Contains(rl.name, "$LIB") {
				addPlatformFiles(t, dir, l.Arch(ctx, elf.EM_X86_64, elf.ELFCLASS64, 0), elf.EM_X86_64)
			}
			got, err := l.Closure(ctx, main)
			if err != nil {
				t.Fatal(err)
			}
			rl.check(t, dir, got)
			want, err := lddtest.List(ctx, ldso, main, env)
			if err != nil {
				t.Fatal(err)
			}
			compareOrFatal(t, main, got, want)
		})
	}
}

func TestRulesMatchArm64Loader(t *testing.T) {
	sr := lddtest.ArmSysroot(t)
	ctx := context.Background()
	for _, rl := range rules(elf.EM_AARCH64, "/lib/aarch64-linux-gnu") {
		t.Run(rl.name, func(t *testing.T) {
			// The tree lives inside the root so that qemu and the model see
			// the same paths.
			rel := "/opt/" + strings.NewReplacer(" ", "_", "$", "", "{", "", "}", "", ",", "").Replace(rl.name)
			dir := sr.Root + rel
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			rl.tree.write(t, dir, elf.EM_AARCH64)
			var llp *string
			var env []string
			if rl.llp != nil {
				v := strings.ReplaceAll(*rl.llp, "@", rel)
				llp = &v
				env = append(env, "LD_LIBRARY_PATH="+v)
			}
			if _, err := os.Stat(filepath.Join(dir, "cwd")); err == nil {
				// qemu runs the guest in the host's working directory.
				t.Chdir(filepath.Join(dir, "cwd"))
			}
			var preload []string
			if rl.preload != "" {
				v := strings.ReplaceAll(rl.preload, "@", rel)
				env = append(env, "LD_PRELOAD="+v)
				preload = []string{v}
			}
			l, err := New(ctx, Options{Root: sr.Root, LDLibraryPath: llp, Preload: preload, PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }})
			if err != nil {
				t.Fatal(err)
			}
			main := filepath.Join(dir, rl.main)
			if strings.Contains(rl.name, "$LIB") {
				addPlatformFiles(t, dir, l.Arch(ctx, elf.EM_AARCH64, elf.ELFCLASS64, 0), elf.EM_AARCH64)
			}
			got, err := l.Closure(ctx, main)
			if err != nil {
				t.Fatal(err)
			}
			rl.check(t, rel, got)
			want, err := sr.List(ctx, rel+"/"+rl.main, env)
			if err != nil {
				t.Fatal(err)
			}
			compareOrFatal(t, rel+"/"+rl.main, got, want)
		})
	}
}

// TestNodeflibUsesCacheOutsideDefaultDirs checks the finest NODEFLIB rule:
// ld.so.cache entries are refused only when they lie in the default
// directories; a library the cache knows in another directory still loads.
func TestNodeflibUsesCacheOutsideDefaultDirs(t *testing.T) {
	sr := lddtest.ArmSysroot(t, "/opt/extra/lib")
	if err := elfwrite.Write(filepath.Join(sr.Root, "opt/extra/lib/libE.so.1"), elfwrite.Spec{Machine: elf.EM_AARCH64, Soname: "libE.so.1"}); err != nil {
		t.Fatal(err)
	}
	sr.RebuildCache(t)
	main := "/opt/app/main.so"
	if err := elfwrite.Write(sr.Root+main, elfwrite.Spec{Machine: elf.EM_AARCH64, Soname: "main.so", Needed: []string{"libE.so.1", "libm.so.6"}, Flags1: elf.DF_1_NODEFLIB}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := New(ctx, Options{Root: sr.Root, PreloadSet: true, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Closure(ctx, sr.Root+main)
	if err != nil {
		t.Fatal(err)
	}
	wantFound(t, got, "libE.so.1", ViaCache, "/opt/extra/lib/libE.so.1")
	wantMissing(t, got, "libm.so.6")
	want, err := sr.List(ctx, main, nil)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, main, got, want)
}

// compareOrFatal compares a closure with the loader's trace; when the
// loader stopped with an error, the model must have predicted that stop.
func compareOrFatal(t *testing.T, main string, got *Result, want *lddtest.Output) {
	t.Helper()
	if want.Fatal == "" {
		compare(t, main, got, want)
		return
	}
	for _, m := range got.Missing {
		// The model's problem is the loader's message, sometimes followed
		// by the file it opened, in parentheses.
		msg, _, _ := strings.Cut(m.Problem, " (")
		if m.Fatal && strings.Contains(want.Fatal, msg) {
			return
		}
	}
	t.Errorf("ld.so stopped with %q; the model did not predict it: %+v", want.Fatal, got.Missing)
}

// withoutDynamicBytes builds an object whose PT_DYNAMIC keeps its place but
// has no bytes in the file, as in a separate debug-information file.
func withoutDynamicBytes(m elf.Machine, spec elfwrite.Spec) string {
	spec.Machine = m
	data, err := elfwrite.Build(spec)
	if err != nil {
		panic(err)
	}
	// 64-bit headers: program headers at 64, 56 bytes each, PT_DYNAMIC
	// second (no PT_INTERP), p_filesz at offset 32 within it.
	for i := 0; i < 8; i++ {
		data[64+56+32+i] = 0
	}
	return string(data)
}
