package elfscan

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
)

// readHeaders reads the ELF header and the program headers of an object of
// size bytes, with the checks debug/elf.NewFile makes and in its words, but
// into one slice of values: debug/elf makes a structure and a section
// reader of every program header, which was a fifth of what a scan
// allocated. The section header table is not read (see eachSection), nor
// checked: what debug/elf refuses in it, the loader never reads. A
// program header table that runs past the end of the file is an EOF, as
// debug/elf reads it, found without reading or allocating it.
func readHeaders(r *pagedReader, size int64) (elf.FileHeader, []elf.ProgHeader, error) {
	fh, t, err := readFileHeader(r)
	if err != nil || t.num == 0 {
		return fh, nil, err
	}
	progs, err := readProgs(r, size, fh, t)
	return fh, progs, err
}

// progTable is where the ELF header says the program headers are.
type progTable struct {
	off          int64
	entsize, num int
	want         int // the size of one entry of the object's class
}

// readFileHeader reads and checks the ELF header.
func readFileHeader(r *pagedReader) (elf.FileHeader, progTable, error) {
	var fh elf.FileHeader
	var t progTable
	var ident [elf.EI_NIDENT]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil {
		return fh, t, err
	}
	if string(ident[:4]) != elf.ELFMAG {
		return fh, t, headerError("bad magic number", [4]byte(ident[:4]), 0)
	}
	fh.Class = elf.Class(ident[elf.EI_CLASS])
	if fh.Class != elf.ELFCLASS32 && fh.Class != elf.ELFCLASS64 {
		return fh, t, headerError("unknown ELF class", fh.Class, 0)
	}
	fh.Data = elf.Data(ident[elf.EI_DATA])
	switch fh.Data {
	case elf.ELFDATA2LSB:
		fh.ByteOrder = binary.LittleEndian
	case elf.ELFDATA2MSB:
		fh.ByteOrder = binary.BigEndian
	default:
		return fh, t, headerError("unknown ELF data encoding", fh.Data, 0)
	}
	bo := byteOrder{big: fh.Data == elf.ELFDATA2MSB}
	fh.Version = elf.Version(ident[elf.EI_VERSION])
	if fh.Version != elf.EV_CURRENT {
		return fh, t, headerError("unknown ELF version", fh.Version, 0)
	}
	fh.OSABI = elf.OSABI(ident[elf.EI_OSABI])
	fh.ABIVersion = ident[elf.EI_ABIVERSION]

	is64 := fh.Class == elf.ELFCLASS64
	var hdr [64]byte // Header64; Header32 is its first 52 bytes
	h := hdr[:52]
	if is64 {
		h = hdr[:]
	}
	if _, err := r.ReadAt(h, 0); err != nil {
		return fh, t, err
	}
	fh.Type = elf.Type(bo.Uint16(h[16:]))
	fh.Machine = elf.Machine(bo.Uint16(h[18:]))
	version := elf.Version(bo.Uint32(h[20:]))
	if is64 {
		fh.Entry = bo.Uint64(h[24:])
		t = progTable{off: int64(bo.Uint64(h[32:])), entsize: int(bo.Uint16(h[54:])), num: int(bo.Uint16(h[56:])), want: 56}
	} else {
		fh.Entry = uint64(bo.Uint32(h[24:]))
		t = progTable{off: int64(bo.Uint32(h[28:])), entsize: int(bo.Uint16(h[42:])), num: int(bo.Uint16(h[44:])), want: 32}
	}
	switch {
	case version != fh.Version:
		return fh, t, headerError("mismatched ELF version", version, 0)
	case t.off < 0:
		return fh, t, headerError("invalid phoff", t.off, 0)
	case t.num > 0 && t.entsize < t.want:
		return fh, t, headerError("invalid ELF phentsize", t.entsize, 0)
	}
	return fh, t, nil
}

// readProgs reads and checks the program headers of table t.
func readProgs(r *pagedReader, size int64, fh elf.FileHeader, t progTable) ([]elf.ProgHeader, error) {
	if uint64(t.off) > uint64(size) || uint64(t.num)*uint64(t.entsize) > uint64(size)-uint64(t.off) {
		return nil, io.EOF
	}
	bo := byteOrder{big: fh.Data == elf.ELFDATA2MSB}
	progs := make([]elf.ProgHeader, t.num)
	var ent [56]byte
	for i := range progs {
		off := t.off + int64(i*t.entsize)
		e := ent[:t.want]
		if _, err := r.ReadAt(e, off); err != nil {
			return nil, err
		}
		p := &progs[i]
		p.Type = elf.ProgType(bo.Uint32(e[0:]))
		if fh.Class == elf.ELFCLASS64 {
			p.Flags = elf.ProgFlag(bo.Uint32(e[4:]))
			p.Off, p.Vaddr, p.Paddr = bo.Uint64(e[8:]), bo.Uint64(e[16:]), bo.Uint64(e[24:])
			p.Filesz, p.Memsz, p.Align = bo.Uint64(e[32:]), bo.Uint64(e[40:]), bo.Uint64(e[48:])
		} else {
			p.Off, p.Vaddr, p.Paddr = uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:])), uint64(bo.Uint32(e[12:]))
			p.Filesz, p.Memsz = uint64(bo.Uint32(e[16:])), uint64(bo.Uint32(e[20:]))
			p.Flags, p.Align = elf.ProgFlag(bo.Uint32(e[24:])), uint64(bo.Uint32(e[28:]))
		}
		if int64(p.Off) < 0 {
			return nil, headerError("invalid program header offset", p.Off, off)
		}
		if int64(p.Filesz) < 0 {
			return nil, headerError("invalid program header file size", p.Filesz, off)
		}
	}
	return progs, nil
}

// headerError words a refusal as debug/elf's FormatError does.
func headerError(msg string, val any, off int64) error {
	return fmt.Errorf("%s '%v' in record at byte %#x", msg, val, off)
}
