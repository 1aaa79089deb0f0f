package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/resolver"
)

// storeJSONSchema versions the JSON that store list and store remove print.
const storeJSONSchema = 1

// storeCommand groups the commands that look at and prune the install store.
func (a *app) storeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "List or remove the components installed in the store",
		Long: `The store holds the components cudadeps installed, one directory per
component, version, platform and CUDA variant, under --prefix (default
$XDG_DATA_HOME/cudadeps, i.e. ~/.local/share/cudadeps):

  PREFIX/pkgs/COMPONENT/VERSION/PLATFORM/VARIANT/lib/...

  cudadeps store list                 what is installed
  cudadeps store list --json          the same, with every file, as JSON
  cudadeps store remove libcudss      remove every installed libcudss`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown store command %q: use list or remove", args[0])
			}
			return usageError("store needs a command: list or remove")
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(a.storeListCommand(), a.storeRemoveCommand())
	return cmd
}

// storeListJSON is the output of store list --json.
type storeListJSON struct {
	Schema  int           `json:"schema"`
	Store   string        `json:"store"`
	Entries []fetch.Entry `json:"entries"`
}

// storeRemoveJSON is the output of store remove --json.
type storeRemoveJSON struct {
	Schema  int           `json:"schema"`
	Store   string        `json:"store"`
	Removed []fetch.Entry `json:"removed"`
}

func (a *app) storeListCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the installed components",
		Args:  storeNoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := fetch.OpenStore(a.opts.prefix)
			if err != nil {
				return err
			}
			entries, err := s.List()
			if err != nil {
				return err
			}
			if a.opts.json {
				if err := readStoreFiles(entries); err != nil {
					return err
				}
				return writeStoreJSON(a.stdout, storeListJSON{Schema: storeJSONSchema, Store: s.Dir(), Entries: storeNonNil(entries)})
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
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("store remove needs at least one COMPONENT")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := fetch.OpenStore(a.opts.prefix)
			if err != nil {
				return err
			}
			installed, err := s.List()
			if err != nil {
				return err
			}
			sel := storeSelection{platform: a.opts.platform}
			if a.opts.cuda != 0 {
				sel.variant = "cuda" + strconv.Itoa(a.opts.cuda)
			}
			var chosen []fetch.Entry
			seen := map[string]bool{}
			for _, arg := range args {
				sel.component, sel.version, _ = strings.Cut(arg, "@")
				if sel.component == "" {
					return usageError("%q: want COMPONENT or COMPONENT@VERSION", arg)
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
					return fmt.Errorf("%s is not installed in %s; nothing removed", sel, s.Dir())
				}
			}
			if !force {
				if err := refuseInUse(s.Dir(), chosen); err != nil {
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
				if jerr := writeStoreJSON(a.stdout, storeRemoveJSON{Schema: storeJSONSchema, Store: s.Dir(), Removed: storeNonNil(removed)}); jerr != nil {
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
	cmd.Flags().StringVar(&a.opts.platform, "platform", "", "only entries for this `PLATFORM` (linux-x86_64, linux-sbsa, linux-aarch64)")
	cmd.Flags().IntVar(&a.opts.cuda, "cuda", 0, "only entries for CUDA major version `N` (variant cudaN)")
	cmd.Flags().BoolVar(&force, "force", false, "remove entries that resolved targets still use")
	return cmd
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

// refuseInUse fails when an activation record still points into one of the
// entries: removing it would break an import that works.
func refuseInUse(prefix string, entries []fetch.Entry) error {
	recs, err := resolver.Records(prefix)
	if err != nil {
		return err
	}
	var users []string
	for _, e := range entries {
		for _, r := range recs {
			if r.Uses(e.Dir) {
				users = append(users, fmt.Sprintf("%s is used by %s", e.Key, r.Name))
			}
		}
	}
	if len(users) == 0 {
		return nil
	}
	return fmt.Errorf("%s: run 'cudadeps undo TARGET' first (or --force); nothing removed", strings.Join(users, "; "))
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
			storeSize(e.Size), e.FileCount, e.InstalledAt.UTC().Format("2006-01-02 15:04 UTC"), e.Dir)
	}
	tw.Flush()
}

// storeSize writes n bytes in decimal units.
func storeSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// storeNoArgs refuses arguments as a usage error (exit code 2).
func storeNoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

func writeStoreJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// storeNonNil makes an empty list print as [] rather than null.
func storeNonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
