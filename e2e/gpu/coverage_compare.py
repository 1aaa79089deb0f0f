#!/usr/bin/env python3
"""Compare cudadeps' GPU code coverage with NVIDIA's cuobjdump, library by
library.

Usage: coverage_compare.py COVERAGE_JSON CUOBJDUMP OUTDIR

COVERAGE_JSON is `cudadeps scan ... --coverage --json`; for every object it
reports, `cuobjdump --list-elf` and `cuobjdump --list-ptx` are run, and the
architectures each lists (with how many entries) are compared with the
"sass" and "ptx" lists of cudadeps. Architectures are compared without
their arch- or family-specific suffix (sm_90a as sm_90); the suffixes are
compared separately where cudadeps reports one, and every entry cuobjdump
names with a suffix that cudadeps could not tell is counted.

Writes OUTDIR/compare.txt (every disagreement) and OUTDIR/cuobjdump.jsonl
(what cuobjdump listed), prints the counts; exits 0 when every library
agrees on the architectures, 1 otherwise.
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


def ours(codes):
    base, full, unknown = collections.Counter(), collections.Counter(), collections.Counter()
    for c in codes:
        m = re.match(r"(?:sm|compute)_(\d+)([a-z]?)$", c["arch"])
        if not m:
            continue
        b = "sm_" + m.group(1)
        base[b] += c["entries"]
        if c.get("variant_known"):
            full["sm_" + m.group(1) + m.group(2)] += c["entries"]
        else:
            unknown[b] += c["entries"]
    return base, full, unknown


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
            # Suffixes: where cudadeps told the variant, it must be cuobjdump's.
            for mine, theirs in ((sf, ef), (qf, pf)):
                for arch, n in mine.items():
                    if theirs.get(arch, 0) >= n:
                        suffix_agree += n
                    else:
                        suffix_disagree += n
                        lines.append(f"SUFFIX {p}: cudadeps says {n} x {arch}, cuobjdump lists {dict(theirs)}")
            for theirs, unknown in ((ef, su), (pf, qu)):
                for arch, n in theirs.items():
                    if arch[-1] in "af" and unknown.get(arch[:-1], 0) > 0:
                        suffix_untold[arch] += n
    with open(os.path.join(outdir, "compare.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"libraries compared with cuobjdump: {agree + disagree} ({agree} agree, {disagree} disagree); {unreadable} not compared")
    print(f"arch-specific/family suffixes: {suffix_agree} entries agree, {suffix_disagree} disagree; "
          f"entries cuobjdump names with a suffix cudadeps did not tell: {dict(suffix_untold)}")
    for line in lines[:40]:
        print(line)
    if len(lines) > 40:
        print(f"... {len(lines) - 40} more lines in {outdir}/compare.txt")
    sys.exit(0 if disagree == 0 else 1)


if __name__ == "__main__":
    main()
