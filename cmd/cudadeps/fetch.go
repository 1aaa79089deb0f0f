package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/platform"
)

func (a *app) fetchCommand() *cobra.Command {
	var allowHTTP bool
	var cacheDir string
	cmd := &cobra.Command{
		Use:   "fetch COMPONENT[@VERSION]...",
		Short: "Download, verify and install NVIDIA archives into the store by component name",
		Long: `fetch installs components of the catalog (libcudss, nvpl_lapack, libcublas, ...)
into the store: the newest archive for the platform and CUDA major (or the
VERSION given), downloaded with retries and resume, verified against the
catalog's size and sha256, and extracted so that it appears whole or not at
all. An archive already in the store, or in the download cache, costs no
download. It does not make the loader find anything: resolve does that.

Exit status: 0 when everything is installed, 3 when the catalog has no
archive that fits, 1 on errors, 2 on usage errors (an ambiguous CUDA major
too), 130 when interrupted.`,
		Example: `  cudadeps fetch libcudss --platform linux-sbsa --cuda 13
  cudadeps fetch nvpl_lapack nvpl_blas --platform linux-sbsa
  cudadeps fetch libcusparse_lt@0.8.1.1 --cuda 13 --mirror file:///srv/nvidia`,
		Args:              argsAtLeast(1),
		ValidArgsFunction: a.completeComponents,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cat, err := a.loadCatalog(ctx)
			if err != nil {
				return err
			}
			plat := string(a.opts.platform)
			if plat == "" {
				if plat, err = platform.HostPlatform(int(a.opts.cuda)); err != nil {
					return usageError("%v (use --platform)", err)
				}
			}
			var items []fetch.Item
			for _, arg := range args {
				item, err := chooseItem(cat, arg, plat, int(a.opts.cuda))
				if err != nil {
					return err
				}
				items = append(items, item)
			}
			prefix, client, err := a.openPrefix(cacheDir, allowHTTP)
			if err != nil {
				return err
			}
			store := prefix.Store()
			entries, err := store.Install(ctx, client, items)
			if err != nil {
				return err
			}
			if a.opts.json {
				return writeJSON(a.stdout, schemaFetch, struct {
					Store     string        `json:"store"`
					Installed []fetch.Entry `json:"installed"`
				}{store.Dir(), entries})
			}
			for _, e := range entries {
				fmt.Fprintf(a.stdout, "%s  %s\n", e.Key, e.Dir)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&allowHTTP, "allow-http", false, "allow plain http:// mirrors other than 127.0.0.1")
	cmd.Flags().StringVar(&cacheDir, "cache", "", "download cache `DIR` (default: $XDG_CACHE_HOME/cudadeps)")
	a.opts.addCatalogFlags(cmd)
	a.opts.addStoreFlags(cmd)
	a.opts.addLimitFlags(cmd)
	a.opts.addJSONFlag(cmd)
	return cmd
}

// chooseItem turns COMPONENT[@VERSION] into the archive to install. An
// unknown component or no fitting archive is exit status 3; an ambiguous
// CUDA major is a usage error.
func chooseItem(cat *catalog.Catalog, arg, plat string, cuda int) (fetch.Item, error) {
	name, version, _ := strings.Cut(arg, "@")
	if _, ok := cat.Component(name); !ok {
		return fetch.Item{}, &codeError{code: exitMissing, err: fmt.Errorf("%s: no such component in the catalog (see 'cudadeps catalog list')", name)}
	}
	ch, err := cat.Choose(name, version, plat, cuda)
	var nf *catalog.NotFoundError
	switch {
	case errors.As(err, &nf) && len(nf.CUDAMajors) > 1:
		return fetch.Item{}, usageError("%s", nf.Reason)
	case err != nil:
		return fetch.Item{}, &codeError{code: exitMissing, err: err}
	}
	label := fmt.Sprintf("%s %s (%s", name, ch.Release.Version, plat)
	if ch.Archive.CUDAVariant != "" {
		label += ", " + ch.Archive.CUDAVariant
	}
	return fetch.Item{
		Key:     fetch.Key{Component: name, Version: ch.Release.Version, Platform: plat, Variant: ch.Archive.CUDAVariant},
		Request: fetch.Request{Name: label + ")", URL: ch.URL, SHA256: ch.Archive.SHA256, Size: ch.Archive.Size},
	}, nil
}

// completeComponents completes component names from the built-in catalog.
func (a *app) completeComponents(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	cat, err := a.loadCatalog(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, c := range cat.Components() {
		names = append(names, c.Name+"\t"+c.Title)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
