#!/usr/bin/env python3
"""Compare `cudadeps scan --json DIR` with the real loader on every object.

For each root of the scan, run the host's ld.so in trace mode (what ldd does:
LD_TRACE_LOADED_OBJECTS=1) with the same environment, and compare the list of
"name => path" (or "name => not found") lines, in load order, each name once
(ld.so lists a name missing for two objects twice; cudadeps once). The
loader's own line and linux-vdso are left out.

Usage: compare-ldd.py CUDADEPS DIR [LDSO]
"""
import json, os, re, subprocess, sys

exe, tree = sys.argv[1], sys.argv[2]
ldso = sys.argv[3] if len(sys.argv) > 3 else "/lib64/ld-linux-x86-64.so.2"
rep = json.loads(subprocess.run([exe, "scan", "--json", tree], capture_output=True, text=True).stdout)
arrow = re.compile(r"^\t(.+?) => (.+?)(?: \(0x[0-9a-f]+\))?$")
plain = re.compile(r"^\t(.+?) \(0x[0-9a-f]+\)$")

def ours(root):
    out, seen = [], set()
    for e in root["closure"]:
        if e["via"] == "interpreter" or e["soname"] in seen:
            continue
        seen.add(e["soname"])
        out.append(f'{e["soname"]} => {e["path"] or "not found"}')
    return out

def theirs(path):
    env = dict(os.environ, LD_TRACE_LOADED_OBJECTS="1")
    r = subprocess.run([ldso, path], capture_output=True, text=True, env=env)
    out, seen = [], set()
    for line in r.stdout.splitlines():
        if "linux-vdso" in line or "statically linked" in line:
            continue
        m = arrow.match(line)
        if m:
            name, p = m.group(1), m.group(2)
        else:
            m = plain.match(line)
            if not m:
                continue
            name = p = m.group(1)
            if "/ld-linux" in name:
                continue
        if name in seen:
            continue
        seen.add(name)
        out.append(f"{name} => {p}")
    return out, r.returncode, r.stderr.strip()

same = differ = refused = 0
for root in rep["roots"]:
    want, rc, err = theirs(root["path"])
    if not want and rc != 0:
        refused += 1
        continue
    got = ours(root)
    if got == want:
        same += 1
        continue
    differ += 1
    if differ <= 5:
        print("DIFFERS:", root["path"])
        for g, w in zip(got + [""] * len(want), want + [""] * len(got)):
            if g != w:
                print("   cudadeps:", g, "\n   ld.so:   ", w)
print(f"{same} objects: the same closure as ld.so; {differ} differ; {refused} refused by ld.so itself")
sys.exit(1 if differ else 0)
