package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/humansize"
)

// storeCommand groups the commands that look at and prune the install store.
func (a *app) storeCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "store",
		Short: "List or remove the components installed in the store",
		Long: `The store holds the components cudadeps installed, one directory per
component, version, platform and CUDA variant, under --prefix (default
$XDG_DATA_HOME/cudadeps, i.e. ~/.local/share/cudadeps):

  PREFIX/pkgs/COMPONENT/VERSION/PLATFORM/VARIANT/lib/...

  cudadeps store list                 what is installed
  cudadeps store list --json          the same, with every file, as JSON
  cudadeps store remove libcudss      remove every installed libcudss`,
		Example: `  cudadeps store list --prefix ~/cudadeps-test
  cudadeps store remove libcudss@0.8.0.10 --cuda 13`,
	})
	cmd.AddCommand(a.storeListCommand(), a.storeRemoveCommand())
	return cmd
}

// storeListJSON is the output of store list --json.
type storeListJSON struct {
	Store   string        `json:"store"`
	Entries []fetch.Entry `json:"entries"`
}

// storeRemoveJSON is the output of store remove --json.
type storeRemoveJSON struct {
	Store   string        `json:"store"`
	Removed []fetch.Entry `json:"removed"`
}

func (a *app) storeListCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the installed components",
		Example: `  cudadeps store list
  cudadeps store list --json --prefix ~/cudadeps-test`,
		Args: storeNoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			prefix, err := activation.Open(a.opts.prefix)
			if err != nil {
				return err
			}
			s := prefix.Store()
			entries, err := s.List()
			if err != nil {
				return err
			}
			if a.opts.json {
				if err := readStoreFiles(entries); err != nil {
					return err
				}
				return writeJSON(a.stdout, schemaStoreList, storeListJSON{Store: s.Dir(), Entries: entries})
			}
			renderStoreList(a.stdout, s.Dir(), entries)
			return nil
		},
	}
	a.opts.addStoreFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

func (a *app) storeRemoveCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "remove COMPONENT[@VERSION]...",
		Short: "Remove installed components from the store",
		Long: `Remove every installed entry of each COMPONENT (or only its VERSION), narrowed
by --platform and --cuda. Each entry disappears whole. If an argument matches
nothing, nothing is removed.

An entry that 'cudadeps resolve' placed links to (or named in env.sh) is in
use: it is not removed, and the targets using it are named, so that
'cudadeps undo TARGET' can take them out first (--force removes it anyway,
leaving those links dangling).`,
		Example: `  cudadeps store remove libcudss
  cudadeps store remove libcudss@0.8.0.10 --platform linux-sbsa --cuda 13`,
		ValidArgsFunction: a.completeInstalled,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("store remove needs at least one COMPONENT")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix, err := activation.Open(a.opts.prefix)
			if err != nil {
				return err
			}
			s := prefix.Store()
			installed, err := s.List()
			if err != nil {
				return err
			}
			chosen, err := a.selectEntries(s.Dir(), installed, args)
			if err != nil {
				return err
			}
			if !force {
				if err := refuseInUse(prefix, chosen, a.commandLine); err != nil {
					return err
				}
			}
			if a.opts.json {
				if err := readStoreFiles(chosen); err != nil {
					return err
				}
			}
			keys := make([]fetch.Key, len(chosen))
			for i, e := range chosen {
				keys[i] = e.Key
			}
			err = s.Remove(cmd.Context(), keys...)
			var removed []fetch.Entry
			for _, e := range chosen {
				if _, ok, _ := s.Lookup(e.Key); !ok {
					removed = append(removed, e)
				}
			}
			if a.opts.json {
				if jerr := writeJSON(a.stdout, schemaStoreRemove, storeRemoveJSON{Store: s.Dir(), Removed: removed}); jerr != nil {
					return errors.Join(err, jerr)
				}
			} else {
				for _, e := range removed {
					fmt.Fprintf(a.stdout, "removed %s  %s\n", e.Key, e.Dir)
				}
			}
			return err
		},
	}
	a.opts.addStoreFlags(cmd)
	a.opts.addJSONFlag(cmd)
	a.opts.addPlatformFlag(cmd, "only entries for this platform")
	a.opts.addCUDAFlag(cmd, "only entries for this CUDA major version (variant cudaN)")
	cmd.Flags().BoolVar(&force, "force", false, "remove entries that resolved targets still use")
	return cmd
}

// selectEntries picks the installed entries each COMPONENT[@VERSION]
// names, narrowed by --platform and --cuda; every argument must match.
func (a *app) selectEntries(dir string, installed []fetch.Entry, args []string) ([]fetch.Entry, error) {
	sel := storeSelection{platform: string(a.opts.platform)}
	if a.opts.cuda != 0 {
		sel.variant = "cuda" + a.opts.cuda.String()
	}
	var chosen []fetch.Entry
	seen := map[string]bool{}
	for _, arg := range args {
		sel.component, sel.version, _ = strings.Cut(arg, "@")
		if sel.component == "" {
			return nil, usageError("%q: want COMPONENT or COMPONENT@VERSION", arg)
		}
		found := false
		for _, e := range installed {
			if sel.matches(e.Key) {
				found = true
				if !seen[e.Dir] {
					seen[e.Dir] = true
					chosen = append(chosen, e)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("%s is not installed in %s; nothing removed", sel, dir)
		}
	}
	return chosen, nil
}

// readStoreFiles fills in the file lists that the JSON output shows and a
// listing does not read.
func readStoreFiles(entries []fetch.Entry) error {
	for i := range entries {
		files, err := entries[i].ReadFiles()
		if err != nil {
			return err
		}
		entries[i].Files = files
	}
	return nil
}

// refuseInUse fails when a target's record still uses one of the entries
// (activation's rule): removing it would break an import that works.
func refuseInUse(prefix *activation.Prefix, entries []fetch.Entry, command func(...string) string) error {
	keys := make([]fetch.Key, len(entries))
	for i, e := range entries {
		keys[i] = e.Key
	}
	uses, err := prefix.InUse(keys...)
	if err != nil {
		return err
	}
	var users, targets []string
	for _, u := range uses {
		for _, name := range u.Targets {
			users = append(users, fmt.Sprintf("%s is used by %s", u.Key, name))
			if !slices.Contains(targets, name) {
				targets = append(targets, name)
			}
		}
	}
	if len(users) == 0 {
		return nil
	}
	return fmt.Errorf("%s: run '%s' first (or --force); nothing removed", strings.Join(users, "; "), command(append([]string{"undo"}, targets...)...))
}

// storeSelection picks store entries; empty fields match anything.
type storeSelection struct {
	component, version, platform, variant string
}

func (s storeSelection) matches(k fetch.Key) bool {
	return k.Component == s.component &&
		(s.version == "" || k.Version == s.version) &&
		(s.platform == "" || k.Platform == s.platform) &&
		(s.variant == "" || k.Variant == s.variant)
}

func (s storeSelection) String() string {
	out := s.component
	if s.version != "" {
		out += " " + s.version
	}
	var only []string
	for _, v := range []string{s.platform, s.variant} {
		if v != "" {
			only = append(only, v)
		}
	}
	if len(only) > 0 {
		out += " (" + strings.Join(only, ", ") + ")"
	}
	return out
}

func renderStoreList(w io.Writer, dir string, entries []fetch.Entry) {
	if len(entries) == 0 {
		fmt.Fprintf(w, "no components installed in %s\n", dir)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tVERSION\tPLATFORM\tVARIANT\tARCHIVE\tFILES\tINSTALLED\tDIR")
	for _, e := range entries {
		variant := e.Variant
		if variant == "" {
			variant = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.Component, e.Version, e.Platform, variant,
			humansize.Bytes(e.Size), e.FileCount, e.InstalledAt.UTC().Format("2006-01-02 15:04 UTC"), e.Dir)
	}
	tw.Flush()
}

// storeNoArgs refuses arguments as a usage error (exit code 2).
func storeNoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

// completeInstalled completes the components installed in the store.
func (a *app) completeInstalled(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	prefix, err := activation.Open(a.opts.prefix)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	entries, _ := prefix.Store().List()
	var names []string
	for _, e := range entries {
		if !slices.Contains(names, e.Component) {
			names = append(names, e.Component)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
