#!/usr/bin/env python3
"""Compare cudadeps' GPU code coverage with NVIDIA's cuobjdump, library by
library.

Usage: coverage_compare.py COVERAGE_JSON CUOBJDUMP OUTDIR

COVERAGE_JSON is `cudadeps scan ... --coverage --json`; for every object it
reports, `cuobjdump --list-elf` and `cuobjdump --list-ptx` are run, and the
architectures each lists (with how many entries) are compared with the
"sass" and "ptx" lists of cudadeps. Architectures are compared without
their arch- or family-specific suffix (sm_90a as sm_90); then the names,
count for count, as cuobjdump gives them (cuobjdump_name: a family-specific
cubin is listed without its "f"); every entry cuobjdump names with a suffix
that cudadeps could not tell is counted.

Writes OUTDIR/compare.txt (every disagreement) and OUTDIR/cuobjdump.jsonl
(what cuobjdump listed), prints the counts; exits 0 when every library
agrees on the architectures and the names, 1 otherwise.
"""
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys

ARCH_RE = re.compile(r"\.(sm|compute)_(\d+)([a-z]?)\.(cubin|ptx)\s*$")


def listing(cuobjdump, path, what):
    """Architectures cuobjdump lists for one kind: {base: count}, {full: count}."""
    try:
        r = subprocess.run([cuobjdump, what, path], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, None, "timeout"
    base, full = collections.Counter(), collections.Counter()
    for line in r.stdout.splitlines():
        m = ARCH_RE.search(line)
        if not m:
            continue
        base["sm_" + m.group(2)] += 1
        full["sm_" + m.group(2) + m.group(3)] += 1
    err = ""
    if r.returncode != 0 and not base and "does not contain device code" not in r.stderr + r.stdout:
        err = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["exit %d" % r.returncode]
        err = err[0]
    return base, full, err


def cuobjdump_name(arch):
    """The name cuobjdump 13.0 gives an entry cudadeps calls arch, as
    --list-elf/--list-ptx write it before ".cubin"/".ptx" (and as ARCH_RE
    reads it): "sm_100f" -> "sm_100", "sm_100a" -> "sm_100a",
    "compute_100f" -> "sm_100f".

    cuobjdump drops the family suffix of a cubin, and only of a cubin:
    nvcc 13.0 builds with one -gencode each (e2e/gpu/results/2026-11-25/
    fatbin-variants.log) give code=sm_100f an entry whose flags carry the
    family bit (0x1200011) and that cuobjdump lists as "...sm_100.cubin",
    while code=sm_100a (0x1100011) is "...sm_100a.cubin" and
    code=compute_100f (0x208011) is "...sm_100f.ptx". So a family cubin
    and a plain one are the same name to cuobjdump, and they are compared
    by their sum; the flags, not this listing, are the evidence for which
    is which (gpuarch's TestDecodeNvcc13Headers).
    """
    m = re.match(r"(sm|compute)_(\d+)([a-z]?)$", arch)
    if not m:
        return None
    kind, num, suffix = m.groups()
    if kind == "sm" and suffix == "f":
        suffix = ""
    return "sm_" + num + suffix


def ours(codes):
    """cudadeps' entries of one kind: {base: count}, {cuobjdump's name:
    count} of those whose variant it told, {base: count} of the others."""
    base, named, unknown = collections.Counter(), collections.Counter(), collections.Counter()
    for c in codes:
        name = cuobjdump_name(c["arch"])
        if name is None:
            continue
        b = name.rstrip("af")
        base[b] += c["entries"]
        if c.get("variant_known"):
            named[name] += c["entries"]
        else:
            unknown[b] += c["entries"]
    return base, named, unknown


def compare_names(mine, unknown, theirs):
    """Compares, architecture by architecture, the names cuobjdump would
    give cudadeps' entries (mine, unknown: from ours) with those it gave
    (theirs: {name: count}). Where cudadeps told every variant, the counts
    must be equal name for name; entries of an untold variant may stand
    for any name of their architecture. Returns the entries that agree,
    those that do not, the disagreements ((base, mine, theirs) each), and
    {name: count} of the suffixed names cuobjdump gives where cudadeps
    could not tell."""
    agree = disagree = 0
    wrong, untold = [], collections.Counter()
    for b in sorted({n.rstrip("af") for n in list(mine) + list(theirs)}):
        m = {n: k for n, k in mine.items() if n.rstrip("af") == b}
        t = {n: k for n, k in theirs.items() if n.rstrip("af") == b}
        u = unknown.get(b, 0)
        if u == 0:
            ok = m == t
        else:
            ok = all(t.get(n, 0) >= k for n, k in m.items()) and sum(t.values()) == sum(m.values()) + u
            for n, k in t.items():
                if n != b:
                    untold[n] += k
        if ok:
            agree += sum(m.values())
        else:
            disagree += sum(m.values())
            wrong.append((b, m, t))
    return agree, disagree, wrong, untold


def main():
    cov_path, cuobjdump, outdir = sys.argv[1:4]
    doc = json.load(open(cov_path))
    objects = doc["coverage"]["objects"]
    os.makedirs(outdir, exist_ok=True)

    def check(o):
        p = o["path"]
        if o.get("error"):
            return p, o, None
        elf = listing(cuobjdump, p, "--list-elf")
        ptx = listing(cuobjdump, p, "--list-ptx")
        return p, o, (elf, ptx)

    agree = disagree = unreadable = suffix_agree = suffix_disagree = 0
    suffix_untold = collections.Counter()
    family_cubins = 0
    lines = []
    with open(os.path.join(outdir, "cuobjdump.jsonl"), "w") as raw, \
            concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        for p, o, res in pool.map(check, objects):
            if res is None:
                unreadable += 1
                lines.append(f"UNREADABLE by cudadeps: {p}: {o['error']}")
                continue
            (eb, ef, eerr), (pb, pf, perr) = res
            raw.write(json.dumps({"path": p, "elf": ef, "ptx": pf, "errors": [eerr, perr]}) + "\n")
            if eb is None or pb is None or eerr or perr:
                unreadable += 1
                lines.append(f"CUOBJDUMP FAILED on {p}: {eerr or ''} {perr or ''}")
                continue
            sb, sf, su = ours(o["sass"])
            qb, qf, qu = ours(o["ptx"])
            ok = sb == eb and qb == pb
            if ok:
                agree += 1
            else:
                disagree += 1
                lines.append(f"DISAGREE {p}\n  cudadeps SASS {dict(sb)} PTX {dict(qb)}\n  cuobjdump ELF {dict(eb)} PTX {dict(pb)}")
            # Names: where cudadeps told the variant, cuobjdump's name for it.
            for what, (mine, unknown), theirs in (("ELF", (sf, su), ef), ("PTX", (qf, qu), pf)):
                a, d, wrong, untold = compare_names(mine, unknown, theirs)
                suffix_agree += a
                suffix_disagree += d
                suffix_untold.update(untold)
                for b, m, t in wrong:
                    lines.append(f"NAMES {p}: {what} {b}: cudadeps' entries are {m or '{}'} as cuobjdump names them, cuobjdump lists {t or '{}'}")
            family_cubins += sum(c["entries"] for c in o["sass"] if c.get("variant_known") and c["arch"].endswith("f"))
    with open(os.path.join(outdir, "compare.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"libraries compared with cuobjdump: {agree + disagree} ({agree} agree, {disagree} disagree); {unreadable} not compared")
    print(f"names as cuobjdump gives them: {suffix_agree} entries agree, {suffix_disagree} disagree "
          f"({family_cubins} family-specific cubins, which cuobjdump names without the f); "
          f"entries cuobjdump names with a suffix cudadeps did not tell: {dict(suffix_untold)}")
    for line in lines[:40]:
        print(line)
    if len(lines) > 40:
        print(f"... {len(lines) - 40} more lines in {outdir}/compare.txt")
    sys.exit(0 if disagree == 0 and suffix_disagree == 0 else 1)


if __name__ == "__main__":
    main()
