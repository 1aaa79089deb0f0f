package gpuarch

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Kind is what a fat binary entry holds.
type Kind uint16

// The entry kinds of NVIDIA's fatbinary.h (FATBIN_KIND_*), and the one
// cuobjdump --list-elf lists besides them.
const (
	KindPTX Kind = 0x1 // PTX text, compiled by the driver at first use
	KindELF Kind = 0x2 // a cubin: native code (SASS)
	// KindIR is NVVM IR for link-time optimisation: nvJitLink links it,
	// the driver never loads it by itself.
	KindIR Kind = 0x8
	// KindELFAlt is a cubin entry of CUDA 13's libraries (cuBLASLt 13)
	// that cuobjdump --list-elf lists with the others.
	KindELFAlt Kind = 0x10
)

// IsSASS reports an entry of native code.
func (k Kind) IsSASS() bool { return k == KindELF || k == KindELFAlt }

// Entry is one fat binary entry, as its header describes it.
type Entry struct {
	Kind   Kind
	Target Target
	// VariantKnown says the header named the variant; when false the
	// entry is taken as Plain (see Judgement.Assumed).
	VariantKnown bool
	// ISA is the PTX ISA version of a PTX entry (the header's "code
	// version"); for a cubin it is the ELF ABI version.
	ISA Version
	// Bytes is what the payload takes in the file; Size is its
	// uncompressed size (equal when it is not compressed, 0 when the
	// header does not say).
	Bytes, Size int64
	Compressed  bool
}

// Code sums the entries of one kind and target that a library carries.
type Code struct {
	Target Target
	// ISA is the PTX ISA version (PTX only).
	ISA     Version
	Entries int
	// Bytes is what the payloads take in the file; Size their
	// uncompressed size, where the headers give it.
	Bytes, Size int64
	// VariantKnown is false when some entry's header named no variant.
	VariantKnown bool
}

// Carried is what the fat binaries of one library hold.
type Carried struct {
	Containers int
	SASS       []Code // by target
	PTX        []Code // by target and ISA
	// Other counts the entries the driver does not load by itself (NVVM
	// IR) or that this reader does not know, by kind.
	Other map[Kind]int
	// groups are the containers by content: the driver picks code per
	// container, so coverage is judged per group.
	groups []*group
	index  map[string]*group
}

// group is the containers that carry the same targets.
type group struct {
	sass       []Entry // one per target
	ptx        []Entry // one per target and ISA, sizes summed
	containers int
}

// AddContainer records one fat binary container's entries.
func (c *Carried) AddContainer(entries []Entry) {
	c.Containers++
	if c.index == nil {
		c.index = map[string]*group{}
	}
	g := &group{}
	for _, e := range entries {
		switch {
		case e.Kind.IsSASS():
			c.SASS = addCode(c.SASS, e, false)
			g.sass = addEntry(g.sass, e, false)
		case e.Kind == KindPTX:
			c.PTX = addCode(c.PTX, e, true)
			g.ptx = addEntry(g.ptx, e, true)
		default:
			if c.Other == nil {
				c.Other = map[Kind]int{}
			}
			c.Other[e.Kind]++
		}
	}
	key := groupKey(g)
	if old, ok := c.index[key]; ok {
		old.containers++
		for i := range old.ptx {
			old.ptx[i].Bytes += g.ptx[i].Bytes
			old.ptx[i].Size += g.ptx[i].Size
		}
		return
	}
	g.containers = 1
	c.index[key] = g
	c.groups = append(c.groups, g)
}

// Empty reports a library without a fat binary entry.
func (c *Carried) Empty() bool {
	return c == nil || len(c.SASS) == 0 && len(c.PTX) == 0 && len(c.Other) == 0
}

// sameCode reports whether code for target a at ISA aISA is code for b at
// bISA (the ISAs compared only when byISA is set).
func sameCode(a Target, aISA Version, b Target, bISA Version, byISA bool) bool {
	return a == b && (!byISA || aISA == bISA)
}

// compareCode orders code by architecture, then variant, then ISA.
func compareCode(a Target, aISA Version, b Target, bISA Version) int {
	return cmp.Or(cmp.Compare(a.SM, b.SM), cmp.Compare(a.Variant, b.Variant), cmpVersion(aISA, bISA))
}

func addCode(list []Code, e Entry, byISA bool) []Code {
	for i := range list {
		if sameCode(list[i].Target, list[i].ISA, e.Target, e.ISA, byISA) {
			list[i].Entries++
			list[i].Bytes += e.Bytes
			list[i].Size += e.Size
			list[i].VariantKnown = list[i].VariantKnown && e.VariantKnown
			return list
		}
	}
	c := Code{Target: e.Target, Entries: 1, Bytes: e.Bytes, Size: e.Size, VariantKnown: e.VariantKnown}
	if byISA {
		c.ISA = e.ISA
	}
	list = append(list, c)
	slices.SortFunc(list, func(a, b Code) int { return compareCode(a.Target, a.ISA, b.Target, b.ISA) })
	return list
}

func addEntry(list []Entry, e Entry, byISA bool) []Entry {
	for i := range list {
		if sameCode(list[i].Target, list[i].ISA, e.Target, e.ISA, byISA) {
			list[i].Bytes += e.Bytes
			list[i].Size += e.Size
			list[i].VariantKnown = list[i].VariantKnown && e.VariantKnown
			return list
		}
	}
	list = append(list, e)
	slices.SortFunc(list, func(a, b Entry) int { return compareCode(a.Target, a.ISA, b.Target, b.ISA) })
	return list
}

func cmpVersion(a, b Version) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

func groupKey(g *group) string {
	var b strings.Builder
	for _, e := range g.sass {
		b.WriteString(e.Target.SASS())
		if !e.VariantKnown {
			b.WriteByte('?')
		}
		b.WriteByte(' ')
	}
	b.WriteByte('|')
	for _, e := range g.ptx {
		b.WriteString(e.Target.PTX())
		b.WriteByte('@')
		b.WriteString(strconv.Itoa(e.ISA.Major) + "." + strconv.Itoa(e.ISA.Minor))
		if !e.VariantKnown {
			b.WriteByte('?')
		}
		b.WriteByte(' ')
	}
	return b.String()
}
