package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cudadeps/cudadeps/activation"
	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/config"
)

const schemaConfig = "cudadeps.config/v1"

// applySettings fills the --mirror, --catalog and --prefix of cmd that the
// command line left out from the environment and the config file (package
// config); catalogs from there are layered under the --catalog files.
// Commands without those flags read neither.
func (a *app) applySettings(cmd *cobra.Command) error {
	f := cmd.Flags()
	if f.Lookup("mirror") == nil && f.Lookup("catalog") == nil && f.Lookup("prefix") == nil {
		return nil
	}
	s, err := config.Load(os.LookupEnv)
	if err != nil {
		return usageError("%v", err)
	}
	a.settings = s
	if f.Lookup("mirror") != nil && !f.Changed("mirror") && s.Mirror.Set() {
		if _, err := catalog.NormalizeMirror(s.Mirror.Value); err != nil {
			return usageError("%s: %v", s.Mirror.Source, err)
		}
		a.opts.mirror = mirrorFlag(s.Mirror.Value)
	}
	if f.Lookup("catalog") != nil && s.Catalog.Set() {
		a.opts.catalogs = append(append([]string(nil), s.Catalog.Values...), a.opts.catalogs...)
	}
	if f.Lookup("prefix") != nil && !f.Changed("prefix") && s.Prefix.Set() {
		a.opts.prefix = s.Prefix.Value
	}
	return nil
}

type settingJSON struct {
	Value  string `json:"value"`
	Source string `json:"source"`
}

type catalogSettingJSON struct {
	File   string `json:"file"`
	Source string `json:"source"`
}

type configJSON struct {
	File     string               `json:"file"`
	Searched []string             `json:"searched"`
	Mirror   settingJSON          `json:"mirror"`
	Catalogs []catalogSettingJSON `json:"catalogs"`
	Prefix   settingJSON          `json:"prefix"`
}

func (a *app) configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the mirror, catalogs and prefix in force, and where each comes from",
		Long: `config prints the settings a site sets once and where each one comes from,
highest first: a flag, the environment (CUDADEPS_MIRROR, CUDADEPS_CATALOG as a
':'-separated list, CUDADEPS_PREFIX), the config file, the built-in default.

The config file is $CUDADEPS_CONFIG when set, else the first that exists of
$XDG_CONFIG_HOME/cudadeps/config.toml (~/.config/cudadeps/config.toml) and
DIR/cudadeps/config.toml for each DIR of $XDG_CONFIG_DIRS (/etc/xdg). It
holds key = "value" lines (a TOML subset); relative paths are relative to
the file:

  mirror  = "https://mirror.internal/nvidia/"
  catalog = ["site-catalog.yaml"]
  prefix  = "/opt/cudadeps"

Catalogs from the environment replace the file's; --catalog files are
layered on top of either.`,
		Example: `  cudadeps config
  CUDADEPS_MIRROR=file:///srv/nvidia cudadeps config --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runConfig(cmd) },
	}
	f := cmd.Flags()
	f.StringArrayVar(&a.opts.catalogs, "catalog", nil, "layer this catalog `FILE` too (repeatable)")
	f.Var(&a.opts.mirror, "mirror", "mirror `URL`")
	f.StringVar(&a.opts.prefix, "prefix", "", "store `DIR`")
	a.opts.addJSONFlag(cmd)
	return cmd
}

func (a *app) runConfig(cmd *cobra.Command) error {
	s := a.settings
	f := cmd.Flags()
	out := configJSON{File: s.File, Searched: config.Dirs(os.Getenv)}
	for i := range out.Searched {
		out.Searched[i] += "/" + config.FileName
	}
	if v := os.Getenv(config.EnvConfig); v != "" {
		out.Searched = []string{v}
	}
	out.Mirror = settingJSON{string(a.opts.mirror), sourceOf(f.Changed("mirror"), "--mirror", s.Mirror)}
	if out.Mirror.Value == "" {
		out.Mirror.Source = "default (each product's NVIDIA URL)"
	}
	fromSettings := 0
	if s.Catalog.Set() {
		fromSettings = len(s.Catalog.Values)
	}
	for i, c := range a.opts.catalogs {
		src := "--catalog"
		if i < fromSettings {
			src = s.Catalog.Source
		}
		out.Catalogs = append(out.Catalogs, catalogSettingJSON{c, src})
	}
	prefix, err := a.prefix()
	if err != nil {
		return err
	}
	out.Prefix = settingJSON{prefix, sourceOf(f.Changed("prefix"), "--prefix", s.Prefix)}
	if out.Prefix.Source == "" {
		def, _ := activation.DefaultDir()
		out.Prefix = settingJSON{def, "default"}
	}
	if a.opts.json {
		return writeJSON(a.stdout, schemaConfig, out)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	file := out.File
	if file == "" {
		file = "none (looked for " + strings.Join(out.Searched, ", ") + ")"
	}
	fmt.Fprintf(tw, "config file\t%s\n", file)
	mirror := out.Mirror.Value
	if mirror == "" {
		mirror = "-"
	}
	fmt.Fprintf(tw, "mirror\t%s\t%s\n", mirror, out.Mirror.Source)
	if len(out.Catalogs) == 0 {
		fmt.Fprintf(tw, "catalog\t-\tonly the built-in catalog and the user layer\n")
	}
	for i, c := range out.Catalogs {
		label := ""
		if i == 0 {
			label = "catalog"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", label, c.File, c.Source)
	}
	fmt.Fprintf(tw, "prefix\t%s\t%s\n", out.Prefix.Value, out.Prefix.Source)
	return tw.Flush()
}

// sourceOf names where a setting came from: the flag when given, else the
// environment or the config file, else "" (the default).
func sourceOf(flag bool, flagName string, s config.Setting) string {
	if flag {
		return flagName
	}
	return s.Source
}
