// Package elfhash computes the two hash functions of ELF symbol lookup: the
// System V hash (DT_HASH, version records) and the GNU hash (DT_GNU_HASH).
package elfhash

// SysV is the System V ELF hash of name, as DT_HASH tables and version
// records (vd_hash, vna_hash) use it.
func SysV(name string) uint32 {
	var h uint32
	for i := 0; i < len(name); i++ {
		h = h<<4 + uint32(name[i])
		g := h & 0xf0000000
		if g != 0 {
			h ^= g >> 24
		}
		h &^= g
	}
	return h
}

// GNU is the hash of DT_GNU_HASH tables (Bernstein's, seeded 5381).
func GNU(name string) uint32 {
	h := uint32(5381)
	for i := 0; i < len(name); i++ {
		h = h*33 + uint32(name[i])
	}
	return h
}
