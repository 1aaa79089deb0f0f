package bind

import (
	"context"
	"debug/elf"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// fixture is a root library and the libraries it needs, written side by
// side (the root finds them through RUNPATH $ORIGIN).
type fixture struct {
	name string
	root elfwrite.Linked
	libs map[string]elfwrite.Linked // file name → object
	// want are the misses the fixture is built to show, "symbol" or
	// "symbol, version V", all of the root: ld.so must print exactly these
	// (else the fixture does not test what it says) and so must the model.
	want []string
	// gnuOnly builds it with DT_GNU_HASH alone: the DT_HASH of the
	// fixtures chains every symbol in one bucket, too slow a lookup for
	// thousands of them.
	gnuOnly bool
}

func fixtures() []fixture {
	origin := elfwrite.Str("$ORIGIN")
	return []fixture{{
		name: "soname without the symbol",
		root: elfwrite.Linked{Soname: "libroot.so", Needed: []string{"libp.so.1"}, RunPath: origin,
			Refs: []elfwrite.Ref{{Name: "present"}, {Name: "absent"}}},
		libs: map[string]elfwrite.Linked{"libp.so.1": {Soname: "libp.so.1", Defs: []elfwrite.Def{{Name: "present"}, {Name: "other"}}}},
		want: []string{"absent"},
	}, {
		// The user's libcusparse.so.12 asks __nvJitLinkComplete_12_4 of
		// libnvJitLink.so.12 at a version node an older file defines, but
		// without that symbol in it.
		name: "symbol only at an older version node",
		root: elfwrite.Linked{Soname: "libroot.so", Needed: []string{"libjit.so.12"}, RunPath: origin,
			VersionNeeds: []elfwrite.VersionNeed{{File: "libjit.so.12", Versions: []string{"libjit.so.12", "JIT_12.4"}}},
			Refs:         []elfwrite.Ref{{Name: "jitComplete_12_4", Version: "JIT_12.4"}, {Name: "jitCreate", Version: "libjit.so.12"}}},
		libs: map[string]elfwrite.Linked{"libjit.so.12": {Soname: "libjit.so.12", VersionDefs: []string{"libjit.so.12", "JIT_12.4"},
			Defs: []elfwrite.Def{{Name: "jitComplete_12_4", Version: "libjit.so.12"}, {Name: "jitCreate", Version: "libjit.so.12"}}}},
		want: []string{"jitComplete_12_4, version JIT_12.4"},
	}, {
		// A linker keeps an undefined symbol whose only user it dropped
		// (libtorch_python.so's PyExc_FutureWarning): no relocation names
		// it, so ld.so never looks it up and reports nothing.
		name: "undefined symbol no relocation names",
		root: elfwrite.Linked{Soname: "libroot.so", Needed: []string{"libp.so.1"}, RunPath: origin,
			Refs: []elfwrite.Ref{{Name: "present"}, {Name: "dropped_user", Unrelocated: true}, {Name: "absent"}}},
		libs: map[string]elfwrite.Linked{"libp.so.1": {Soname: "libp.so.1", Defs: []elfwrite.Def{{Name: "present"}}}},
		want: []string{"absent"},
	}, {
		name: "weak undefined reference",
		root: elfwrite.Linked{Soname: "libroot.so", Needed: []string{"libp.so.1"}, RunPath: origin,
			Refs: []elfwrite.Ref{{Name: "optional_hook", Weak: true}, {Name: "present"}, {Name: "missing_strong"}}},
		libs: map[string]elfwrite.Linked{"libp.so.1": {Soname: "libp.so.1", Defs: []elfwrite.Def{{Name: "present"}}}},
		want: []string{"missing_strong"},
	}, {
		// Versions H_1, H_2, H_3 take indexes 2, 3, 4.
		name: "hidden and default versions",
		root: elfwrite.Linked{Soname: "libroot.so", Needed: []string{"libh.so.1"}, RunPath: origin,
			VersionNeeds: []elfwrite.VersionNeed{{File: "libh.so.1", Versions: []string{"H_1", "H_2", "H_3"}}},
			Refs: []elfwrite.Ref{
				{Name: "two_versions"},                // a hidden H_2 and a default H_3: takes H_3
				{Name: "only_hidden"},                 // H_2, hidden: not for an unversioned reference
				{Name: "only_hidden", Version: "H_2"}, // but a versioned one binds it
				{Name: "oldest_hidden"},               // H_1 is the first version: taken even hidden
				{Name: "only_default"},
				{Name: "two_versions", Version: "H_1"}, // defined at H_2 and H_3 only
				{Name: "only_default", Version: "H_3"},
			}},
		libs: map[string]elfwrite.Linked{"libh.so.1": {Soname: "libh.so.1", VersionDefs: []string{"H_1", "H_2", "H_3"},
			Defs: []elfwrite.Def{
				{Name: "two_versions", Version: "H_2", Hidden: true}, {Name: "two_versions", Version: "H_3"},
				{Name: "only_hidden", Version: "H_2", Hidden: true},
				{Name: "oldest_hidden", Version: "H_1", Hidden: true},
				{Name: "only_default", Version: "H_3"},
			}}},
		want: []string{"only_hidden", "two_versions, version H_1"},
	}, {
		name: "unversioned definitions and references",
		root: elfwrite.Linked{Soname: "libroot.so", Needed: []string{"libu.so.1", "libw.so.1"}, RunPath: origin,
			VersionNeeds: []elfwrite.VersionNeed{{File: "libu.so.1", Versions: []string{"U_1"}}},
			Refs:         []elfwrite.Ref{{Name: "plain", Version: "U_1"}, {Name: "from_w"}, {Name: "versioned_w", Version: "U_1"}}},
		libs: map[string]elfwrite.Linked{
			// No version records at all: any version is accepted.
			"libu.so.1": {Soname: "libu.so.1", Defs: []elfwrite.Def{{Name: "plain"}}},
			// Versions, but the symbol has the global index.
			"libw.so.1": {Soname: "libw.so.1", VersionDefs: []string{"W_1"}, Defs: []elfwrite.Def{{Name: "from_w"}, {Name: "versioned_w"}, {Name: "other", Version: "W_1"}}},
		},
		want: nil,
	}, {
		name: "binding, visibility and type",
		root: elfwrite.Linked{Soname: "libroot.so", Needed: []string{"libs.so.1"}, RunPath: origin,
			Refs: []elfwrite.Ref{{Name: "local"}, {Name: "hidden"}, {Name: "internal"}, {Name: "protected"}, {Name: "weak_def"},
				{Name: "no_value"}, {Name: "tls_no_value"}, {Name: "ifunc"}, {Name: "section"}, {Name: "unique"}, {Name: "func"}}},
		libs: map[string]elfwrite.Linked{"libs.so.1": {Soname: "libs.so.1", Defs: []elfwrite.Def{
			{Name: "local", Local: true},
			{Name: "hidden", Vis: elf.STV_HIDDEN},
			{Name: "internal", Vis: elf.STV_INTERNAL},
			{Name: "protected", Vis: elf.STV_PROTECTED},
			{Name: "weak_def", Weak: true},
			{Name: "no_value", NoValue: true},
			{Name: "tls_no_value", Type: elf.STT_TLS, NoValue: true},
			{Name: "ifunc", Type: elf.STT_GNU_IFUNC},
			{Name: "section", Type: elf.STT_SECTION},
			{Name: "unique", Unique: true},
			{Name: "func", Type: elf.STT_FUNC},
		}}},
		want: []string{"hidden", "internal", "local", "no_value", "section"},
	}, {
		// The first symbol of the chain that passes decides for its object:
		// a local one hides a later global of the same object, not one in
		// the next object.
		name: "first of the chain decides",
		root: elfwrite.Linked{Soname: "libroot.so", Needed: []string{"libs.so.1", "libt.so.1"}, RunPath: origin,
			Refs: []elfwrite.Ref{{Name: "shadowed"}, {Name: "elsewhere"}}},
		libs: map[string]elfwrite.Linked{
			"libs.so.1": {Soname: "libs.so.1", Defs: []elfwrite.Def{{Name: "shadowed", Local: true}, {Name: "shadowed"}, {Name: "elsewhere", Vis: elf.STV_HIDDEN}}},
			"libt.so.1": {Soname: "libt.so.1", Defs: []elfwrite.Def{{Name: "elsewhere"}}},
		},
		want: []string{"shadowed"},
	}, {
		name: "references of the needed libraries too",
		root: elfwrite.Linked{Soname: "libroot.so", Needed: []string{"libmid.so.1"}, RunPath: origin, Refs: []elfwrite.Ref{{Name: "mid"}}},
		libs: map[string]elfwrite.Linked{
			"libmid.so.1": {Soname: "libmid.so.1", Needed: []string{"libleaf.so.1"}, RunPath: origin,
				Defs: []elfwrite.Def{{Name: "mid"}}, Refs: []elfwrite.Ref{{Name: "leaf"}, {Name: "from_root"}, {Name: "nowhere"}}},
			"libleaf.so.1": {Soname: "libleaf.so.1", Defs: []elfwrite.Def{{Name: "leaf"}}},
		},
		// from_root is defined by nothing here; the root defines none.
		want: nil,
	}, manyReferences()}
}

// manyReferences is a root of more references than Check binds in one
// piece: some defined in the first library, some in both (the first binds
// them), some in the second alone, some nowhere, spread over the table.
func manyReferences() fixture {
	const n = 3 * minPiece
	origin := elfwrite.Str("$ORIGIN")
	root := elfwrite.Linked{Soname: "libroot.so", Needed: []string{"liba.so.1", "libb.so.1"}, RunPath: origin}
	a := elfwrite.Linked{Soname: "liba.so.1"}
	b := elfwrite.Linked{Soname: "libb.so.1"}
	var want []string
	for i := range n {
		name := fmt.Sprintf("sym_%05d", i)
		root.Refs = append(root.Refs, elfwrite.Ref{Name: name})
		switch i % 7 {
		case 0, 1, 2:
			a.Defs = append(a.Defs, elfwrite.Def{Name: name})
		case 3, 4:
			a.Defs = append(a.Defs, elfwrite.Def{Name: name})
			b.Defs = append(b.Defs, elfwrite.Def{Name: name})
		case 5:
			b.Defs = append(b.Defs, elfwrite.Def{Name: name})
		default:
			if i%(7*97) == 6 {
				want = append(want, name)
			} else {
				b.Defs = append(b.Defs, elfwrite.Def{Name: name, Vis: elf.STV_HIDDEN})
				want = append(want, name)
			}
		}
	}
	return fixture{name: "references bound in pieces", root: root, libs: map[string]elfwrite.Linked{"liba.so.1": a, "libb.so.1": b}, want: want, gnuOnly: true}
}

// write puts the fixture in dir, every object built for machine with the
// given hash table, and returns the root's path.
func (f fixture) write(t testing.TB, dir string, machine elf.Machine, gnu bool) string {
	t.Helper()
	for name, spec := range f.libs {
		spec.Machine, spec.GNUHash = machine, gnu
		if err := elfwrite.WriteLinked(filepath.Join(dir, name), spec); err != nil {
			t.Fatal(err)
		}
	}
	root := f.root
	root.Machine, root.GNUHash = machine, gnu
	p := filepath.Join(dir, "libroot.so")
	if err := elfwrite.WriteLinked(p, root); err != nil {
		t.Fatal(err)
	}
	return p
}

// wanted renders a fixture's intended misses as ld.so prints them; the
// misses of other objects are checked against the oracle only.
func (f fixture) wanted(root string) []string {
	var out []string
	for _, w := range f.want {
		out = append(out, root+": "+w)
	}
	sort.Strings(out)
	return out
}

func rootMisses(list []lddtest.Undefined, root string) []string {
	var out []string
	for _, u := range list {
		if u.Object == root {
			out = append(out, u.String())
		}
	}
	return out
}

func runFixtures(t *testing.T, machine elf.Machine, dir func(name string) (host, guest string), oracle func(guest string) (*lddtest.Output, error), opts ldso.Options) {
	ctx := context.Background()
	for _, f := range fixtures() {
		for _, gnu := range []bool{false, true} {
			if f.gnuOnly && !gnu {
				continue
			}
			t.Run(fmt.Sprintf("%s/gnu_hash=%v", f.name, gnu), func(t *testing.T) {
				hostDir, guestDir := dir(fmt.Sprintf("%s-%v", strings.ReplaceAll(f.name, " ", "_"), gnu))
				hostRoot := f.write(t, hostDir, machine, gnu)
				guestRoot := filepath.Join(guestDir, "libroot.so")
				out, err := oracle(guestRoot)
				if err != nil {
					t.Fatal(err)
				}
				if out.Fatal != "" {
					t.Fatalf("ld.so refuses the fixture: %s\n%s", out.Fatal, out.Raw)
				}
				want := out.UndefinedSymbols()
				if g, w := strings.Join(rootMisses(want, guestRoot), "\n"), strings.Join(f.wanted(guestRoot), "\n"); g != w {
					t.Fatalf("the fixture does not show what it is built for: ld.so prints\n%s\nnot\n%s\n%s", g, w, out.Raw)
				}
				// A loader model per fixture: a model reads the file
				// system once and keeps what it read.
				l, err := ldso.New(ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				r, err := l.Closure(ctx, hostRoot)
				if err != nil {
					t.Fatal(err)
				}
				got, err := New().Closure(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				name := func(o *ldso.Object) string {
					if o == r.Main {
						return guestRoot
					}
					return o.Path
				}
				if g, w := joinUndefined(asOracle(got, name)), joinUndefined(want); g != w {
					t.Errorf("model:%s\nld.so:%s", g, w)
				}
			})
		}
	}
}

// TestFixturesBindAsHostLoader judges each fixture by the host's `ldd -r`.
func TestFixturesBindAsHostLoader(t *testing.T) {
	ldsoPath, ok := lddtest.HostLoader()
	lddtest.Need(t, ok, "no x86_64 ld.so on this host")
	base := t.TempDir()
	env := append([]string{"LC_ALL=C"}, lddtest.BindEnv...)
	runFixtures(t, elf.EM_X86_64,
		func(name string) (string, string) { d := filepath.Join(base, name); return d, d },
		func(root string) (*lddtest.Output, error) {
			return lddtest.List(context.Background(), ldsoPath, root, env)
		}, noEnv(""))
}

// TestFixturesBindAsArmLoader judges each fixture, built for aarch64, by
// the arm64 ld.so under qemu.
func TestFixturesBindAsArmLoader(t *testing.T) {
	sr := lddtest.ArmSysroot(t)
	runFixtures(t, elf.EM_AARCH64,
		func(name string) (string, string) {
			return filepath.Join(sr.Root, "opt", name), filepath.Join("/opt", name)
		},
		func(root string) (*lddtest.Output, error) {
			return sr.List(context.Background(), root, lddtest.BindEnv)
		}, noEnv(sr.Root))
}
