package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
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

Examples:
  cudadeps fetch libcudss --platform linux-sbsa --cuda 13
  cudadeps fetch nvpl_lapack nvpl_blas --platform linux-sbsa
  cudadeps fetch libcusparse_lt@0.8.1.1 --cuda 13 --mirror file:///srv/nvidia`,
		Args: argsAtLeast(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cat, err := catalog.Load(ctx, catalog.LoadOptions{Extra: a.opts.catalogs, Mirror: a.opts.mirror})
			if err != nil {
				return err
			}
			platform := a.opts.platform
			if platform == "" {
				if platform, err = catalog.HostPlatform(a.opts.cuda); err != nil {
					return usageError("%v (use --platform)", err)
				}
			} else if !catalog.ValidPlatform(platform) {
				return usageError("--platform %q: want one of %s", platform, strings.Join(catalog.Platforms(), ", "))
			}
			var items []fetch.Item
			for _, arg := range args {
				item, err := chooseArchive(cat, arg, platform, a.opts.cuda)
				if err != nil {
					return &codeError{code: exitMissing, err: err}
				}
				items = append(items, item)
			}
			prefix, err := a.prefix()
			if err != nil {
				return err
			}
			store, err := fetch.OpenStore(prefix)
			if err != nil {
				return err
			}
			client, err := fetch.NewClient(fetch.Options{CacheDir: cacheDir, AllowHTTP: allowHTTP, Logger: a.logger, Progress: a.progressWriter(), Limits: a.opts.limits})
			if err != nil {
				return err
			}
			entries, err := store.Install(ctx, client, items)
			if err != nil {
				return err
			}
			if a.opts.json {
				return writeJSON(a.stdout, entries)
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

// chooseArchive picks a component's archive: the newest release (or the one
// named after '@') with an archive for the platform and CUDA major.
func chooseArchive(cat *catalog.Catalog, arg, platform string, cuda int) (fetch.Item, error) {
	name, version, _ := strings.Cut(arg, "@")
	comp, ok := cat.Component(name)
	if !ok {
		return fetch.Item{}, fmt.Errorf("%s: no such component in the catalog (see 'cudadeps catalog list')", name)
	}
	for _, r := range comp.Releases {
		if version != "" && r.Version != version && r.Label != version {
			continue
		}
		var fits []*catalog.Archive
		for _, a := range r.Archives {
			if a.Platform != platform {
				continue
			}
			if m := a.CUDAMajor(r); cuda == 0 || m == 0 || m == cuda {
				fits = append(fits, a)
			}
		}
		if len(fits) == 0 {
			continue
		}
		if len(fits) > 1 {
			var majors []string
			for _, a := range fits {
				majors = append(majors, fmt.Sprint(a.CUDAMajor(r)))
			}
			sort.Strings(majors)
			return fetch.Item{}, fmt.Errorf("%s %s has archives for CUDA %s on %s: pass --cuda", name, r.Version, strings.Join(majors, " and "), platform)
		}
		a := fits[0]
		label := fmt.Sprintf("%s %s (%s", name, r.Version, platform)
		if a.CUDAVariant != "" {
			label += ", " + a.CUDAVariant
		}
		return fetch.Item{
			Key:     fetch.Key{Component: name, Version: r.Version, Platform: platform, Variant: a.CUDAVariant},
			Request: fetch.Request{Name: label + ")", URL: cat.URL(comp, a), SHA256: a.SHA256, Size: a.Size},
		}, nil
	}
	what := "any release"
	if version != "" {
		what = "release " + version
	}
	cudaNote := ""
	if cuda != 0 {
		cudaNote = fmt.Sprintf(" for CUDA %d", cuda)
	}
	return fetch.Item{}, fmt.Errorf("%s: %s has no archive for %s%s (it has: %s)", name, what, platform, cudaNote, strings.Join(comp.Platforms(), ", "))
}
