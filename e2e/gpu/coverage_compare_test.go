// Package gpu_test checks the comparison the GPU coverage proof makes (coverage_compare.py: cudadeps' reading of each fat binary against cuobjdump's listing) on any host, with cuobjdump's listings written as cuobjdump 13.0 prints them.
package gpu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	fb "github.com/cudadeps/cudadeps/internal/testkit/fatbintest"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/gpuarch"
)

// fakeCuobjdump prints, for `--list-elf LIB` and `--list-ptx LIB`, the
// listing kept in LIB.elf or LIB.ptx, and what cuobjdump says where a
// library has no entry of the kind.
const fakeCuobjdump = `#!/bin/sh
case $1 in --list-elf) f=$2.elf k=ELF ;; --list-ptx) f=$2.ptx k=PTX ;; *) exit 2 ;; esac
if [ -f "$f" ]; then cat "$f"; else echo "cuobjdump info    : No $k file found to extract from '$2'. You may try with -all option."; fi
`

// library is a fat binary library and cuobjdump's listing of it.
type library struct {
	name     string
	cs       []fb.Container
	elf, ptx []string // the architectures cuobjdump names, in order
}

// listing writes names as cuobjdump --list-elf/--list-ptx prints them.
func listing(lib, kind string, names []string) string {
	var b strings.Builder
	ext := map[string]string{"ELF": "cubin", "PTX": "ptx"}[kind]
	for i, n := range names {
		fmt.Fprintf(&b, "%s file %4d: %s.%d.%s.%s\n", kind, i+1, strings.TrimSuffix(lib, ".so"), i+1, n, ext)
	}
	return b.String()
}

// compare runs coverage_compare.py on libs: cudadeps' reading (gpuarch,
// as scan --coverage --json writes it) against the listings. It returns
// the exit status, what the script printed and its compare.txt.
func compare(t *testing.T, py string, libs []library) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	var files []gpuarch.File
	for _, l := range libs {
		p := filepath.Join(dir, l.name)
		if err := fb.Library(p, l.name, l.cs...); err != nil {
			t.Fatal(err)
		}
		for kind, names := range map[string][]string{"ELF": l.elf, "PTX": l.ptx} {
			if len(names) == 0 {
				continue
			}
			if err := os.WriteFile(p+"."+strings.ToLower(kind), []byte(listing(l.name, kind, names)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		files = append(files, gpuarch.File{Path: p, Host: p})
	}
	rep, err := gpuarch.Assess(context.Background(), nil, files, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(map[string]any{"coverage": rep})
	if err != nil {
		t.Fatal(err)
	}
	cov, tool, out := filepath.Join(dir, "coverage.json"), filepath.Join(dir, "cuobjdump"), filepath.Join(dir, "out")
	if err := os.WriteFile(cov, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tool, []byte(fakeCuobjdump), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "coverage_compare.py", cov, tool, out)
	stdout, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("coverage_compare.py: %v\n%s", err, stdout)
	}
	txt, err := os.ReadFile(filepath.Join(out, "compare.txt"))
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	return code, string(stdout), string(txt)
}

// TestCoverageCompareNames: cuobjdump 13.0 lists a family-specific cubin
// without its "f" (an sm_100f cubin is "sm_100.cubin") and keeps the
// suffix of arch-specific cubins and of PTX (results/2026-11-25/
// fatbin-variants.log). A library shaped like libnccl.so.2 there (plain
// and family sm_100 cubins that cuobjdump lists as 16 sm_100) agrees with
// such a listing; an arch-specific cubin that cuobjdump lists plain, or a
// family PTX it lists plain, is a disagreement and fails the script.
func TestCoverageCompareNames(t *testing.T) {
	py, err := exec.LookPath("python3")
	lddtest.Need(t, err == nil, "python3 is not installed")

	plain := fb.Container{Entries: []fb.Entry{{Kind: fb.ELF, Arch: 90}, {Kind: fb.ELF, Arch: 100}, {Kind: fb.ELF, Arch: 120}}}
	family := fb.Container{Entries: []fb.Entry{
		{Kind: fb.ELF, Arch: 90, ArchSpecific: true}, {Kind: fb.ELF, Arch: 100, Family: true},
		{Kind: fb.ELF, Arch: 120, Family: true}, {Kind: fb.PTX, Arch: 120},
	}}
	nccl := library{
		name: "libnccl.so",
		cs: []fb.Container{plain, plain, plain, family, family,
			{Entries: []fb.Entry{{Kind: fb.ELF, Arch: 100, ArchSpecific: true}, {Kind: fb.PTX, Arch: 100, Family: true}}}},
		elf: []string{
			"sm_90", "sm_100", "sm_120", "sm_90", "sm_100", "sm_120", "sm_90", "sm_100", "sm_120",
			"sm_90a", "sm_100", "sm_120", "sm_90a", "sm_100", "sm_120", "sm_100a",
		},
		ptx: []string{"sm_120", "sm_120", "sm_100f"},
	}
	code, stdout, txt := compare(t, py, []library{nccl})
	if code != 0 || !strings.Contains(stdout, "1 agree, 0 disagree") ||
		!strings.Contains(stdout, "19 entries agree, 0 disagree (4 family-specific cubins, which cuobjdump names without the f)") ||
		strings.TrimSpace(txt) != "" {
		t.Errorf("the family cubins named plain by cuobjdump: exit %d\n%s\ncompare.txt:\n%s", code, stdout, txt)
	}

	archAsPlain := library{name: "libarch.so", cs: []fb.Container{{Entries: []fb.Entry{{Kind: fb.ELF, Arch: 100, ArchSpecific: true}}}}, elf: []string{"sm_100"}}
	familyPTXAsPlain := library{name: "libptx.so", cs: []fb.Container{{Entries: []fb.Entry{{Kind: fb.PTX, Arch: 100, Family: true}}}}, ptx: []string{"sm_100"}}
	plainAsFamily := library{name: "libplain.so", cs: []fb.Container{fb.SASS(120)}, elf: []string{"sm_120f"}}
	code, stdout, txt = compare(t, py, []library{nccl, archAsPlain, familyPTXAsPlain, plainAsFamily})
	if code != 1 || !strings.Contains(stdout, "4 agree, 0 disagree") || !strings.Contains(stdout, "19 entries agree, 3 disagree") {
		t.Errorf("three disagreements: exit %d\n%s", code, stdout)
	}
	for _, want := range []string{
		"libarch.so: ELF sm_100: cudadeps' entries are {'sm_100a': 1} as cuobjdump names them, cuobjdump lists {'sm_100': 1}",
		"libptx.so: PTX sm_100: cudadeps' entries are {'sm_100f': 1} as cuobjdump names them, cuobjdump lists {'sm_100': 1}",
		"libplain.so: ELF sm_120: cudadeps' entries are {'sm_120': 1} as cuobjdump names them, cuobjdump lists {'sm_120f': 1}",
	} {
		if !strings.Contains(txt, want) {
			t.Errorf("compare.txt lacks %q:\n%s", want, txt)
		}
	}
	if strings.Contains(txt, "libnccl.so") {
		t.Errorf("compare.txt names the library that agrees:\n%s", txt)
	}
}
