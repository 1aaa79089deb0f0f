"""Rebuild the installed wheels that own files under some site-packages
directories, from their installed files and RECORD, and serve them as a
PEP 503 simple index (INDEX/simple/PROJECT/index.html, each link with its
#sha256=), so that `resolve --source pypi --index-url URL/simple` can take
them back from 127.0.0.1 exactly as pip would from a package index.

A rebuilt wheel holds every file its RECORD lists under site-packages (the
.dist-info included, but for what the installer wrote there: INSTALLER,
REQUESTED, direct_url.json), stored uncompressed, with the tags of its WHEEL file.
Files the RECORD lists that are missing on disk (the ones a test removed)
are read from where the test moved them: HIDDEN_DIR:RELATIVE_PATH pairs
say where each removed directory is now.

Usage: pack_wheels.py SITE INDEX RELATIVE_DIR... [-- HIDDEN_DIR:RELATIVE_PATH...]
"""
import csv
import hashlib
import html
import io
import os
import re
import sys
import zipfile

site, index = sys.argv[1], sys.argv[2]
rest = sys.argv[3:]
moved = {}
if "--" in rest:
    cut = rest.index("--")
    moved = dict(a.split(":", 1) for a in rest[cut + 1:])
    rest = rest[:cut]
wanted = [os.path.normpath(d) for d in rest]
INSTALLER_FILES = {"INSTALLER", "REQUESTED", "direct_url.json"}


def norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()


def on_disk(rel):
    """Where a RECORD path's file is now: in place, or where it was moved."""
    p = os.path.join(site, rel)
    if os.path.lexists(p):
        return p
    for now, was in moved.items():
        was = os.path.normpath(was)
        if rel == was or rel.startswith(was + os.sep):
            return os.path.join(now, os.path.relpath(rel, was))
    return None


def tags_of(distinfo):
    tags = []
    with open(os.path.join(distinfo, "WHEEL")) as f:
        for line in f:
            if line.startswith("Tag:"):
                tags.append(line.split(":", 1)[1].strip())
    pys = sorted({t.split("-")[0] for t in tags})
    abis = sorted({t.split("-")[1] for t in tags})
    plats = sorted({t.split("-")[2] for t in tags})
    return ".".join(pys) + "-" + ".".join(abis) + "-" + ".".join(plats)


built = 0
for d in sorted(os.listdir(site)):
    if not d.endswith(".dist-info"):
        continue
    distinfo = os.path.join(site, d)
    rec = os.path.join(distinfo, "RECORD")
    if not os.path.exists(rec) or not os.path.exists(os.path.join(distinfo, "WHEEL")):
        continue
    with open(rec, newline="") as f:
        # What the installer wrote (INSTALLER, REQUESTED, direct_url.json)
        # is no part of the wheel: pip, installing a wheel that holds an
        # INSTALLER, records it twice, once with the wheel's size.
        rows = [r for r in csv.reader(f) if r and not (os.path.dirname(os.path.normpath(r[0])) == d and os.path.basename(r[0]) in INSTALLER_FILES)]
    paths = [os.path.normpath(r[0]) for r in rows]
    if not any(p == w or p.startswith(w + os.sep) for p in paths for w in wanted):
        continue
    name, version = d[: -len(".dist-info")].split("-", 1)
    fname = f"{re.sub(r'[-_.]+', '_', name)}-{version}-{tags_of(distinfo)}.whl"
    outdir = os.path.join(index, "simple", norm(name))
    os.makedirs(outdir, exist_ok=True)
    out = os.path.join(outdir, fname)
    files = 0
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for rel in paths:
            if rel.startswith(".."):
                continue  # scripts installed outside site-packages
            src = on_disk(rel)
            if src is None or os.path.isdir(src):
                continue
            if os.path.basename(rel) == "RECORD" and os.path.dirname(rel) == d:
                continue  # written last, as a wheel's RECORD is
            z.write(src, rel)
            files += 1
        out_rec = io.StringIO()
        csv.writer(out_rec, lineterminator="\n").writerows(rows)
        z.writestr(os.path.join(d, "RECORD"), out_rec.getvalue())
    h = hashlib.sha256()
    with open(out, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    with open(os.path.join(outdir, "index.html"), "a") as f:
        f.write(f'<a href="{html.escape(fname)}#sha256={h.hexdigest()}">{html.escape(fname)}</a><br>\n')
    built += 1
    print(f"  {fname}: {files} files, {os.path.getsize(out) >> 20} MiB")

with open(os.path.join(index, "simple", "index.html"), "w") as f:
    for p in sorted(os.listdir(os.path.join(index, "simple"))):
        if os.path.isdir(os.path.join(index, "simple", p)):
            f.write(f'<a href="{p}/">{p}</a><br>\n')
print(f"{built} wheel(s) in {index}/simple")
