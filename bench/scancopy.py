#!/usr/bin/env python3
"""scancopy.py: what a scan reads of a tree, carried to another machine.

  python3 bench/scancopy.py extract TREE OUT.xz
  python3 bench/scancopy.py build OUT.xz DIR

`extract` writes, for every entry under TREE (symbolic links not followed),
its path, mode and size; of an ELF file its headers and the dynamic
sections a scan reads (program and section headers, the dynamic section,
notes, symbols, their strings, hashes and versions, the relocations that
name a symbol: those without one are zeroed); of a distribution's metadata
(.dist-info, .egg-info, .pth, small .json) the whole file; of any other
file a scan might open (a name with ".so", an execute bit) its first 4 KiB.
`build` makes DIR a tree of sparse files of the same sizes holding those
bytes. A scan of DIR reads what it read of TREE: the real GPU environment's
68,849 files (7 GB) become a 10 MB stream, and its memory and allocation
can be profiled on a machine without the environment (docs/performance.md).

The stream is xz: per entry a JSON line ({"p": path, "m": mode, "s": size,
"r": [[offset, length], ...]} or {"p": path, "l": link target}), then the
bytes of its ranges in order. ELF files of other classes or byte orders
keep their first 64 KiB.
"""
import json
import lzma
import os
import stat
import struct
import sys

SHT_KEPT = {4, 5, 6, 7, 9, 11, 19, 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF}
PT_KEPT = {2, 3, 4, 0x6474E553}  # DYNAMIC, INTERP, NOTE, GNU_PROPERTY


def merged(ranges):
    out = []
    for off, n in sorted((o, n) for o, n in ranges if n > 0):
        if out and off <= out[-1][0] + out[-1][1]:
            out[-1][1] = max(out[-1][0] + out[-1][1], off + n) - out[-1][0]
        else:
            out.append([off, n])
    return out


def elf_ranges(f, size):
    """The byte ranges of an ELF file a scan reads, and its RELA tables."""
    f.seek(0)
    h = f.read(64)
    if len(h) < 64 or h[4] != 2 or h[5] != 1:  # not ELF64 little-endian
        return [[0, min(size, 65536)]], []
    phoff, shoff = struct.unpack_from("<QQ", h, 0x20)
    phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHH", h, 0x36)
    ranges = [(0, 64), (phoff, phentsize * phnum), (shoff, shentsize * shnum)]
    relas, loads, dynamic = [], [], None
    f.seek(phoff)
    ph = f.read(phentsize * phnum)
    for i in range(phnum):
        if (i + 1) * phentsize > len(ph) or phentsize < 56:
            break
        typ, _, off, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", ph, i * phentsize)
        if typ == 1:
            loads.append((vaddr, off, filesz))
        if typ in PT_KEPT:
            ranges.append((off, filesz))
        if typ == 2:
            dynamic = (off, filesz)
    sections = bool(shnum and shoff and shentsize >= 64)
    if sections:
        f.seek(shoff)
        sh = f.read(shentsize * shnum)
        for i in range(shnum):
            if (i + 1) * shentsize > len(sh):
                break
            _, typ, flags, _, off, n = struct.unpack_from("<IIQQQQ", sh, i * shentsize)
            if typ in (4, 9) and not flags & 2:
                continue  # relocations of debugging sections
            if typ in SHT_KEPT or (typ == 3 and (flags & 2 or i == shstrndx)):
                ranges.append((off, n))
                if typ == 4:
                    relas.append((off, n))
    if dynamic:
        # What the dynamic section points at, for files whose section
        # headers are gone or wrong.
        def offset(addr):
            for vaddr, off, n in loads:
                if vaddr <= addr < vaddr + n:
                    return addr - vaddr + off
            return None

        f.seek(dynamic[0])
        d = f.read(dynamic[1])
        tags = {}
        for j in range(0, len(d) - 15, 16):
            tag, val = struct.unpack_from("<qQ", d, j)
            if tag == 0:
                break
            tags.setdefault(tag, val)
        for at, sz in ((5, 10), (7, 8), (23, 2), (36, 35)):  # STRTAB, RELA, JMPREL, RELR
            if at in tags and sz in tags and offset(tags[at]) is not None:
                ranges.append((offset(tags[at]), tags[sz]))
                if at in (7, 23):
                    relas.append((offset(tags[at]), tags[sz]))
        for at in (4, 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFE, 0x6FFFFFFC):  # hashes, versions
            if at in tags and offset(tags[at]) is not None:
                ranges.append((offset(tags[at]), 4096))
        if not sections and 6 in tags and 5 in tags:
            # DT_SYMTAB has no size: up to DT_STRTAB, where linkers put it.
            sym, strs = offset(tags[6]), offset(tags[5])
            if sym is not None and strs is not None and sym < strs < sym + (64 << 20):
                ranges.append((sym, strs - sym))
    ranges = [(o, min(n, size - o)) for o, n in ranges if 0 <= o < size]
    return merged(ranges), merged(relas)


def zero_symbolless(buf, start, relas):
    """Zeroes the RELA entries in buf (the file's bytes from start) that
    name no symbol: most of a C++ library's, and never looked at."""
    for ro, rn in relas:
        lo, hi = max(ro, start), min(ro + rn, start + len(buf))
        k = lo + (-(lo - ro)) % 24
        while k + 24 <= hi:
            (info,) = struct.unpack_from("<Q", buf, k - start + 8)
            if info >> 32 == 0:
                buf[k - start : k - start + 24] = bytes(24)
            k += 24


def kept_whole(rel, name, size):
    meta = ".dist-info" in rel or ".egg-info" in rel or name.endswith(".pth")
    return (meta or (name.endswith(".json") and size < 65536)) and size <= (4 << 20)


def kept_bytes(p, rel, name, st):
    """The ranges of the file at p a scan reads, and their bytes."""
    with open(p, "rb") as f:
        if f.read(4) == b"\x7fELF":
            ranges, relas = elf_ranges(f, st.st_size)
            out = []
            for off, n in ranges:
                f.seek(off)
                b = bytearray(f.read(n))
                zero_symbolless(b, off, relas)
                out.append(((off, len(b)), bytes(b)))
            return out
        if kept_whole(rel, name, st.st_size):
            f.seek(0)
            b = f.read()
        elif ".so" in name or st.st_mode & 0o111:
            f.seek(0)
            b = f.read(4096)
        else:
            return []
        return [((0, len(b)), b)]


def extract(top, out_path):
    if not os.path.isdir(top):
        raise NotADirectoryError("not a directory")
    files = kept = 0
    with lzma.open(out_path, "wb", preset=6) as out:
        for d, dirs, names in os.walk(top):
            dirs.sort()
            rel_dir = os.path.relpath(d, top)
            for name in sorted(dirs) + sorted(names):
                p = os.path.join(d, name)
                rel = os.path.normpath(os.path.join(rel_dir, name))
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    out.write((json.dumps({"p": rel, "l": os.readlink(p)}) + "\n").encode())
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                files += 1
                try:
                    parts = kept_bytes(p, rel, name, st)
                except OSError as e:
                    print(f"scancopy: {p}: {e}", file=sys.stderr)
                    parts = []
                kept += bool(parts)
                entry = {"p": rel, "m": st.st_mode & 0o7777, "s": st.st_size, "r": [list(r) for r, _ in parts]}
                out.write((json.dumps(entry) + "\n").encode())
                for _, b in parts:
                    out.write(b)
    print(f"{files} files, {kept} with bytes kept, {os.path.getsize(out_path)} bytes", file=sys.stderr)


def build(in_path, top):
    n = 0
    with lzma.open(in_path, "rb") as f:
        for line in f:
            e = json.loads(line)
            p = os.path.join(top, e["p"])
            if os.path.isabs(e["p"]) or ".." in e["p"].split("/"):
                sys.exit(f"scancopy: {in_path}: entry {e['p']!r} is outside the tree")
            os.makedirs(os.path.dirname(p), exist_ok=True)
            if "l" in e:
                if not os.path.lexists(p):
                    os.symlink(e["l"], p)
                continue
            with open(p, "wb") as o:
                for off, size in e["r"]:
                    b = f.read(size)
                    if len(b) != size:
                        sys.exit(f"scancopy: {in_path}: the bytes of {e['p']} end early")
                    o.seek(off)
                    o.write(b)
                o.truncate(e["s"])
            os.chmod(p, e["m"])
            n += 1
    print(f"{n} files", file=sys.stderr)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("extract", "build"):
        sys.exit(__doc__.split("\n\n")[1])
    try:
        (extract if sys.argv[1] == "extract" else build)(sys.argv[2], sys.argv[3])
    except (OSError, EOFError, lzma.LZMAError, ValueError, KeyError, TypeError) as e:
        # A damaged stream or an unreadable tree: one line, naming it.
        sys.exit(f"scancopy: {sys.argv[2]}: {e.__class__.__name__}: {e}")


if __name__ == "__main__":
    main()
