"""Remove installed distributions exactly as `pip uninstall -y` does, keep
them aside first so a proof can put them back, and check requirements as
`pip check` does when no pip is installed.

  pipdist.py SITE uninstall BACKUP PATTERN...
      every distribution whose normalized name matches a shell PATTERN
      (nvidia-*): its RECORD files and .dist-info are hard-linked under
      BACKUP (same file system: no copy), then removed as pip removes them
      (each RECORD file, the .dist-info, directories left empty)
  pipdist.py SITE restore BACKUP
      put back what uninstall removed, where nothing took its place
  pipdist.py SITE check
      `python -m pip check`, else `uv pip check`, else the same check
      written here with packaging (requirements of each installed
      distribution, extras not followed, as pip check does)
"""
import csv
import fnmatch
import os
import re
import shutil
import subprocess
import sys


def norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()


def dists(site):
    for d in sorted(os.listdir(site)):
        if d.endswith(".dist-info") and os.path.exists(os.path.join(site, d, "RECORD")):
            yield d, norm(d[: -len(".dist-info")].split("-", 1)[0])


def uninstall(site, backup, patterns):
    removed = []
    for d, name in dists(site):
        if not any(fnmatch.fnmatch(name, p) for p in patterns):
            continue
        with open(os.path.join(site, d, "RECORD"), newline="") as f:
            paths = [os.path.normpath(r[0]) for r in csv.reader(f) if r]
        dirs = set()
        for rel in paths:
            src = os.path.join(site, rel)
            if rel.startswith("..") or not os.path.lexists(src) or os.path.isdir(src):
                continue
            dst = os.path.join(backup, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.lexists(dst):
                os.link(src, dst, follow_symlinks=False)
            os.remove(src)
            parent = os.path.dirname(src)
            while parent.startswith(site + os.sep):
                dirs.add(parent)
                parent = os.path.dirname(parent)
        info = os.path.join(site, d)
        if os.path.isdir(info):
            shutil.copytree(info, os.path.join(backup, d), dirs_exist_ok=True)
            shutil.rmtree(info)
        for p in sorted(dirs, key=lambda x: -x.count(os.sep)):
            try:
                os.rmdir(p)
            except OSError:
                pass
        removed.append(name)
    print("uninstalled (as pip does): " + " ".join(removed))


def restore(site, backup):
    n = 0
    for root, _, files in os.walk(backup):
        for f in files:
            src = os.path.join(root, f)
            dst = os.path.join(site, os.path.relpath(src, backup))
            if os.path.lexists(dst):
                continue
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.link(src, dst, follow_symlinks=False)
            n += 1
    print(f"restored {n} file(s)")


def check(site):
    for cmd in ([sys.executable, "-m", "pip", "check"], ["uv", "pip", "check", "--python", sys.executable]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError:
            continue
        text = out.stdout + out.stderr
        if "No module named pip" in text or out.returncode not in (0, 1):
            continue
        print(f"$ {' '.join(cmd)}\n{text.strip()}")
        return out.returncode
    from importlib import metadata
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    bad = 0
    for d in metadata.distributions():
        for r in d.requires or []:
            req = Requirement(r)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            v = installed.get(canonicalize_name(req.name))
            if v is None:
                print(f"{d.metadata['Name']} {d.version} requires {req.name}, which is not installed.")
                bad += 1
            elif not req.specifier.contains(v, prereleases=True):
                print(f"{d.metadata['Name']} {d.version} has requirement {req}, but you have {req.name} {v}.")
                bad += 1
    print("(checked as pip check does)" if bad else "No broken requirements found. (checked as pip check does)")
    return 1 if bad else 0


if __name__ == "__main__":
    site, verb = sys.argv[1], sys.argv[2]
    if verb == "uninstall":
        uninstall(site, sys.argv[3], sys.argv[4:])
    elif verb == "restore":
        restore(site, sys.argv[3])
    elif verb == "check":
        sys.exit(check(site))
    else:
        sys.exit(f"unknown verb {verb}")
