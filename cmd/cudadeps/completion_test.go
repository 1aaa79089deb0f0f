package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
)

// completeInBash loads `cudadeps completion bash` into a bash that reads
// no startup file (so no bash-completion package is loaded, as on a host
// without it), then completes line as if TAB were pressed after it.
func completeInBash(t *testing.T, line string) (string, string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	lddtest.Need(t, err == nil, "bash is not installed")
	script := filepath.Join(t.TempDir(), "cudadeps.bash")
	r := runBinary(t, userEnv(t), "", "completion", "bash")
	if r.code != exitOK {
		t.Fatalf("completion bash: exit %d\n%s", r.code, r.stderr)
	}
	if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := `source "$1"; read -r -a COMP_WORDS <<< "$2"; ` +
		`case "$2" in *' ') COMP_WORDS+=("");; esac; COMP_CWORD=$((${#COMP_WORDS[@]}-1)); ` +
		`COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; __start_cudadeps cudadeps; printf '%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog, "bash", script, line)
	cmd.Env = append(userEnv(t), "PATH="+filepath.Dir(binary(t))+":"+os.Getenv("PATH"))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash: %v\n%s", err, errb.String())
	}
	// compopt refuses outside a real TAB; nothing else may complain.
	var complaints []string
	for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		if l != "" && !strings.Contains(l, "compopt: not currently executing completion function") {
			complaints = append(complaints, l)
		}
	}
	return out.String(), strings.Join(complaints, "\n")
}

// Completion works in a bash without the bash-completion package: commands,
// component names, and files for arguments that are paths.
func TestBashCompletionWithoutBashCompletion(t *testing.T) {
	out, stderr := completeInBash(t, "cudadeps sc")
	if strings.TrimSpace(out) != "scan" || stderr != "" {
		t.Errorf("cudadeps sc<TAB>: %q, stderr %q", out, stderr)
	}
	out, stderr = completeInBash(t, "cudadeps fetch libcud")
	if !strings.Contains(out, "libcudss") || stderr != "" {
		t.Errorf("cudadeps fetch libcud<TAB>: %q, stderr %q", out, stderr)
	}
	// A directory flag completes directories (with _filedir -d in
	// bash-completion); a plain path argument is bash's own default.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, stderr = completeInBash(t, "cudadeps resolve torch --prefix "+dir+"/st")
	if strings.TrimSpace(out) != filepath.Join(dir, "store") || stderr != "" {
		t.Errorf("--prefix DIR/st<TAB>: %q, stderr %q", out, stderr)
	}
}

// The help of the completion commands says what each shell needs.
func TestCompletionHelpSaysWhatItNeeds(t *testing.T) {
	r := runBinary(t, userEnv(t), "", "completion", "--help")
	if !strings.Contains(r.stdout, "bash-completion") {
		t.Errorf("completion --help should say whether bash needs the bash-completion package:\n%s", r.stdout)
	}
	r = runBinary(t, userEnv(t), "", "completion", "bash")
	if !strings.Contains(strings.SplitN(r.stdout, "\n", 8)[0]+r.stdout[:min(len(r.stdout), 600)], "bash-completion") {
		t.Errorf("the script's opening comment should say it needs no bash-completion package:\n%.600s", r.stdout)
	}
}
