#!/usr/bin/env python3
"""Compare the undefined symbols of `cudadeps scan --json DIR` with the real loader's.

For each root of the scan bound as its own program, run the host's ld.so as
`ldd -r` does (LD_TRACE_LOADED_OBJECTS=1 LD_WARN=yes LD_BIND_NOW=yes) and
compare the distinct "OBJECT: undefined symbol: NAME, version VER" lines.

A root that cudadeps bound in an interpreter ("bound_in": a Python extension
module, bound as an import binds it) is judged by that interpreter: it
dlopens the module with RTLD_NOW, as an import does, and must succeed when
cudadeps reports nothing, or fail naming a symbol cudadeps reports.
`ldd -r` of such a module reports the C API as undefined, which the
interpreter defines; those are counted apart.

Usage: compare-ldd-r.py CUDADEPS DIR [LDSO]
Prints the figures: roots, relocated objects, undefined symbols, matches.
"""
import json, os, re, subprocess, sys

exe, tree = sys.argv[1], sys.argv[2]
ldso = sys.argv[3] if len(sys.argv) > 3 else "/lib64/ld-linux-x86-64.so.2"
scan = subprocess.run([exe, "scan", "--json", tree], capture_output=True, text=True)
rep = json.loads(scan.stdout)
undef = re.compile(r"^undefined symbol: (.+?)(?:, version (\S+))?\t\((.+)\)$")


def fmt(obj, sym, ver):
    return f"{obj}: {sym}" + (f", version {ver}" if ver else "")


def theirs(path):
    env = dict(os.environ, LD_TRACE_LOADED_OBJECTS="1", LD_WARN="yes", LD_BIND_NOW="yes")
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([ldso, path], capture_output=True, text=True, env=env)
    out = set()
    for line in (r.stdout + r.stderr).splitlines():
        m = undef.match(line)
        if m:
            out.add(fmt(m.group(3), m.group(1), m.group(2)))
    loaded = sum(1 for line in r.stdout.splitlines() if line.startswith("\t"))
    return out, r.returncode, loaded


PROBE = "import ctypes, os, sys\ntry:\n    ctypes.CDLL(sys.argv[1], os.RTLD_NOW)\nexcept OSError as e:\n    print(e)\n"

same = differ = idiffer = refused = objects = symbols = matched = 0
imported = imported_ok = capi = 0
for root in rep["roots"]:
    ours = {fmt(u["object"], u["symbol"], u["version"]) for u in (root.get("undefined_symbols") or [])}
    if root.get("undefined_symbols") is None:
        continue  # not bound (a wheel member)
    want, rc, loaded = theirs(root["path"])
    if rc != 0 and not want and loaded == 0:
        refused += 1
        continue
    if root.get("bound_in"):
        imported += 1
        r = subprocess.run([root["bound_in"], "-c", PROBE, root["path"]], capture_output=True, text=True, timeout=300)
        err = r.stdout.strip()
        # A library that is not there stops dlopen before any symbol is
        # bound; cudadeps reports it missing (and the symbols it would have
        # defined): both say the module does not load.
        missing_lib = "cannot open shared object file" in err and root.get("missing")
        ok = (not ours and not err) or (ours and any(u.split(": ", 1)[1].split(",")[0] in err for u in ours)) or bool(missing_lib)
        capi += len(want - ours)
        if ok and ours <= want:
            imported_ok += 1
        else:
            idiffer += 1
            print("DIFFERS (import):", root["path"], "\n   cudadeps:", sorted(ours), "\n   dlopen:  ", err or "loaded")
        continue
    objects += loaded
    symbols += len(want)
    matched += len(ours & want)
    if ours == want:
        same += 1
        continue
    differ += 1
    if differ <= 10:
        print("DIFFERS:", root["path"])
        for u in sorted(ours - want):
            print("   cudadeps only:", u)
        for u in sorted(want - ours):
            print("   ld.so only:   ", u)
print(f"{same + differ} roots bound as programs ({objects} objects loaded): ld.so reports {symbols} undefined symbols, "
      f"cudadeps matches {matched}; {same} roots agree, {differ} differ; {refused} refused by ld.so")
print(f"{imported} extension modules bound in their interpreter: {imported_ok} agree with its dlopen(RTLD_NOW) "
      f"({capi} C API symbols that ldd -r reports are defined by the interpreter)")
sys.exit(1 if differ or idiffer else 0)
