package catalog

import (
	"bytes"
	_ "embed"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cudadeps/cudadeps/internal/dotted"
	"github.com/cudadeps/cudadeps/platform"
)

//go:embed sonames.yaml
var embeddedTable []byte

// Table is the curated soname table: which sonames the archives of each
// component provide, by CUDA major, version and platform, with the driver
// libraries and the manifest components that hold no shared library.
type Table struct {
	Products   map[string]string // product name → title
	Drivers    map[string]string // soname → advice
	Skip       []string
	Components map[string]*TableComponent
}

// TableComponent is the table's knowledge of one component.
type TableComponent struct {
	Product  string
	Title    string
	Provides []TableRule
}

// TableRule gives the sonames of the component's archives that match all
// of its conditions (an empty condition matches anything).
type TableRule struct {
	CUDA      int      // CUDA major the archive is built for
	Since     string   // component version >= Since
	Before    string   // component version < Before
	Platforms []string // only these platforms
	Sonames   []string // "{major.minor}" stands for the component version's first two fields
	Source    string   // where the facts come from
}

type tableDoc struct {
	Format     int                        `yaml:"format"`
	Products   map[string]string          `yaml:"products"`
	Drivers    map[string]driverDoc       `yaml:"drivers"`
	Skip       []string                   `yaml:"skip"`
	Components map[string]*tableComponent `yaml:"components"`
}

type tableComponent struct {
	Product  string      `yaml:"product"`
	Title    string      `yaml:"title"`
	Provides []tableRule `yaml:"provides"`
}

type tableRule struct {
	CUDA      int      `yaml:"cuda"`
	Since     string   `yaml:"since"`
	Before    string   `yaml:"before"`
	Platforms []string `yaml:"platforms"`
	Sonames   []string `yaml:"sonames"`
	Source    string   `yaml:"source"`
}

const mmToken = "{major.minor}"

// builtinTable returns the curated soname table built into the binary.
func builtinTable() (*Table, error) {
	return ParseTable(embeddedTable, "catalog/sonames.yaml")
}

// ParseTable reads a soname table strictly.
func ParseTable(data []byte, name string) (*Table, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(name, err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil, &ParseError{Pos: Pos{File: name}, Msg: "empty soname table"}
	}
	top := root.Content[0]
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc tableDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, yamlError(name, err)
	}
	p := &parser{file: name}
	if doc.Format != formatVersion {
		return nil, p.errf(lineOf(top, "format"), "format must be %d (got %d)", formatVersion, doc.Format)
	}
	t := &Table{Products: doc.Products, Drivers: map[string]string{}, Skip: doc.Skip, Components: map[string]*TableComponent{}}
	if t.Products == nil {
		t.Products = map[string]string{}
	}
	err := pairs(value(top, "drivers"), func(k, v *yaml.Node) error {
		if !validSoname(k.Value) || strings.TrimSpace(doc.Drivers[k.Value].Advice) == "" {
			return p.errf(k, "driver %q needs a soname and advice", k.Value)
		}
		t.Drivers[k.Value] = doc.Drivers[k.Value].Advice
		return nil
	})
	if err != nil {
		return nil, p.fixFile(err)
	}
	err = pairs(value(top, "components"), func(k, v *yaml.Node) error {
		d := doc.Components[k.Value]
		if !nameRE.MatchString(k.Value) || d == nil {
			return p.errf(k, "component %q: bad name or empty entry", k.Value)
		}
		if _, ok := t.Products[d.Product]; !ok {
			return p.errf(lineOf(v, "product"), "component %s: product %q is not in products", k.Value, d.Product)
		}
		tc := &TableComponent{Product: d.Product, Title: d.Title}
		rules := value(v, "provides")
		for i, r := range d.Provides {
			at := elem(rules, i)
			if err := p.checkRule(k.Value, at, r); err != nil {
				return err
			}
			tc.Provides = append(tc.Provides, TableRule(r))
		}
		if len(tc.Provides) == 0 {
			return p.errf(k, "component %s provides nothing", k.Value)
		}
		t.Components[k.Value] = tc
		return nil
	})
	if err != nil {
		return nil, p.fixFile(err)
	}
	for i, s := range t.Skip {
		if _, ok := t.Components[s]; ok {
			return nil, p.errf(elem(value(top, "skip"), i), "%s is both skipped and given sonames", s)
		}
	}
	return t, nil
}

func (p *parser) checkRule(comp string, at *yaml.Node, r tableRule) error {
	if strings.TrimSpace(r.Source) == "" {
		return p.errf(at, "component %s: every rule says where its facts come from (source)", comp)
	}
	if r.CUDA < 0 {
		return p.errf(at, "component %s: cuda %d is not a CUDA major", comp, r.CUDA)
	}
	for _, v := range []string{r.Since, r.Before} {
		if bad := badVersion(v); v != "" && bad != "" {
			return p.errf(at, "component %s: %s", comp, bad)
		}
	}
	for _, pl := range r.Platforms {
		if !platform.Valid(pl) {
			return p.errf(at, "component %s: unknown platform %q", comp, pl)
		}
	}
	if len(r.Sonames) == 0 {
		return p.errf(at, "component %s: a rule without sonames", comp)
	}
	for _, s := range r.Sonames {
		if !validSoname(strings.ReplaceAll(s, mmToken, "1.0")) {
			return p.errf(at, "component %s: %q is not a soname", comp, s)
		}
	}
	return nil
}

// matches reports whether the rule applies to an archive of the given
// component version, CUDA major and platform.
func (r TableRule) matches(version string, cuda int, platform string) bool {
	if r.CUDA != 0 && r.CUDA != cuda {
		return false
	}
	if r.Since != "" && dotted.Compare(version, r.Since) < 0 {
		return false
	}
	if r.Before != "" && dotted.Compare(version, r.Before) >= 0 {
		return false
	}
	return len(r.Platforms) == 0 || slices.Contains(r.Platforms, platform)
}

// sonames lists what the table says an archive of the component provides.
func (tc *TableComponent) sonames(version string, cuda int, platform string) []string {
	var out []string
	for _, r := range tc.Provides {
		if r.matches(version, cuda, platform) {
			for _, s := range r.Sonames {
				out = append(out, expandSoname(s, version))
			}
		}
	}
	return sortedUnique(out)
}

// known lists the sonames of the rules that need no version: what the
// component is known to provide whether or not an archive is at hand.
func (tc *TableComponent) known() []string {
	var out []string
	for _, r := range tc.Provides {
		for _, s := range r.Sonames {
			if !strings.Contains(s, mmToken) {
				out = append(out, s)
			}
		}
	}
	return sortedUnique(out)
}

func expandSoname(s, version string) string {
	if !strings.Contains(s, mmToken) {
		return s
	}
	f := strings.Split(version, ".")
	mm := f[0]
	if len(f) > 1 {
		mm += "." + f[1]
	}
	return strings.ReplaceAll(s, mmToken, mm)
}

// skipped reports whether the table says the component holds no shared library.
func (t *Table) skipped(component string) bool { return slices.Contains(t.Skip, component) }
