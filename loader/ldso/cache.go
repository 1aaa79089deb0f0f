package ldso

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The binary format of /etc/ld.so.cache as glibc's ldconfig writes it
// (glibc 2.32 and later write only the "new" format; older ones wrap it in
// the libc5 format). The loader reads it with a binary search over entries
// sorted by _dl_cache_libcmp; entries of other architectures are recognised
// by their flags.
const (
	cacheMagicOld = "ld.so-1.7.0"
	cacheMagicNew = "glibc-ld.so.cache1.1"

	oldHeaderSize   = 16 // magic[11] + padding + nlibs
	oldEntrySize    = 12 // flags, key, value
	newHeaderSize   = 48
	newEntrySize    = 24 // flags, key, value, osversion, hwcap
	extensionMagic  = 0xeaa42174
	extTagGenerator = 0
	extTagHWCaps    = 1

	// hwcapExtension marks an entry whose low 32 bits index the glibc-hwcaps
	// subdirectory names of the cache extension.
	hwcapExtension = uint64(1) << 62
	// hwcapISALevelMask covers the ISA level bits stored above bit 32.
	hwcapISALevelMask = (uint64(1) << 10) - 1
	hwcapTLSBit       = uint64(1) << 63
)

// Cache flags (FLAG_* in glibc's ldconfig.h).
const (
	flagTypeMask      = 0x00ff
	flagELF           = 0x0001
	flagELFLibc6      = 0x0003
	flagRequiredMask  = 0xff00
	flagSparcLib64    = 0x0100
	flagX8664Lib64    = 0x0300
	flagS390Lib64     = 0x0400
	flagPowerPCLib64  = 0x0500
	flagX8664LibX32   = 0x0800
	flagARMLibHF      = 0x0900
	flagAArch64Lib64  = 0x0a00
	flagARMLibSF      = 0x0b00
	flagRISCVDouble   = 0x1000
	flagLArchDouble   = 0x1200
	flagRISCVSoft     = 0x0f00
	flagMIPS64LibN64  = 0x0700
	flagIA64Lib64     = 0x0200
	flagMIPS64LibN32  = 0x0600
	flagLArchSoft     = 0x1100
	flagMIPSNAN2008   = 0x0c00
	flagMIPSN32NAN    = 0x0d00
	flagMIPSN64NAN    = 0x0e00
	flagAnyELFLibc6Ok = flagELFLibc6
)

// CacheEntry is one entry of ld.so.cache.
type CacheEntry struct {
	Name  string // the soname (key)
	Path  string // the file (value)
	Flags int32
	HWCap uint64
	// HWCapsDir is the glibc-hwcaps subdirectory name (x86-64-v3, ...) of an
	// entry that lives in one, empty otherwise.
	HWCapsDir string
}

// Arch describes the entry's architecture the way `ldconfig -p` does.
func (e CacheEntry) Arch() string {
	return flagsDescription(e.Flags)
}

// Cache is a parsed ld.so.cache.
type Cache struct {
	Path    string
	Entries []CacheEntry // in file order (sorted by _dl_cache_libcmp, descending)
	// Generator names the program that wrote the file, when recorded.
	Generator string
}

// MaxCacheSize bounds the ld.so.cache read: the caches of large systems
// are a few hundred kilobytes, and a root may be an untrusted image.
const MaxCacheSize = 64 << 20

// ParseCache parses the binary contents of an ld.so.cache. Like ld.so, it
// accepts the new format alone or embedded after the old one, and rejects a
// file whose byte order does not match its flags. The names and paths of the
// entries share the memory of one copy of data, and finding where each
// string ends costs time linear in the file, whatever the file holds.
func ParseCache(data []byte) (*Cache, error) {
	text := string(data)
	switch {
	case len(data) > newHeaderSize && strings.HasPrefix(text, cacheMagicNew):
		return parseNew(newStrtab(text, 0))
	case len(data) > oldHeaderSize && strings.HasPrefix(text, cacheMagicOld):
		nlibs := binary.LittleEndian.Uint32(data[12:])
		if uint64(len(data)-oldHeaderSize)/oldEntrySize < uint64(nlibs) {
			return nil, errors.New("old-format header promises more entries than the file holds")
		}
		off := alignCache(oldHeaderSize + int(nlibs)*oldEntrySize)
		if off+newHeaderSize < len(data) && strings.HasPrefix(text[off:], cacheMagicNew) {
			return parseNew(newStrtab(text[off:], 0))
		}
		return parseOld(newStrtab(text, oldHeaderSize+int(nlibs)*oldEntrySize), nlibs)
	default:
		return nil, errors.New("not an ld.so.cache file (bad magic)")
	}
}

func alignCache(n int) int {
	const a = 8 // __alignof__(struct cache_file_new)
	return (n + a - 1) &^ (a - 1)
}

// strtabBlock is the granularity of strtab's index of NUL bytes.
const strtabBlock = 256

// strtab finds the NUL-terminated strings of a cache file at offsets from a
// base. A string is a slice of the file's text, never a copy, and where it
// ends is found by scanning at most one block and then one index look-up:
// a hostile file whose entries all point into one long run without NUL
// costs no more than an honest one.
type strtab struct {
	text string
	base int
	// nextNUL[b] is the offset of the first NUL at or after block b, or -1.
	nextNUL []int32
}

func newStrtab(text string, base int) *strtab {
	n := (len(text) + strtabBlock - 1) / strtabBlock
	t := &strtab{text: text, base: base, nextNUL: make([]int32, n+1)}
	t.nextNUL[n] = -1
	for b := n - 1; b >= 0; b-- {
		start := b * strtabBlock
		end := min(start+strtabBlock, len(text))
		if i := strings.IndexByte(text[start:end], 0); i >= 0 {
			t.nextNUL[b] = int32(start + i)
		} else {
			t.nextNUL[b] = t.nextNUL[b+1]
		}
	}
	return t
}

// at returns the string at base+off; ok is false when it lies outside the
// file or has no terminating NUL.
func (t *strtab) at(off uint32) (string, bool) {
	p := uint64(t.base) + uint64(off)
	if p >= uint64(len(t.text)) {
		return "", false
	}
	start := int(p)
	b := start / strtabBlock
	blockEnd := min((b+1)*strtabBlock, len(t.text))
	if i := strings.IndexByte(t.text[start:blockEnd], 0); i >= 0 {
		return t.text[start : start+i], true
	}
	end := t.nextNUL[b+1]
	if end < 0 {
		return "", false
	}
	return t.text[start:end], true
}

func parseNew(t *strtab) (*Cache, error) {
	data := t.text
	// The flags byte at offset 28 records the byte order (1 = big, 2 =
	// little, 0 = unknown: the writer's own, taken as little here).
	big := false
	switch data[28] & 3 {
	case 1:
		big = true
	case 3:
		return nil, errors.New("invalid byte order flags")
	}
	u32 := func(off uint64) uint32 { return strUint32(data, off, big) }
	nlibs := u32(20)
	if uint64(len(data)-newHeaderSize)/newEntrySize < uint64(nlibs) {
		return nil, fmt.Errorf("header promises %d entries, the file holds fewer", nlibs)
	}
	c := &Cache{}
	hwcapNames := map[uint32]string{}
	if ext := uint64(u32(32)); ext != 0 && ext+8 <= uint64(len(data)) && u32(ext) == extensionMagic {
		count := uint64(u32(ext + 4))
		for i := uint64(0); i < count; i++ {
			so := ext + 8 + i*16
			if so+16 > uint64(len(data)) {
				break
			}
			tag := u32(so)
			off := uint64(u32(so + 8))
			size := uint64(u32(so + 12))
			if off+size > uint64(len(data)) {
				continue
			}
			switch tag {
			case extTagGenerator:
				c.Generator = data[off : off+size]
			case extTagHWCaps:
				for j := uint64(0); j+4 <= size; j += 4 {
					if s, ok := t.at(u32(off + j)); ok {
						hwcapNames[uint32(j/4)] = s
					}
				}
			}
		}
	}
	c.Entries = make([]CacheEntry, 0, nlibs)
	for i := uint32(0); i < nlibs; i++ {
		e := uint64(newHeaderSize) + uint64(i)*newEntrySize
		key, ok1 := t.at(u32(e + 4))
		val, ok2 := t.at(u32(e + 8))
		if !ok1 || !ok2 {
			// ld.so stops its search at a bogus index; keep the entry out.
			continue
		}
		ent := CacheEntry{Name: key, Path: val, Flags: int32(u32(e)), HWCap: strUint64(data, e+16, big)}
		if isHWCapExtension(ent.HWCap) {
			ent.HWCapsDir = hwcapNames[uint32(ent.HWCap)]
		}
		c.Entries = append(c.Entries, ent)
	}
	return c, nil
}

// strUint32 reads a 32-bit integer at off of a string.
func strUint32(s string, off uint64, big bool) uint32 {
	b := s[off : off+4]
	if big {
		return uint32(b[3]) | uint32(b[2])<<8 | uint32(b[1])<<16 | uint32(b[0])<<24
	}
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func strUint64(s string, off uint64, big bool) uint64 {
	lo, hi := uint64(strUint32(s, off, big)), uint64(strUint32(s, off+4, big))
	if big {
		return lo<<32 | hi
	}
	return hi<<32 | lo
}

func parseOld(t *strtab, nlibs uint32) (*Cache, error) {
	data := t.text
	u32 := func(off int) uint32 { return strUint32(data, uint64(off), false) }
	c := &Cache{}
	for i := 0; i < int(nlibs); i++ {
		e := oldHeaderSize + i*oldEntrySize
		key, ok1 := t.at(u32(e + 4))
		val, ok2 := t.at(u32(e + 8))
		if !ok1 || !ok2 {
			continue
		}
		c.Entries = append(c.Entries, CacheEntry{Name: key, Path: val, Flags: int32(u32(e))})
	}
	return c, nil
}

func isHWCapExtension(hwcap uint64) bool {
	return (hwcap>>32)&^hwcapISALevelMask == hwcapExtension>>32
}

// cacheArch says which cache entries a loader of one architecture accepts.
type cacheArch struct {
	accept  []int32 // flags values _dl_cache_check_flags accepts
	exact   int32   // _DL_CACHE_DEFAULT_ID: an entry with these flags ends the search
	machine elf.Machine
}

func (a cacheArch) accepts(flags int32) bool {
	return slices.Contains(a.accept, flags)
}

// cacheArchFor returns glibc's _dl_cache_check_flags for a machine and class.
func cacheArchFor(m elf.Machine, c elf.Class, flags uint32) cacheArch {
	one := func(f int32) cacheArch { return cacheArch{accept: []int32{f}, exact: f, machine: m} }
	switch m {
	case elf.EM_X86_64:
		if c == elf.ELFCLASS32 {
			return one(flagX8664LibX32 | flagELFLibc6)
		}
		return one(flagX8664Lib64 | flagELFLibc6)
	case elf.EM_AARCH64:
		return one(flagAArch64Lib64 | flagELFLibc6)
	case elf.EM_PPC64:
		return one(flagPowerPCLib64 | flagELFLibc6)
	case elf.EM_S390:
		if c == elf.ELFCLASS64 {
			return one(flagS390Lib64 | flagELFLibc6)
		}
	case elf.EM_RISCV:
		// The float ABI is in e_flags; double-float is what distributions ship.
		if flags&0x6 == 0 {
			return one(flagRISCVSoft | flagELFLibc6)
		}
		return one(flagRISCVDouble | flagELFLibc6)
	case elf.EM_ARM:
		// EF_ARM_ABI_FLOAT_HARD = 0x400
		if flags&0x400 != 0 {
			return cacheArch{accept: []int32{flagARMLibHF | flagELFLibc6}, exact: flagARMLibHF | flagELFLibc6, machine: m}
		}
		return cacheArch{accept: []int32{flagARMLibSF | flagELFLibc6, flagELF, flagELFLibc6}, exact: flagARMLibSF | flagELFLibc6, machine: m}
	case elf.EM_LOONGARCH:
		return one(flagLArchDouble | flagELFLibc6)
	}
	// i386 and the generic rule: plain ELF or libc6 entries.
	return cacheArch{accept: []int32{flagELF, flagELFLibc6}, exact: flagELFLibc6, machine: m}
}

// libcmp is glibc's _dl_cache_libcmp: digit runs compare numerically.
func libcmp(a, b string) int {
	i, j := 0, 0
	for i < len(a) {
		ca := a[i]
		var cb byte
		if j < len(b) {
			cb = b[j]
		}
		switch {
		case isDigit(ca):
			if !isDigit(cb) {
				return 1
			}
			var va, vb int64
			for i < len(a) && isDigit(a[i]) {
				va = va*10 + int64(a[i]-'0')
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				vb = vb*10 + int64(b[j]-'0')
				j++
			}
			if va != vb {
				if va < vb {
					return -1
				}
				return 1
			}
		case isDigit(cb):
			return -1
		case ca != cb:
			return int(ca) - int(cb)
		default:
			i++
			j++
		}
	}
	if j < len(b) {
		return -int(b[j])
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lookup finds name the way _dl_load_cache_lookup does: among the entries
// with that name and acceptable flags, the glibc-hwcaps entry of the best
// supported subdirectory wins; otherwise the first plain entry; an entry
// with the exact default flags ends the search.
func (c *Cache) lookup(name string, arch cacheArch, hwcapPriority map[string]int) (CacheEntry, bool) {
	if c == nil {
		return CacheEntry{}, false
	}
	// The entries are sorted so that libcmp descends; find the range of
	// equal names with a binary search like ld.so's.
	n := len(c.Entries)
	lo := sort.Search(n, func(i int) bool { return libcmp(name, c.Entries[i].Name) >= 0 })
	var best CacheEntry
	found := false
	bestPrio := 0
	for i := lo; i < n && libcmp(name, c.Entries[i].Name) == 0; i++ {
		e := c.Entries[i]
		if !arch.accepts(e.Flags) {
			continue
		}
		named := isHWCapExtension(e.HWCap)
		if named {
			prio := hwcapPriority[e.HWCapsDir]
			if prio == 0 {
				continue
			}
			if found && prio >= bestPrio {
				continue
			}
			best, found, bestPrio = e, true, prio
			continue
		}
		if found {
			// Named entries come first; a plain one after a named match
			// cannot beat it.
			break
		}
		if e.HWCap&^hwcapTLSBit != 0 {
			// Legacy hwcap entries (bits for CPU features or platforms):
			// rare, and ld.so accepts them only for a matching CPU; we do
			// not model that CPU, so we leave them out.
			continue
		}
		best, found = e, true
		if e.Flags == arch.exact {
			break
		}
	}
	return best, found
}

// flagsDescription renders flags the way `ldconfig -p` does.
func flagsDescription(flags int32) string {
	var typ string
	switch flags & flagTypeMask {
	case flagELF:
		typ = "ELF"
	case flagELFLibc6:
		typ = "libc6"
	default:
		typ = "unknown"
	}
	switch flags & flagRequiredMask {
	case 0:
		return typ
	case flagSparcLib64:
		return typ + ",64bit"
	case flagIA64Lib64:
		return typ + ",IA-64"
	case flagX8664Lib64:
		return typ + ",x86-64"
	case flagS390Lib64:
		return typ + ",64bit"
	case flagPowerPCLib64:
		return typ + ",64bit"
	case flagMIPS64LibN32:
		return typ + ",N32"
	case flagMIPS64LibN64:
		return typ + ",64bit"
	case flagX8664LibX32:
		return typ + ",x32"
	case flagARMLibHF:
		return typ + ",hard-float"
	case flagAArch64Lib64:
		return typ + ",AArch64"
	case flagARMLibSF:
		return typ + ",soft-float"
	case flagMIPSNAN2008:
		return typ + ",nan2008"
	case flagMIPSN32NAN:
		return typ + ",N32,nan2008"
	case flagMIPSN64NAN:
		return typ + ",64bit,nan2008"
	case flagRISCVSoft:
		return typ + ",soft-float"
	case flagRISCVDouble:
		return typ + ",double-float"
	case flagLArchSoft:
		return typ + ",soft-float"
	case flagLArchDouble:
		return typ + ",double-float"
	}
	return fmt.Sprintf("%s,flags=%#x", typ, flags)
}
