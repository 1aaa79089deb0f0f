package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/cudadeps/cudadeps/platform"
)

// ParseError is a problem in a catalog file, at a line.
type ParseError struct {
	Pos Pos
	Msg string
}

func (e *ParseError) Error() string { return e.Pos.String() + ": " + e.Msg }

// The YAML shape of a catalog file, documented in docs/catalog.md.
type fileDoc struct {
	Format     int                      `yaml:"format"`
	Products   map[string]*productDoc   `yaml:"products,omitempty"`
	Drivers    map[string]*driverDoc    `yaml:"drivers,omitempty"`
	Components map[string]*componentDoc `yaml:"components,omitempty"`
}

type productDoc struct {
	Title   string `yaml:"title,omitempty"`
	BaseURL string `yaml:"base_url,omitempty"`
}

type driverDoc struct {
	Advice string `yaml:"advice"`
}

type componentDoc struct {
	Product  string        `yaml:"product,omitempty"`
	Title    string        `yaml:"title,omitempty"`
	License  string        `yaml:"license,omitempty"`
	Sonames  []string      `yaml:"sonames,flow,omitempty"`
	Releases []*releaseDoc `yaml:"releases,omitempty"`
}

type releaseDoc struct {
	Version  string        `yaml:"version"`
	Release  string        `yaml:"release,omitempty"`
	Date     string        `yaml:"date,omitempty"`
	CUDA     int           `yaml:"cuda,omitempty"`
	Archives []*archiveDoc `yaml:"archives"`
}

type archiveDoc struct {
	Platform    string   `yaml:"platform"`
	CUDAVariant string   `yaml:"cuda_variant,omitempty"`
	Path        string   `yaml:"path"`
	SHA256      string   `yaml:"sha256"`
	Size        int64    `yaml:"size"`
	Sonames     []string `yaml:"sonames,flow"`
}

var (
	nameRE       = regexp.MustCompile(`^[a-z0-9][a-z0-9_]*$`)
	sonameRE     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+-]*\.so(\.[A-Za-z0-9_.+-]+)?$`)
	versionRE    = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._+-]*$`)
	dateRE       = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	variantRE    = regexp.MustCompile(`^cuda[1-9][0-9]*(\.[0-9]+)?$`) // cuda13, or cuda13.1 (cuda_compat)
	sha256RE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	pathRE       = regexp.MustCompile(`^[A-Za-z0-9_+-][A-Za-z0-9._+-]*(/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*$`)
	yamlLine     = regexp.MustCompile(`^(?:yaml: )?line ([0-9]+): (.*)$`)
	inTypeRE     = regexp.MustCompile(` in type [A-Za-z0-9_.*\[\]]+`)
	unknownField = regexp.MustCompile(`^field (.+) not found$`)
)

// validSoname reports whether s looks like a shared object name (no path).
func validSoname(s string) bool { return sonameRE.MatchString(s) }

// parseUnchecked reads one file strictly, without the whole-catalog checks.
// The YAML is parsed once into nodes and each entry decoded on its own:
// decoding the components mapping whole would compare every key with
// every other (the YAML library's duplicate check), quadratic in their
// number; duplicates are found here with a map instead.
//
// Every problem is reported, not the first alone: the error is a Problems.
// The catalog returned beside it holds the entries without problems (nil
// when the file is no catalog at all), so that the checks across files can
// still be made.
func parseUnchecked(data []byte, name string) (*Catalog, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ParseError{Pos: Pos{File: name}, Msg: "empty catalog"}
		}
		return nil, yamlError(name, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(name, err)
		}
		return nil, &ParseError{Pos: Pos{File: name, Line: more.Line}, Msg: "only one YAML document allowed"}
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil, &ParseError{Pos: Pos{File: name}, Msg: "empty catalog"}
	}
	top := resolve(root.Content[0])
	if top.Kind != yaml.MappingNode {
		return nil, &ParseError{Pos: Pos{File: name, Line: top.Line}, Msg: "a catalog is a mapping with format, products, drivers and components"}
	}
	p := &parser{file: name}
	p.knownKeys(top, reflect.TypeFor[fileDoc]())
	c := p.catalog(top)
	return c, p.problems.orNil()
}

// knownKeys reports each key that the doc struct t (or a struct below it)
// does not name, as the decoder's KnownFields would, walking the nodes once.
func (p *parser) knownKeys(n *yaml.Node, t reflect.Type) {
	n = resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n == nil {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type mismatch
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			f, ok := fieldByTag(t, k.Value)
			if !ok {
				p.report(p.errf(k, "unknown key %q", k.Value))
				continue
			}
			p.knownKeys(n.Content[i+1], f.Type)
		}
	case reflect.Slice:
		if n.Kind == yaml.SequenceNode {
			for _, e := range n.Content {
				p.knownKeys(e, t.Elem())
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 1; i < len(n.Content); i += 2 {
				p.knownKeys(n.Content[i], t.Elem())
			}
		}
	}
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// decode reads one entry's node into out.
func (p *parser) decode(n *yaml.Node, out any) error {
	if err := n.Decode(out); err != nil {
		return yamlError(p.file, err)
	}
	return nil
}

// yamlError turns the YAML library's messages into "file:line: problem".
func yamlError(name string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return lineError(name, te.Errors[0])
	}
	return lineError(name, err.Error())
}

func lineError(name, msg string) error {
	msg = strings.TrimSpace(msg)
	msg = inTypeRE.ReplaceAllString(msg, "")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		text := m[2]
		if f := unknownField.FindStringSubmatch(text); f != nil {
			text = fmt.Sprintf("unknown key %q", f[1])
		}
		return &ParseError{Pos: Pos{File: name, Line: n}, Msg: text}
	}
	return &ParseError{Pos: Pos{File: name}, Msg: strings.TrimPrefix(msg, "yaml: ")}
}

type parser struct {
	file     string
	problems Problems
}

// report records a problem and lets the parse go on.
func (p *parser) report(err error) { p.problems = append(p.problems, p.fixFile(err)) }

// Problems is every problem found in a catalog. Its message is the first
// problem with a count of the others, to stay one line; Unwrap gives each.
type Problems []error

func (ps Problems) Error() string {
	switch len(ps) {
	case 0:
		return "no problems"
	case 1:
		return ps[0].Error()
	case 2:
		return ps[0].Error() + " (and 1 more problem)"
	}
	return fmt.Sprintf("%s (and %d more problems)", ps[0], len(ps)-1)
}

// Unwrap returns every problem.
func (ps Problems) Unwrap() []error { return ps }

// orNil returns nil for no problems, so that a nil error means none.
func (ps Problems) orNil() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

func (p *parser) at(n *yaml.Node) Pos {
	if n == nil {
		return Pos{File: p.file}
	}
	return Pos{File: p.file, Line: n.Line}
}

func (p *parser) errf(n *yaml.Node, format string, a ...any) error {
	return &ParseError{Pos: p.at(n), Msg: fmt.Sprintf(format, a...)}
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 16; i++ {
		n = n.Alias
	}
	return n
}

// elem is the i-th item of a sequence node, or the node itself when the
// decoded list and the node disagree (which a well-formed file never does).
func elem(seq *yaml.Node, i int) *yaml.Node {
	if s := resolve(seq); s != nil && s.Kind == yaml.SequenceNode && i < len(s.Content) {
		return s.Content[i]
	}
	return seq
}

// value returns the value node of key in a mapping, or nil.
func value(m *yaml.Node, key string) *yaml.Node {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// lineOf is the line of key's value in mapping m, or m's own line.
func lineOf(m *yaml.Node, key string) *yaml.Node {
	if v := value(m, key); v != nil {
		return v
	}
	return m
}

// pairs walks a mapping's key/value nodes in document order.
func pairs(m *yaml.Node, f func(k, v *yaml.Node) error) error {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if first, dup := seen[k.Value]; dup {
			return &ParseError{Pos: Pos{Line: k.Line}, Msg: fmt.Sprintf("%s is already defined (line %d)", k.Value, first)}
		}
		seen[k.Value] = k.Line
		if err := f(k, m.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// entries walks a mapping's key/value nodes in document order as pairs
// does, but reports a duplicate key, or the problem f returns, and goes on
// with the next entry.
func (p *parser) entries(m *yaml.Node, f func(k, v *yaml.Node) error) {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if first, dup := seen[k.Value]; dup {
			p.report(p.errf(k, "%s is already defined (line %d)", k.Value, first))
			continue
		}
		seen[k.Value] = k.Line
		if err := f(k, m.Content[i+1]); err != nil {
			p.report(err)
		}
	}
}

func (p *parser) fixFile(err error) error {
	var pe *ParseError
	if errors.As(err, &pe) && pe.Pos.File == "" {
		pe.Pos.File = p.file
	}
	return err
}

// catalog reads the entries of a catalog file, reporting every problem;
// an entry with a problem is left out.
func (p *parser) catalog(top *yaml.Node) *Catalog {
	c := &Catalog{
		products:   map[string]*Product{},
		drivers:    map[string]*Driver{},
		components: map[string]*Component{},
	}
	format := 0
	if n := value(top, "format"); n != nil {
		if err := p.decode(n, &format); err != nil {
			p.report(err)
		}
	}
	if format != formatVersion {
		p.report(p.errf(lineOf(top, "format"), "format must be %d (got %d)", formatVersion, format))
	}
	for _, key := range []string{"products", "drivers", "components"} {
		if n := resolve(value(top, key)); n != nil && n.Kind != yaml.MappingNode && n.Tag != "!!null" {
			p.report(p.errf(n, "%s must be a mapping", key))
		}
	}
	p.entries(value(top, "products"), func(k, v *yaml.Node) error {
		var d *productDoc
		if err := p.decode(v, &d); err != nil {
			return err
		}
		// A product with a problem is kept, so that the components naming
		// it do not add problems of their own.
		c.products[k.Value] = p.product(k, v, d)
		return nil
	})
	p.entries(value(top, "drivers"), func(k, v *yaml.Node) error {
		var d *driverDoc
		if err := p.decode(v, &d); err != nil {
			return err
		}
		if !validSoname(k.Value) {
			return p.errf(k, "driver %q is not a soname", k.Value)
		}
		if d == nil || strings.TrimSpace(d.Advice) == "" {
			return p.errf(k, "driver %s: advice is missing", k.Value)
		}
		c.drivers[k.Value] = &Driver{Soname: k.Value, Advice: d.Advice, Pos: p.at(k)}
		return nil
	})
	p.entries(value(top, "components"), func(k, v *yaml.Node) error {
		var d *componentDoc
		if err := p.decode(v, &d); err != nil {
			return err
		}
		if comp := p.component(k, v, d); comp != nil {
			c.components[comp.Name] = comp
		}
		return nil
	})
	return c
}

func (p *parser) product(k, v *yaml.Node, d *productDoc) *Product {
	if !nameRE.MatchString(k.Value) {
		p.report(p.errf(k, "product name %q: use lower-case letters, digits and _", k.Value))
	}
	if d == nil {
		d = &productDoc{}
	}
	prod := &Product{Name: k.Value, Title: d.Title, BaseURL: d.BaseURL, Pos: p.at(k)}
	if d.BaseURL != "" {
		if !strings.HasSuffix(d.BaseURL, "/") {
			p.report(p.errf(lineOf(v, "base_url"), "product %s: base_url must end in /", k.Value))
		} else if _, err := NormalizeMirror(d.BaseURL); err != nil {
			p.report(p.errf(lineOf(v, "base_url"), "product %s: base_url %q: must be an https://, http:// or file:/// URL", k.Value, d.BaseURL))
		}
	}
	return prod
}

// sonames reports each bad or repeated soname of list; ok is false if any.
func (p *parser) sonames(n *yaml.Node, list []string, what string) (ok bool) {
	ok = true
	seen := map[string]bool{}
	for i, s := range list {
		at := elem(n, i)
		switch {
		case !validSoname(s):
			p.report(p.errf(at, "%s: %q is not a soname", what, s))
			ok = false
		case seen[s]:
			p.report(p.errf(at, "%s: %s is listed twice", what, s))
			ok = false
		}
		seen[s] = true
	}
	return ok
}

// component reads one component entry, reporting every problem of it, its
// releases and their archives. What it returns holds the sound releases
// alone, for the checks across the catalog; it is nil when the entry names
// no product, which those checks need.
func (p *parser) component(k, v *yaml.Node, d *componentDoc) *Component {
	name := k.Value
	if !nameRE.MatchString(name) {
		p.report(p.errf(k, "component name %q: use lower-case letters, digits and _", name))
	}
	if d == nil {
		p.report(p.errf(k, "component %s is empty", name))
		return nil
	}
	if d.Product == "" {
		p.report(p.errf(k, "component %s: product is missing", name))
		return nil
	}
	p.sonames(value(v, "sonames"), d.Sonames, "component "+name+" sonames")
	comp := &Component{
		Name: name, Product: d.Product, Title: d.Title, License: d.License,
		Sonames: sortedUnique(d.Sonames), Pos: p.at(k),
	}
	relNodes := value(v, "releases")
	versions := map[string]int{}
	for i, rd := range d.Releases {
		rn := elem(relNodes, i)
		r := p.release(name, rn, rd)
		if r == nil {
			continue
		}
		if first, dup := versions[r.Version]; dup {
			p.report(p.errf(rn, "component %s: release %s is listed twice (first at line %d)", name, r.Version, first))
			continue
		}
		versions[r.Version] = rn.Line
		comp.Releases = append(comp.Releases, r)
		for _, a := range r.Archives {
			comp.Sonames = append(comp.Sonames, a.Sonames...)
		}
	}
	comp.Sonames = sortedUnique(comp.Sonames)
	sortReleases(comp.Releases)
	return comp
}

// release reads one release, reporting every problem of it and its
// archives. What it returns holds the sound archives alone; it is nil when
// the release has no version to be known by.
func (p *parser) release(comp string, n *yaml.Node, d *releaseDoc) *Release {
	if d == nil {
		p.report(p.errf(n, "component %s: empty release", comp))
		return nil
	}
	if bad := badVersion(d.Version); bad != "" {
		p.report(p.errf(lineOf(n, "version"), "component %s: version: %s", comp, bad))
		return nil
	}
	what := comp + " " + d.Version
	if bad := badVersion(d.Release); d.Release != "" && bad != "" {
		p.report(p.errf(lineOf(n, "release"), "%s: release: %s", what, bad))
	}
	if d.Date != "" && !dateRE.MatchString(d.Date) {
		p.report(p.errf(lineOf(n, "date"), "%s: date %q is not YYYY-MM-DD", what, d.Date))
	}
	if d.CUDA < 0 {
		p.report(p.errf(lineOf(n, "cuda"), "%s: cuda %d is not a CUDA major", what, d.CUDA))
	}
	if len(d.Archives) == 0 {
		p.report(p.errf(n, "%s: no archives", what))
	}
	r := &Release{Version: d.Version, Label: d.Release, Date: d.Date, CUDA: d.CUDA, Pos: p.at(n)}
	arcNodes := value(n, "archives")
	seen := map[string]int{}
	for i, ad := range d.Archives {
		an := elem(arcNodes, i)
		a := p.archive(what, r, an, ad)
		if a == nil {
			continue
		}
		key := a.Platform + "/" + a.CUDAVariant
		if first, dup := seen[key]; dup {
			p.report(p.errf(an, "%s: two archives for %s %s (first at line %d)", what, a.Platform, a.CUDAVariant, first))
			continue
		}
		seen[key] = an.Line
		r.Archives = append(r.Archives, a)
	}
	sortArchives(r.Archives)
	return r
}

// archive reads one archive, reporting every problem of it; it is nil when
// there was any.
func (p *parser) archive(what string, r *Release, n *yaml.Node, d *archiveDoc) *Archive {
	if d == nil {
		p.report(p.errf(n, "%s: empty archive", what))
		return nil
	}
	start := len(p.problems)
	if !platform.Valid(d.Platform) {
		p.report(p.errf(lineOf(n, "platform"), "%s: unknown platform %q (want one of %s)", what, d.Platform, strings.Join(platform.All(), ", ")))
	}
	if d.CUDAVariant != "" {
		if !variantRE.MatchString(d.CUDAVariant) {
			p.report(p.errf(lineOf(n, "cuda_variant"), "%s: cuda_variant %q is not cudaN or cudaN.M", what, d.CUDAVariant))
		} else if m, _ := variantMajor(d.CUDAVariant); r.CUDA != 0 && m != r.CUDA {
			p.report(p.errf(lineOf(n, "cuda_variant"), "%s: cuda_variant %s contradicts the release's cuda %d", what, d.CUDAVariant, r.CUDA))
		}
	}
	if !pathRE.MatchString(d.Path) || hasDotSegment(d.Path) {
		p.report(p.errf(lineOf(n, "path"), "%s: path %q must be a relative path such as libfoo/linux-x86_64/libfoo-…-archive.tar.xz", what, d.Path))
	}
	if !sha256RE.MatchString(d.SHA256) {
		p.report(p.errf(lineOf(n, "sha256"), "%s: sha256 %q is not 64 lower-case hex digits", what, d.SHA256))
	}
	if d.Size <= 0 || d.Size > maxArchiveSize {
		p.report(p.errf(lineOf(n, "size"), "%s: size %d must be a positive number of bytes, at most %d", what, d.Size, int64(maxArchiveSize)))
	}
	if len(d.Sonames) == 0 {
		p.report(p.errf(lineOf(n, "sonames"), "%s: archive %s lists no sonames", what, d.Path))
	}
	p.sonames(value(n, "sonames"), d.Sonames, what+" "+d.Platform)
	if len(p.problems) > start {
		return nil
	}
	return &Archive{
		Platform: d.Platform, CUDAVariant: d.CUDAVariant, RelativePath: d.Path,
		SHA256: d.SHA256, Size: d.Size, Sonames: sortedUnique(d.Sonames), Pos: p.at(n),
	}
}

func hasDotSegment(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
