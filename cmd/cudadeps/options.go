package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/fleet/registry"
	"github.com/cudadeps/cudadeps/platform"
)

// globalOptions are the flags shared by several commands. Each command
// registers only the groups it uses, so its --help lists what applies.
// Values are checked as they are parsed (the flag types below), so every
// command reports a bad value the same way: a usage error, exit status 2.
type globalOptions struct {
	verbose   bool
	quiet     bool
	logFormat string

	// Loader model.
	root          string
	ldLibraryPath string
	preload       []string

	// Catalog.
	catalogs []string
	mirror   mirrorFlag
	platform platformFlag
	cuda     cudaFlag

	// Store.
	prefix string

	// What one archive may cost to extract.
	limits fetch.Limits

	// Output.
	json bool
}

func (o *globalOptions) register(root *cobra.Command) {
	f := root.PersistentFlags()
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log each step (scan, plan, place, verify) as key=value lines on stderr")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "log only errors; no progress")
	f.StringVar(&o.logFormat, "log-format", "", "log as `FORMAT` text (key=value) or json instead of short warning lines")
	_ = root.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// addLoaderFlags registers the flags that shape the loader model.
func (o *globalOptions) addLoaderFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.root, "root", "", "scan another system's tree: ld.so.cache, ld.so.preload and default directories come from `DIR` (e.g. an aarch64 sysroot)")
	f.StringVar(&o.ldLibraryPath, "ld-library-path", "", "use this `PATH` list instead of $LD_LIBRARY_PATH (\"\" for none)")
	f.StringSliceVar(&o.preload, "preload", nil, "`FILE`s loaded first, as with LD_PRELOAD (default: $LD_PRELOAD)")
	_ = cmd.MarkFlagDirname("root")
}

// addCatalogFlags registers the flags that choose and layer catalogs.
func (o *globalOptions) addCatalogFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&o.catalogs, "catalog", nil, "layer this catalog `FILE` over the embedded one (repeatable; later wins)")
	f.Var(&o.mirror, "mirror", "fetch archives from this `URL` instead of NVIDIA (https://..., http://127.0.0.1..., file:///..., or a registry's repository oci://HOST/REPOSITORY)")
	o.addPlatformFlag(cmd, "NVIDIA platform (default: from the scanned files or this host)")
	o.addCUDAFlag(cmd, "CUDA major version when it cannot be read from libcudart (12, 13)")
	_ = cmd.MarkFlagFilename("catalog", "yaml", "yml")
}

func (o *globalOptions) addPlatformFlag(cmd *cobra.Command, usage string) {
	cmd.Flags().Var(&o.platform, "platform", usage+": "+strings.Join(platform.All(), ", "))
	_ = cmd.RegisterFlagCompletionFunc("platform", cobra.FixedCompletions(platform.All(), cobra.ShellCompDirectiveNoFileComp))
}

func (o *globalOptions) addCUDAFlag(cmd *cobra.Command, usage string) {
	cmd.Flags().Var(&o.cuda, "cuda", usage)
	_ = cmd.RegisterFlagCompletionFunc("cuda", cobra.FixedCompletions([]string{"12", "13"}, cobra.ShellCompDirectiveNoFileComp))
}

// addStoreFlags registers the flags that locate the install store.
func (o *globalOptions) addStoreFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.prefix, "prefix", "", "install store `DIR` (default: $XDG_DATA_HOME/cudadeps, i.e. ~/.local/share/cudadeps; with --root, ROOT/opt/cudadeps)")
	_ = cmd.MarkFlagDirname("prefix")
}

// addJSONFlag registers --json.
func (o *globalOptions) addJSONFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON on stdout")
}

// platformFlag is a --platform value: one of the platform names.
type platformFlag string

func (p *platformFlag) String() string { return string(*p) }
func (p *platformFlag) Type() string   { return "PLATFORM" }
func (p *platformFlag) Set(s string) error {
	if err := platform.Check(s); err != nil {
		return err
	}
	*p = platformFlag(s)
	return nil
}

// platformsFlag is a repeatable --platform.
type platformsFlag []string

func (p *platformsFlag) String() string { return strings.Join(*p, ",") }
func (p *platformsFlag) Type() string   { return "PLATFORM" }
func (p *platformsFlag) Set(s string) error {
	if err := platform.Check(s); err != nil {
		return err
	}
	*p = append(*p, s)
	return nil
}

// cudaFlag is a --cuda value: a CUDA major version.
type cudaFlag int

func (c *cudaFlag) String() string {
	if *c == 0 {
		return ""
	}
	return strconv.Itoa(int(*c))
}
func (c *cudaFlag) Type() string { return "N" }
func (c *cudaFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 99 {
		return fmt.Errorf("%q is not a CUDA major (e.g. 12, 13)", s)
	}
	*c = cudaFlag(n)
	return nil
}

// mirrorFlag is a --mirror value: a URL archives can be fetched from.
type mirrorFlag string

func (m *mirrorFlag) String() string { return string(*m) }
func (m *mirrorFlag) Type() string   { return "URL" }
func (m *mirrorFlag) Set(s string) error {
	if _, err := catalog.NormalizeMirror(s); err != nil {
		return err
	}
	if registry.IsReference(s) {
		if _, err := registry.ParseReference(s); err != nil {
			return err
		}
	}
	*m = mirrorFlag(s)
	return nil
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
