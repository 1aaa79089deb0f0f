package gpuarch

import (
	_ "embed"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed devices.yaml
var devicesYAML []byte

//go:embed builders.yaml
var buildersYAML []byte

// KnownDevice is one row of the device table.
type KnownDevice struct {
	Name    string   `yaml:"name"`
	CC      string   `yaml:"cc"`
	Aliases []string `yaml:"aliases"`
	PCI     []string `yaml:"pci"`
	Tegra   []string `yaml:"tegra"`
	Note    string   `yaml:"note"`
	Source  string   `yaml:"source"`

	cc  CC
	pci []idRange
}

type idRange struct{ lo, hi uint16 }

// Tables are the device table and the table of libraries that build
// kernels at run time.
type Tables struct {
	Devices  []*KnownDevice
	Builders []BuilderRow
}

// BuilderRow is one library that builds its kernels at run time.
type BuilderRow struct {
	File   string `yaml:"file"`
	How    string `yaml:"how"`
	Source string `yaml:"source"`
}

// LoadTables parses the built-in tables.
func LoadTables() (*Tables, error) { return ParseTables(devicesYAML, buildersYAML) }

// ParseTables reads and checks a device table and a builder table.
func ParseTables(devices, builders []byte) (*Tables, error) {
	t := &Tables{}
	if err := yaml.Unmarshal(devices, &t.Devices); err != nil {
		return nil, fmt.Errorf("device table: %w", err)
	}
	seen := map[string]string{}
	for i, d := range t.Devices {
		where := fmt.Sprintf("device table, row %d (%s)", i+1, d.Name)
		if d == nil || d.Name == "" || strings.TrimSpace(d.Source) == "" {
			return nil, fmt.Errorf("%s: needs a name and a source", where)
		}
		cc, err := ParseCC(d.CC)
		if err != nil || !strings.Contains(d.CC, ".") {
			return nil, fmt.Errorf("%s: cc %q is not major.minor", where, d.CC)
		}
		d.cc = cc
		for _, a := range d.Aliases {
			if other, dup := seen[a]; dup {
				return nil, fmt.Errorf("%s: alias %q also names %s", where, a, other)
			}
			seen[a] = d.Name
		}
		for _, p := range d.PCI {
			r, err := parseIDRange(p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			for _, o := range t.Devices[:i] {
				for _, or := range o.pci {
					if r.lo <= or.hi && or.lo <= r.hi {
						return nil, fmt.Errorf("%s: PCI IDs %s overlap those of %s", where, p, o.Name)
					}
				}
			}
			d.pci = append(d.pci, r)
		}
	}
	if err := yaml.Unmarshal(builders, &t.Builders); err != nil {
		return nil, fmt.Errorf("builder table: %w", err)
	}
	for i, b := range t.Builders {
		if _, err := path.Match(b.File, ""); err != nil || b.File == "" || b.How == "" || strings.TrimSpace(b.Source) == "" {
			return nil, fmt.Errorf("builder table, row %d (%s): needs a valid file glob, how and source", i+1, b.File)
		}
	}
	return t, nil
}

func parseIDRange(s string) (idRange, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	a, err1 := strconv.ParseUint(strings.TrimPrefix(lo, "0x"), 16, 16)
	b, err2 := strconv.ParseUint(strings.TrimPrefix(hi, "0x"), 16, 16)
	if err1 != nil || err2 != nil || !strings.HasPrefix(lo, "0x") || !strings.HasPrefix(hi, "0x") || a > b {
		return idRange{}, fmt.Errorf("PCI ID %q is not 0xNNNN or 0xNNNN-0xNNNN", s)
	}
	return idRange{uint16(a), uint16(b)}, nil
}

// ByPCI finds the device of an NVIDIA PCI device ID.
func (t *Tables) ByPCI(id uint16) *KnownDevice {
	return t.first(func(d *KnownDevice) bool {
		return slices.ContainsFunc(d.pci, func(r idRange) bool { return r.lo <= id && id <= r.hi })
	})
}

// ByTegra finds the device of a device tree "compatible" string.
func (t *Tables) ByTegra(compatible string) *KnownDevice {
	return t.first(func(d *KnownDevice) bool { return slices.Contains(d.Tegra, compatible) })
}

// ByAlias finds the device --sm names ("thor", "h100").
func (t *Tables) ByAlias(name string) *KnownDevice {
	name = strings.ToLower(strings.TrimSpace(name))
	return t.first(func(d *KnownDevice) bool { return slices.Contains(d.Aliases, name) })
}

// ByCC finds the first row of a compute capability.
func (t *Tables) ByCC(cc CC) *KnownDevice {
	return t.first(func(d *KnownDevice) bool { return d.cc == cc })
}

// first is the first row that match accepts; nil when none does.
func (t *Tables) first(match func(*KnownDevice) bool) *KnownDevice {
	if i := slices.IndexFunc(t.Devices, match); i >= 0 {
		return t.Devices[i]
	}
	return nil
}

// Builder finds how a library builds its kernels at run time, by its file
// name or soname; nil when the table does not know it as a builder.
func (t *Tables) Builder(names ...string) *Builder {
	for _, b := range t.Builders {
		for _, n := range names {
			if n == "" {
				continue
			}
			if ok, _ := path.Match(b.File, path.Base(n)); ok {
				return &Builder{How: b.How, Source: b.Source}
			}
		}
	}
	return nil
}

// ParseSM reads --sm: a compute capability (9.0, 90, sm_90) or a device
// name of the table (thor, h100, gb10).
func (t *Tables) ParseSM(s string) (CC, *KnownDevice, error) {
	if d := t.ByAlias(s); d != nil {
		return d.cc, d, nil
	}
	cc, err := ParseCC(s)
	if err != nil {
		var names []string
		for _, d := range t.Devices {
			if len(d.Aliases) > 0 {
				names = append(names, d.Aliases[0])
			}
		}
		return CC{}, nil, fmt.Errorf("%w, or name a device (%s)", err, strings.Join(names, ", "))
	}
	return cc, t.ByCC(cc), nil
}
