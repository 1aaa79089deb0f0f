package main

import (
	"bytes"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

// completionHelp is what the completion commands need, shell by shell.
const completionHelp = `
bash: the script works on its own; with the bash-completion package loaded
it uses that package's word splitting and file completion instead of its
own. zsh: compinit must have run (most setups do). fish and PowerShell need
nothing more.`

// bashStandIns are what the script defines for the two functions of the
// bash-completion package that cobra's script calls: each uses the
// package's function when it is loaded, else a plain one.
const bashStandIns = `
# Without the bash-completion package: the words as bash split them, and
# files (or directories) by compgen.
__cudadeps_comp_words()
{
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref "$@" cur prev words cword
        return
    fi
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
}

__cudadeps_filedir()
{
    if declare -F _filedir >/dev/null 2>&1; then
        _filedir "$@"
        return
    fi
    local IFS=$'\n'
    if [[ $1 == -d ]]; then
        COMPREPLY+=($(compgen -d -- "$cur"))
    else
        COMPREPLY+=($(compgen -f -- "$cur"))
    fi
}
`

var filedirCall = regexp.MustCompile(`(^|[^A-Za-z0-9_])_filedir\b`)

// bashCompletion is cobra's bash script made to work without the
// bash-completion package (cobra's own needs it and fails silently).
func bashCompletion(root *cobra.Command, descriptions bool) ([]byte, error) {
	var buf bytes.Buffer
	if err := root.GenBashCompletionV2(&buf, descriptions); err != nil {
		return nil, err
	}
	script := strings.Replace(buf.String(), `_get_comp_words_by_ref "$@" cur prev words cword`, `__cudadeps_comp_words "$@"`, 1)
	script = filedirCall.ReplaceAllString(script, "${1}__cudadeps_filedir")
	head, rest, _ := strings.Cut(script, "\n")
	return []byte(head + "\n# It needs no bash-completion package, and uses it when it is loaded.\n" + bashStandIns + rest), nil
}

// setUpCompletion says in the completion commands' help what each shell
// needs, and makes `completion bash` print the self-sufficient script.
func setUpCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Long = strings.TrimRight(c.Long, "\n") + "\n" + completionHelp
		for _, sh := range c.Commands() {
			if sh.Name() != "bash" {
				continue
			}
			sh.Long = strings.Replace(sh.Long, "This script depends on the 'bash-completion' package.\nIf it is not installed already, you can install it via your OS's package manager.\n", "The script needs no bash-completion package (it uses it when it is loaded).\n", 1)
			sh.RunE = func(cmd *cobra.Command, args []string) error {
				noDesc, _ := cmd.Flags().GetBool("no-descriptions")
				script, err := bashCompletion(cmd.Root(), !noDesc)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(script)
				return err
			}
		}
	}
}
