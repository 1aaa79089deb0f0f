package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/internal/plural"
)

func (a *app) undoCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "undo [TARGET...]",
		Short: "Remove exactly what resolve placed for TARGET (all targets without one)",
		Long: `undo removes what 'cudadeps resolve' recorded for each TARGET: the links or
copies it placed (only those still as it left them), the directories it
created (once empty), its entries in PREFIX/env.sh, and the store entries it
installed that no other target uses. Files it did not place are never
touched. For a target resolved under --root, its entry in the root's
/etc/ld.so.conf.d goes too and the root's ld.so.cache is rebuilt by the
root's own ldconfig. TARGET is named as it was for resolve (a distribution name or a
path); without TARGET, every recorded target is undone, after asking (--yes
not to ask; needed when stdin is not a terminal).`,
		Example: `  cudadeps undo torch
  cudadeps undo torch --prefix ~/cudadeps-test
  cudadeps undo torch --root /srv/arm64
  cudadeps undo --yes --json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix, err := activation.OpenIn(a.opts.prefix, a.opts.root)
			if err != nil {
				return err
			}
			if len(args) == 0 && !yes {
				if err := a.confirmUndoAll(prefix); err != nil {
					return err
				}
			}
			recovered, err := prefix.Recover(cmd.Context())
			if err != nil {
				return err
			}
			reps, err := prefix.Undo(cmd.Context(), args, recovered)
			if err != nil {
				return err
			}
			for _, r := range reps {
				a.logger.Info("undone", "target", r.Target, "removed", len(r.Removed), "left", len(r.Left), "kept", len(r.Kept), "recovered", string(r.Recovered))
			}
			if a.opts.json {
				return writeJSON(a.stdout, schemaUndo, struct {
					Prefix string                  `json:"prefix"`
					Undone []activation.UndoReport `json:"undone"`
				}{prefix.Dir(), reps})
			}
			renderUndo(a.stdout, reps)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "undo every recorded target without asking")
	cmd.Flags().StringVar(&a.opts.root, "root", "", "the system `DIR` resolve --root served: its store (DIR/opt/cudadeps unless --prefix) and its ld.so.conf.d entry")
	_ = cmd.MarkFlagDirname("root")
	cmd.ValidArgsFunction = a.completeRecorded
	a.opts.addStoreFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

// confirmUndoAll asks before undoing every recorded target.
func (a *app) confirmUndoAll(prefix *activation.Prefix) error {
	recs, err := prefix.Records()
	if err != nil || len(recs) == 0 {
		return err // Undo reports that nothing is recorded
	}
	names := make([]string, len(recs))
	for i, r := range recs {
		names[i] = r.Name
	}
	question := fmt.Sprintf("Undo every recorded target (%s) under %s?", strings.Join(names, ", "), prefix.Dir())
	ok, err := a.ask(question, "name the targets, or rerun with --yes", nil)
	if err == nil && !ok {
		err = &codeError{code: exitError, err: fmt.Errorf("not confirmed: nothing undone")}
	}
	return err
}

func renderUndo(w io.Writer, reps []activation.UndoReport) {
	if len(reps) == 0 {
		fmt.Fprintln(w, "Nothing recorded: nothing to undo.")
	}
	for _, r := range reps {
		fmt.Fprintf(w, "%s: removed %d file(s), %d director%s, %d store entr%s\n", r.Target, len(r.Removed), len(r.Dirs), plural.Of(len(r.Dirs), "y", "ies"), len(r.Store), plural.Of(len(r.Store), "y", "ies"))
		for _, l := range r.Left {
			fmt.Fprintf(w, "  left %s: changed since it was placed\n", l)
		}
		if r.Recovered != "" {
			fmt.Fprintf(w, "  an interrupted %s was recovered first\n", r.Recovered)
		}
		for _, l := range r.AlreadyRemoved {
			fmt.Fprintf(w, "  %s: already removed\n", l)
		}
		for _, k := range r.Kept {
			what := k.Path
			if k.Store != nil {
				what = "store entry " + k.Store.String()
			}
			fmt.Fprintf(w, "  kept %s: still used by %s\n", what, strings.Join(k.For, ", "))
		}
		for _, warn := range r.Warnings {
			fmt.Fprintf(w, "  %s\n", warn)
		}
	}
}

// completeRecorded completes the targets recorded in the store.
func (a *app) completeRecorded(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	prefix, err := activation.Open(a.opts.prefix)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	recs, _ := prefix.Records()
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
