package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fleet/registry"
)

// userLayer is the user catalog layer file that `catalog update` writes,
// or "" when no data directory can be named.
func (a *app) userLayer() string {
	dir, err := catalog.UserLayerDir(os.Getenv)
	if err != nil {
		return ""
	}
	return catalog.UserLayerFile(dir)
}

func (a *app) catalogUpdateCommand() *cobra.Command {
	var mirror string
	var products []string
	cmd := &cobra.Command{
		Use:   "update",
		Short: "Fetch NVIDIA's current manifests into the user catalog layer that every command loads",
		Long: `update reads each product's redist directory listing (for example
https://developer.download.nvidia.com/compute/cudnn/redist/), fetches every
redistrib_*.json it lists, checks that each parses, and writes them as a
catalog layer under $XDG_DATA_HOME/cudadeps (default ~/.local/share/cudadeps).
Every command layers it over the built-in catalog (and under --catalog
files). It prints the releases that are new. The layer is replaced at once;
when offline or on any error the last good layer stays in force.
--mirror URL stands for https://developer.download.nvidia.com/compute/:
manifests are listed at URL/<product>/redist/, and archives come from there.
A mirror on a shared file system is file:///DIR, as for every command.`,
		Example: `  cudadeps catalog update
  cudadeps catalog update --product cudnn --json
  cudadeps catalog update --mirror https://mirror.example.org/compute/
  cudadeps catalog update --mirror file:///srv/cudadeps-mirror/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("mirror") {
				mirror = string(a.opts.mirror) // CUDADEPS_MIRROR or the config file
			}
			if mirror != "" {
				if _, err := catalog.NormalizeMirror(mirror); err != nil {
					return usageError("--mirror: %v", err)
				}
				if registry.IsReference(mirror) {
					return usageError("catalog update reads NVIDIA's manifests from https://, http:// or file:// mirrors; a registry (%s) carries the catalog entries of each plan pushed to it, which apply reads", mirror)
				}
			}
			dir, err := catalog.UserLayerDir(os.Getenv)
			if err != nil {
				return err
			}
			res, err := catalog.Update(cmd.Context(), catalog.UpdateOptions{Dir: dir, Mirror: mirror, Products: products, Logger: a.logger})
			if err != nil {
				return fmt.Errorf("catalog update: %w (the previous layer, if any, is still in force)", err)
			}
			if a.opts.json {
				if res.New == nil {
					res.New = []catalog.NewRelease{}
				}
				return writeJSON(a.stdout, schemaCatalogUpdate, res)
			}
			fmt.Fprintf(a.stdout, "%d manifests checked; layer %s\n", len(res.Manifests), res.Layer)
			if len(res.New) == 0 {
				fmt.Fprintln(a.stdout, "nothing new")
			}
			for _, n := range res.New {
				fmt.Fprintf(a.stdout, "new: %s %s (%s %s)\n", n.Component, n.Version, n.Product, n.Release)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&mirror, "mirror", "", "read manifests from this `URL` in NVIDIA's compute/ layout (URL/<product>/redist/) instead of NVIDIA")
	cmd.Flags().StringArrayVar(&products, "product", nil, "update only this `PRODUCT` (repeatable; default: every product of the built-in catalog)")
	a.opts.addJSONFlag(cmd)
	return cmd
}
