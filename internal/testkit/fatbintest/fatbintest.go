// Package fatbintest writes CUDA fat binaries for tests: containers of PTX, cubin and other entries for chosen architectures, compressed or not, in the .nv_fatbin section of an ELF object.
package fatbintest

import (
	"bytes"
	"encoding/binary"

	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// Entry kinds (NVIDIA's fatbinary.h).
const (
	PTX = 0x1
	ELF = 0x2
	IR  = 0x8
)

// Entry is one fat binary entry.
type Entry struct {
	Kind uint16
	Arch uint32 // 90 for sm_90
	// Major and Minor are the header's code version: the PTX ISA of a
	// PTX entry (default 9.0), the ELF ABI of a cubin (default 1.8).
	Major, Minor uint16
	// Payload is the entry's data (default: 40 bytes of filler).
	Payload []byte
	// LZ and Zstd set the compression flags (0x2000, 0x8000); the header
	// then gives Payload's length as the compressed size and
	// UncompressedSize (default 4 × the payload) as the uncompressed one.
	LZ, Zstd         bool
	UncompressedSize uint64
	// Identifier and Options are the strings the header may carry.
	Identifier, Options string
	// ArchSpecific and Family set the variant flags (0x100000 for
	// sm_90a, 0x200000 for sm_100f), as nvcc 13 writes them.
	ArchSpecific, Family bool
}

// Container is one fat binary container.
type Container struct {
	Entries []Entry
	// PadAfter zero bytes follow the container (alignment padding).
	PadAfter int
}

// Build writes containers one after another, as a .nv_fatbin section holds
// them.
func Build(cs ...Container) []byte {
	var out bytes.Buffer
	le := binary.LittleEndian
	for _, c := range cs {
		var body bytes.Buffer
		for _, e := range c.Entries {
			body.Write(entry(e))
		}
		var h [16]byte
		le.PutUint32(h[0:], 0xBA55ED50)
		le.PutUint16(h[4:], 1)
		le.PutUint16(h[6:], 16)
		le.PutUint64(h[8:], uint64(body.Len()))
		out.Write(h[:])
		out.Write(body.Bytes())
		out.Write(make([]byte, c.PadAfter))
	}
	return out.Bytes()
}

func pad8(b []byte) []byte {
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// entry writes one entry: its header (64 bytes, then the identifier, then
// the options' offset and size and the options), then its payload padded
// to 8 bytes.
func entry(e Entry) []byte {
	le := binary.LittleEndian
	payload := e.Payload
	if payload == nil {
		payload = bytes.Repeat([]byte{0xa5}, 40)
	}
	major, minor := e.Major, e.Minor
	if major == 0 && minor == 0 {
		major, minor = 1, 8
		if e.Kind == PTX {
			major, minor = 9, 0
		}
	}
	ext := []byte{}
	var idOff, idLen, optOff uint32
	if e.Identifier != "" {
		idOff, idLen = 64, uint32(len(e.Identifier))
		ext = pad8(append(ext, e.Identifier...))
	}
	if e.Options != "" || e.Kind == PTX {
		optOff = uint32(64 + len(ext))
		pair := make([]byte, 8)
		if e.Options != "" {
			le.PutUint32(pair[0:], optOff+8)
			le.PutUint32(pair[4:], uint32(len(e.Options)))
		}
		ext = append(ext, pair...)
		ext = pad8(append(ext, e.Options...))
	}
	h := make([]byte, 64)
	padded := pad8(append([]byte(nil), payload...))
	le.PutUint16(h[0:], e.Kind)
	le.PutUint16(h[2:], 0x0101)
	le.PutUint32(h[4:], uint32(64+len(ext)))
	le.PutUint64(h[8:], uint64(len(padded)))
	le.PutUint32(h[20:], optOff)
	le.PutUint16(h[24:], minor)
	le.PutUint16(h[26:], major)
	le.PutUint32(h[28:], e.Arch)
	le.PutUint32(h[32:], idOff)
	le.PutUint32(h[36:], idLen)
	flags := uint64(0x11) // 64-bit, Linux
	if e.LZ {
		flags |= 0x2000
	}
	if e.Zstd {
		flags |= 0x8000
	}
	if e.ArchSpecific {
		flags |= 0x100000
	}
	if e.Family {
		flags |= 0x200000
	}
	le.PutUint64(h[40:], flags)
	if e.LZ || e.Zstd {
		le.PutUint32(h[16:], uint32(len(payload)))
		us := e.UncompressedSize
		if us == 0 {
			us = 4 * uint64(len(payload))
		}
		le.PutUint64(h[56:], us)
	}
	return append(append(h, ext...), padded...)
}

// Library writes a shared object at path whose .nv_fatbin section holds
// the containers (none: an object without the section).
func Library(path, soname string, cs ...Container) error {
	spec := elfwrite.Spec{Soname: soname, Needed: []string{"libc.so.6"}}
	if len(cs) > 0 {
		spec.Sections = []elfwrite.Section{{Name: ".nv_fatbin", Data: Build(cs...)}}
	}
	return elfwrite.Write(path, spec)
}

// SASS is a container with a cubin for each architecture.
func SASS(archs ...uint32) Container {
	var c Container
	for _, a := range archs {
		c.Entries = append(c.Entries, Entry{Kind: ELF, Arch: a})
	}
	return c
}

// PTXFor is a container with PTX for each architecture.
func PTXFor(archs ...uint32) Container {
	var c Container
	for _, a := range archs {
		c.Entries = append(c.Entries, Entry{Kind: PTX, Arch: a})
	}
	return c
}
