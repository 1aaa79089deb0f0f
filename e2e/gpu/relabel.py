"""Make an installed distribution another release, as pip leaves one
installed at another version, and put it back.

  relabel.py SITE relabel PROJECT VERSION BACKUP [FROM_DIR]
      copy the distribution's RECORD files and .dist-info under BACKUP,
      then: each RECORD file whose name FROM_DIR also holds (a link there
      followed: libcudnn.so.9 -> libcudnn.so.9.14.0) takes that file's
      bytes, so the libraries are really the other release; the .dist-info
      is renamed to PROJECT-VERSION.dist-info, its METADATA says VERSION
      and its RECORD the new sizes and hashes
  relabel.py SITE restore BACKUP
      remove the relabelled distribution and put back what BACKUP holds
"""
import base64
import csv
import hashlib
import io
import os
import re
import shutil
import sys


def norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()


def find(site, project):
    for d in sorted(os.listdir(site)):
        if d.endswith(".dist-info") and norm(d[: -len(".dist-info")].split("-", 1)[0]) == norm(project):
            return d
    sys.exit(f"relabel: {project} is not installed in {site}")


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def relabel(site, project, version, backup, from_dir=None):
    info = find(site, project)
    with open(os.path.join(site, info, "RECORD"), newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    os.makedirs(backup, exist_ok=True)
    with open(os.path.join(backup, ".project"), "w") as f:
        f.write(project + "\n" + info + "\n")
    for r in rows:
        src = os.path.join(site, r[0])
        if r[0].startswith("..") or not os.path.lexists(src) or os.path.isdir(src):
            continue
        dst = os.path.join(backup, r[0])
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
    new_info = f"{info.split('-', 1)[0]}-{version}.dist-info"
    meta = os.path.join(site, info, "METADATA")
    with open(meta) as f:
        text = f.read()
    old = re.search(r"^Version: (.*)$", text, re.M).group(1)
    with open(meta, "w") as f:
        f.write(re.sub(r"^Version: .*$", "Version: " + version, text, count=1, flags=re.M))
    os.rename(os.path.join(site, info), os.path.join(site, new_info))
    replaced = []
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    for r in rows:
        rel = r[0]
        other = os.path.join(from_dir, os.path.basename(rel)) if from_dir else None
        if other and os.path.isfile(other) and not rel.startswith(info + "/"):
            real = os.path.realpath(other)
            dst = os.path.join(site, rel)
            os.remove(dst)
            shutil.copyfile(real, dst)
            os.chmod(dst, 0o755)
            r = [rel, digest(dst), str(os.path.getsize(dst))]
            replaced.append(f"{rel} <- {real}")
        if rel.startswith(info + "/"):
            rel = new_info + rel[len(info):]
            r = [rel] + r[1:]
            if len(r) > 1 and r[1]:  # METADATA changed: its hash and size too
                r = [rel, digest(os.path.join(site, rel)), str(os.path.getsize(os.path.join(site, rel)))]
        w.writerow(r)
    with open(os.path.join(site, new_info, "RECORD"), "w") as f:
        f.write(out.getvalue())
    print(f"{project} {old} is now {new_info}; {len(replaced)} file(s) from {from_dir}:")
    for line in replaced:
        print("  " + line)


def restore(site, backup):
    with open(os.path.join(backup, ".project")) as f:
        project, info = f.read().split()
    shutil.rmtree(os.path.join(site, find(site, project)))
    for top, dirs, files in os.walk(backup):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            src = os.path.join(top, name)
            rel = os.path.relpath(src, backup)
            if rel == ".project":
                continue
            dst = os.path.join(site, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.lexists(dst):
                os.remove(dst)
            shutil.copy2(src, dst, follow_symlinks=False)
    print(f"{project} put back ({info})")


def main():
    a = sys.argv[1:]
    if len(a) >= 5 and a[1] == "relabel":
        relabel(a[0], a[2], a[3], a[4], a[5] if len(a) > 5 else None)
    elif len(a) == 3 and a[1] == "restore":
        restore(a[0], a[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
