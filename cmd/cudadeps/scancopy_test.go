package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// bench/scancopy.py carries what a scan reads of a tree to another
// machine: a scan of the copy it builds says what a scan of the original
// said (host libraries with their symbols, links, a distribution's
// metadata, a linker script, a program and a source), from a stream a
// fraction of the tree's size; and a stream naming a path outside the
// tree is refused.
func TestScanCopyScansAsTheTree(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")
	src := filepath.Join(t.TempDir(), "site-packages")
	lib := filepath.Join(src, "pkg", "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	copied := 0
	for _, name := range []string{"libstdc++.so.6", "libz.so.1", "libcrypto.so.3", "libssl.so.3", "libgcc_s.so.1"} {
		real, err := filepath.EvalSymlinks(filepath.Join("/usr/lib/x86_64-linux-gnu", name))
		if err != nil {
			continue
		}
		data, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lib, filepath.Base(real)), data, 0o755); err != nil {
			t.Fatal(err)
		}
		if filepath.Base(real) != name {
			if err := os.Symlink(filepath.Base(real), filepath.Join(lib, name)); err != nil {
				t.Fatal(err)
			}
		}
		copied++
	}
	_, err = os.Stat(filepath.Join(lib, "libstdc++.so.6"))
	lddtest.Need(t, copied >= 3 && err == nil, "libstdc++.so.6 and two more of the host's libraries not under /usr/lib/x86_64-linux-gnu")
	// A reference no object defines, and references the host's libstdc++
	// defines (its symbol table is too large to come along by chance), so that the scan's answer depends on the symbols, versions
	// and relocations kept.
	if err := elfwrite.WriteLinked(filepath.Join(lib, "libprov.so.1"), elfwrite.Linked{Soname: "libprov.so.1", VersionDefs: []string{"PROV_1"},
		Defs: []elfwrite.Def{{Name: "present", Version: "PROV_1"}}, GNUHash: true}); err != nil {
		t.Fatal(err)
	}
	if err := elfwrite.WriteLinked(filepath.Join(lib, "libuser.so"), elfwrite.Linked{Soname: "libuser.so", Needed: []string{"libprov.so.1", "libstdc++.so.6"}, RunPath: elfwrite.Str("$ORIGIN"),
		VersionNeeds: []elfwrite.VersionNeed{{File: "libprov.so.1", Versions: []string{"PROV_1"}}, {File: "libstdc++.so.6", Versions: []string{"GLIBCXX_3.4"}}},
		Refs: []elfwrite.Ref{{Name: "present", Version: "PROV_1"}, {Name: "absent", Version: "PROV_1"},
			{Name: "_ZSt9terminatev", Version: "GLIBCXX_3.4"}, {Name: "_ZdlPv", Version: "GLIBCXX_3.4"}}, GNUHash: true}); err != nil {
		t.Fatal(err)
	}
	for path, body := range map[string]string{
		"pkg-1.0.dist-info/METADATA":  "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
		"pkg-1.0.dist-info/RECORD":    "pkg/__init__.py,,\npkg/lib/libz.so.1,,\n",
		"pkg/__init__.py":             strings.Repeat("# source\n", 500),
		"pkg/lib/libfoo.so":           "/* GNU ld script */\nINPUT(libz.so.1)\n",
		"pkg/bin/tool":                "#!/bin/sh\necho tool\n",
		"pkg-1.0.dist-info/INSTALLER": "pip\n",
	} {
		writeTestFile(t, filepath.Join(src, path), body, 0o755)
	}
	work := t.TempDir()
	stream, dst := filepath.Join(work, "tree.xz"), filepath.Join(work, "site-packages")
	script := filepath.Join("..", "..", "bench", "scancopy.py")
	for _, args := range [][]string{{"extract", src, stream}, {"build", stream, dst}} {
		if out, err := exec.Command(py, append([]string{script}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("scancopy.py %s: %v\n%s", args[0], err, out)
		}
	}
	scanOf := func(dir string) string {
		r := runBinary(t, userEnv(t), "", "scan", "--json", dir)
		if r.code != exitOK && r.code != exitMissing {
			t.Fatalf("scan %s: exit %d: %s", dir, r.code, r.stderr)
		}
		return strings.ReplaceAll(r.stdout, dir, "TREE")
	}
	want := scanOf(src)
	if !strings.Contains(want, `"absent"`) {
		t.Fatalf("the tree's scan names no undefined symbol:\n%s", want)
	}
	if got := scanOf(dst); got != want {
		t.Errorf("the copy scans otherwise than the tree:\n--- tree\n%s\n--- copy\n%s", want, got)
	}
	var treeBytes int64
	filepath.Walk(src, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			treeBytes += fi.Size()
		}
		return nil
	})
	if fi, err := os.Stat(stream); err != nil || fi.Size()*3 > treeBytes {
		t.Errorf("the stream is not a fraction of the tree's %d bytes: %v, %v", treeBytes, fi.Size(), err)
	}
	// A stream naming a path outside the tree is refused.
	bad := filepath.Join(work, "bad.xz")
	mk := `import lzma, sys; lzma.open(sys.argv[1], "wb").write(b'{"p": "../escaped", "m": 420, "s": 1, "r": [[0, 1]]}\nx')`
	if out, err := exec.Command(py, "-c", mk, bad).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	out, err := exec.Command(py, script, "build", bad, filepath.Join(work, "inner")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "outside the tree") {
		t.Errorf("a path outside the tree: %v, %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(work, "escaped")); err == nil {
		t.Errorf("build wrote outside its directory")
	}
	// A damaged stream is refused in one line naming it.
	damaged := filepath.Join(work, "damaged.xz")
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, damaged, string(data[:len(data)/2]), 0o644)
	out, err = exec.Command(py, script, "build", damaged, filepath.Join(work, "half")).CombinedOutput()
	if msg := strings.TrimSpace(string(out)); err == nil || strings.Count(msg, "\n") > 1 || !strings.HasPrefix(msg[strings.LastIndexByte(msg, '\n')+1:], "scancopy: "+damaged+": ") {
		t.Errorf("a damaged stream: %v, %q", err, out)
	}
}
