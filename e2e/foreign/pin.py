#!/usr/bin/env python3
"""Write the pin list of a foreign tree: the seed packages and everything
they depend on (Pre-Depends and Depends, not Recommends), resolved from a
Debian suite's Packages indexes, one line per .deb with its sha256.

Usage: pin.py SUITE ARCH SEEDFILE > pins-SUITE-ARCH.txt
(e.g. pin.py trixie amd64 seeds.txt > pins-trixie-amd64.txt)
Environment: MIRROR (default http://deb.debian.org/debian), COMPONENTS
(default "main contrib non-free"), NODEPS (when 1, the seeds alone are
pinned, their dependencies not followed: a seed file that lists exactly
the packages a tree needs).

The seed file lists one package per line; "!name" marks a package taken as
installed without downloading it (a driver installer, a kernel module
builder: what a tree of libraries does not need, though something depends
on it). '#' starts a comment.

Resolution is the simple walk a tree of libraries needs: each dependency
group is satisfied by a package already chosen, else by its first
alternative that exists as a real package, else by the first provider of a
virtual one. Version constraints are not checked: a suite carries one
version of each package (where it lists several, the highest is taken).
Output lines: PACKAGE VERSION ARCH SHA256 SIZE POOL_PATH.
"""
import lzma, os, re, sys, time, urllib.request


def vercmp_part(a, b):
    """dpkg's comparison of an upstream version or revision."""
    def order(c):
        if c == "~":
            return -1
        if c.isdigit():
            return 0
        if c.isalpha():
            return ord(c)
        return ord(c) + 256
    while a or b:
        na = re.match(r"^[^0-9]*", a).group(0)
        nb = re.match(r"^[^0-9]*", b).group(0)
        a, b = a[len(na):], b[len(nb):]
        for i in range(max(len(na), len(nb))):
            ca = order(na[i]) if i < len(na) else 0
            cb = order(nb[i]) if i < len(nb) else 0
            if ca != cb:
                return -1 if ca < cb else 1
        da = re.match(r"^[0-9]*", a).group(0)
        db = re.match(r"^[0-9]*", b).group(0)
        a, b = a[len(da):], b[len(db):]
        if int(da or 0) != int(db or 0):
            return -1 if int(da or 0) < int(db or 0) else 1
    return 0


def split_version(v):
    epoch, _, rest = v.rpartition(":") if ":" in v else ("0", "", v)
    up, _, rev = rest.rpartition("-") if "-" in rest else (rest, "", "0")
    return int(epoch or 0), up, rev


def vercmp(a, b):
    ea, ua, ra = split_version(a)
    eb, ub, rb = split_version(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return vercmp_part(ua, ub) or vercmp_part(ra, rb)


def stanzas(text):
    for block in text.split("\n\n"):
        fields, last = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and last:
                fields[last] += "\n" + line
            elif ":" in line:
                last, _, val = line.partition(":")
                fields[last] = val.strip()
        if "Package" in fields:
            yield fields


def parse_deps(s):
    groups = []
    for group in filter(None, (g.strip() for g in s.split(","))):
        alts = []
        for alt in group.split("|"):
            name = re.match(r"\s*([^\s(\[:]+)", alt).group(1)
            alts.append(name)
        groups.append(alts)
    return groups


def main():
    suite, arch, seedfile = sys.argv[1:4]
    mirror = os.environ.get("MIRROR", "http://deb.debian.org/debian")
    components = os.environ.get("COMPONENTS", "main contrib non-free").split()
    with urllib.request.urlopen(f"{mirror}/dists/{suite}/Release", timeout=120) as r:
        release = dict(l.split(": ", 1) for l in r.read().decode().splitlines()[:12] if ": " in l)
    pkgs, provides = {}, {}
    for comp in components:
        url = f"{mirror}/dists/{suite}/{comp}/binary-{arch}/Packages.xz"
        with urllib.request.urlopen(url, timeout=120) as r:
            text = lzma.decompress(r.read()).decode("utf-8", "replace")
        for f in stanzas(text):
            name = f["Package"]
            if f.get("Architecture") not in (arch, "all"):
                continue
            if name in pkgs and vercmp(pkgs[name]["Version"], f["Version"]) >= 0:
                continue
            pkgs[name] = f
    for name, f in pkgs.items():
        for p in parse_deps(f.get("Provides", "")):
            provides.setdefault(p[0], []).append(name)
    seeds, assumed = [], set()
    for line in open(seedfile):
        line = line.split("#")[0].strip()
        if not line:
            continue
        if line.startswith("!"):
            assumed.add(line[1:])
        else:
            seeds.append(line)
    chosen, queue, unmet = {}, list(seeds), []
    wanted = set(seeds)  # chosen or queued
    for s in seeds:
        if s not in pkgs:
            sys.exit(f"pin.py: seed {s} is not in {suite}/{arch}")

    def satisfied(name):
        if name in wanted or name in assumed:
            return True
        return any(p in wanted or p in assumed for p in provides.get(name, []))

    nodeps = os.environ.get("NODEPS") == "1"
    while queue:
        name = queue.pop(0)
        f = pkgs[name]
        chosen[name] = f
        if nodeps:
            continue
        for group in parse_deps(f.get("Pre-Depends", "")) + parse_deps(f.get("Depends", "")):
            if any(satisfied(a) for a in group):
                continue
            pick = next((a for a in group if a in pkgs), None)
            if pick is None:
                pick = next((sorted(provides[a])[0] for a in group if provides.get(a)), None)
            if pick is None:
                unmet.append(f"{name}: {' | '.join(group)}")
                continue
            if pick not in assumed:
                wanted.add(pick)
                queue.append(pick)

    total = sum(int(f["Size"]) for f in chosen.values())
    print(f"# {suite} {arch}: {len(chosen)} packages, {total} bytes, from {mirror}")
    print(f"# resolved {time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())} (snapshot.debian.org timestamp)")
    print(f"# Debian {release.get('Version', '?')} ({suite}), Release of {release.get('Date', '?')}")
    print(f"# seeds: {' '.join(seeds)}; assumed installed: {' '.join(sorted(assumed))}" + ("; dependencies not followed (NODEPS=1)" if nodeps else ""))
    for u in unmet:
        print(f"# unmet: {u}")
    for name in sorted(chosen):
        f = chosen[name]
        print(name, f["Version"], f["Architecture"], f["SHA256"], f["Size"], f["Filename"])


if __name__ == "__main__":
    main()
