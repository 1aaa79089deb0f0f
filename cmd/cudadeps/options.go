package main

import (
	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/fetch"
)

// globalOptions are the flags shared by several commands. Each command
// registers only the groups it uses, so its --help lists what applies.
type globalOptions struct {
	verbose bool
	quiet   bool

	// Loader model.
	root          string
	ldLibraryPath string
	preload       []string

	// Catalog.
	catalogs []string
	mirror   string
	platform string
	cuda     int

	// Store.
	prefix string

	// What one archive may cost to extract.
	limits fetch.Limits

	// Output.
	json bool
}

func (o *globalOptions) register(root *cobra.Command) {
	f := root.PersistentFlags()
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log what is done, step by step, to stderr")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "log only warnings and errors")
}

// addLoaderFlags registers the flags that shape the loader model.
func (o *globalOptions) addLoaderFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.root, "root", "", "scan another system's tree: ld.so.cache, ld.so.preload and default directories come from `DIR` (e.g. an aarch64 sysroot)")
	f.StringVar(&o.ldLibraryPath, "ld-library-path", "", "use this `PATH` list instead of $LD_LIBRARY_PATH (\"\" for none)")
	f.StringSliceVar(&o.preload, "preload", nil, "objects loaded first, as with LD_PRELOAD (default: $LD_PRELOAD)")
}

// addCatalogFlags registers the flags that choose and layer catalogs.
func (o *globalOptions) addCatalogFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&o.catalogs, "catalog", nil, "layer this catalog `FILE` over the embedded one (repeatable; later wins)")
	f.StringVar(&o.mirror, "mirror", "", "fetch archives from this `URL` instead of NVIDIA (https://..., http://127.0.0.1..., file:///...)")
	f.StringVar(&o.platform, "platform", "", "NVIDIA platform: linux-x86_64, linux-sbsa or linux-aarch64 (default: from the scanned files or this host)")
	f.IntVar(&o.cuda, "cuda", 0, "CUDA major version `N` when it cannot be read from libcudart (12, 13)")
}

// addStoreFlags registers the flags that locate the install store.
func (o *globalOptions) addStoreFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.prefix, "prefix", "", "install store `DIR` (default: $XDG_DATA_HOME/cudadeps, i.e. ~/.local/share/cudadeps)")
}

// addJSONFlag registers --json.
func (o *globalOptions) addJSONFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON on stdout")
}

// addLimitFlags registers the bounds on what one archive may cost to
// extract (fetch.Limits).
func (o *globalOptions) addLimitFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Int64Var(&o.limits.MaxBytes, "max-archive-bytes", fetch.DefaultMaxBytes, "refuse an archive that unpacks to more than `N` bytes")
	f.IntVar(&o.limits.MaxEntries, "max-archive-entries", fetch.DefaultMaxEntries, "refuse an archive of more than `N` entries")
	f.Int64Var(&o.limits.MaxNameBytes, "max-name-bytes", fetch.DefaultMaxNameBytes, "refuse an archive whose names take more than `N` bytes")
	f.Int64Var(&o.limits.MaxRatio, "max-expansion", fetch.DefaultMaxRatio, "refuse an archive that unpacks to more than `N` times its size, beyond 64 MiB (-1: no bound)")
}
