#!/usr/bin/env bash
# The real-GPU proof of `cudadeps resolve --source pypi`, on a machine with
# an NVIDIA GPU and a PyTorch + CUDA 13 environment:
#
#   1. rebuild the environment's own NVIDIA wheels (default nvidia-cudnn-cu13,
#      nvidia-cusparselt-cu13, nvidia-nccl-cu13) from their installed files
#      and RECORD, and serve them from a PEP 503 simple index (HTML, no
#      sizes) on 127.0.0.1;
#   2. remove their shared libraries and show that `import torch` fails;
#   3. `cudadeps resolve torch --source pypi --index-url ...`;
#   4. real GPU work in a fresh python3 (gpu_work.py torch), no environment
#      change, with the files it mapped;
#   5. `cudadeps undo torch`, put the libraries back, compare the tree.
#
# Usage: e2e/gpu/wheels.sh [CUDADEPS_BINARY]
# Environment: PYTHON (default: the python3 on PATH), DISTS (the
# distributions to rebuild and remove), OUT (logs; default a temporary
# directory).
set -uo pipefail

CUDADEPS=${1:-cudadeps}
PYTHON=${PYTHON:-$(command -v python3)}
DISTS=${DISTS:-nvidia-cudnn-cu13 nvidia-cusparselt-cu13 nvidia-nccl-cu13}
OUT=${OUT:-$(mktemp -d)}
WORK=$(mktemp -d)
PREFIX=$WORK/prefix
INDEX=$WORK/index
HIDDEN=$WORK/hidden
export XDG_CACHE_HOME=$WORK/cache PIP_CONFIG_FILE=/dev/null
mkdir -p "$OUT" "$HIDDEN"
log() { printf '\n=== %s\n' "$*"; }
HERE=$(cd "$(dirname "$0")" && pwd)

SITE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
log "environment: $PYTHON, site-packages $SITE"
"$CUDADEPS" --version
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
SNAP_BEFORE=$(cd "$SITE" && find nvidia torch -printf '%p %y %s %l\n' 2>/dev/null | sort | sha256sum)

log "1. rebuild $DISTS as wheels from their installed files; a simple index on 127.0.0.1"
# Prints, for each distribution, the libraries it removes next: one
# "SITE-RELATIVE-PATH" a line into $WORK/libs.
"$PYTHON" - "$SITE" "$INDEX" "$WORK/libs" $DISTS <<'PY'
import csv, glob, hashlib, html, io, os, re, sys, zipfile
site, index, libs_out, dists = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
skip = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}
libs = []
os.makedirs(os.path.join(index, "files"), exist_ok=True)
for want in dists:
    infos = [d for d in glob.glob(os.path.join(site, "*.dist-info"))
             if norm(os.path.basename(d)[:-len(".dist-info")].rsplit("-", 1)[0]) == norm(want)]
    if len(infos) != 1:
        sys.exit(f"{want}: {len(infos)} dist-info folders")
    info = infos[0]
    meta = open(os.path.join(info, "METADATA"), encoding="utf-8").read()
    name = re.search(r"^Name: (.+)$", meta, re.M).group(1).strip()
    version = re.search(r"^Version: (.+)$", meta, re.M).group(1).strip()
    tags = [l.split(":", 1)[1].strip() for l in open(os.path.join(info, "WHEEL")) if l.startswith("Tag:")]
    py = sorted({t.split("-")[0] for t in tags}); abi = sorted({t.split("-")[1] for t in tags}); plat = sorted({t.split("-")[2] for t in tags})
    fname = f"{re.sub(r'[-_.]+', '_', name)}-{version}-{'.'.join(py)}-{'.'.join(abi)}-{'.'.join(plat)}.whl"
    infodir = os.path.basename(info)
    rows = list(csv.reader(open(os.path.join(info, "RECORD"), newline="")))
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    out = os.path.join(index, "files", fname)
    n = 0
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for row in rows:
            p = row[0]
            if p.startswith("..") or "__pycache__" in p or p.endswith(".pyc"):
                continue
            if p.startswith(infodir + "/") and os.path.basename(p) in skip:
                continue
            data = open(os.path.join(site, p), "rb").read()
            zi = zipfile.ZipInfo(p, (1980, 1, 1, 0, 0, 0))
            zi.external_attr = (os.stat(os.path.join(site, p)).st_mode & 0o777) << 16
            z.writestr(zi, data)
            w.writerow(row)
            n += 1
            if ".so" in os.path.basename(p) and not p.startswith(infodir + "/"):
                libs.append(p)
        w.writerow([infodir + "/RECORD", "", ""])
        z.writestr(infodir + "/RECORD", record.getvalue())
    data = open(out, "rb").read()
    sha = hashlib.sha256(data).hexdigest()
    proj = os.path.join(index, "simple", norm(name))
    os.makedirs(proj, exist_ok=True)
    with open(os.path.join(proj, "index.html"), "w") as f:
        f.write(f'<!DOCTYPE html><html><body><a href="../../files/{html.escape(fname)}#sha256={sha}">{html.escape(fname)}</a></body></html>\n')
    print(f"{fname}: {n} files, {len(data)} bytes, sha256 {sha[:16]}...")
open(libs_out, "w").write("".join(p + "\n" for p in libs))
PY
[ -s "$WORK/libs" ] || { echo "no wheel rebuilt"; exit 1; }
PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PYTHON" -m http.server "$PORT" --bind 127.0.0.1 --directory "$INDEX" >"$WORK/http.log" 2>&1 &
HTTP=$!
sleep 1

log "2. remove their $(wc -l <"$WORK/libs") shared libraries"
restore() {
  while read -r p; do
    [ -e "$HIDDEN/$p" ] && { rm -f "$SITE/$p"; mkdir -p "$(dirname "$SITE/$p")"; mv "$HIDDEN/$p" "$SITE/$p"; }
  done <"$WORK/libs"
  kill $HTTP 2>/dev/null
}
trap restore EXIT
while read -r p; do mkdir -p "$(dirname "$HIDDEN/$p")" && mv "$SITE/$p" "$HIDDEN/$p"; done <"$WORK/libs"
"$PYTHON" -c 'import torch' 2>&1 | tail -n 1

log "3. cudadeps resolve torch --source pypi"
COMMON=(--python "$PYTHON" --source pypi --index-url "http://127.0.0.1:$PORT/simple/" --prefix "$PREFIX")
"$CUDADEPS" resolve torch "${COMMON[@]}" --dry-run --json > "$OUT/wheels-plan.json"; echo "dry run exit $?"
"$PYTHON" - "$OUT/wheels-plan.json" <<'PY'
import json, sys
for s in json.load(open(sys.argv[1]))["rounds"][0]["plan"]["steps"]:
    print(f'  {s["source"]}: {s["project"]} {s["version"]} {s["filename"]} ({s["size"]} bytes) for {len(s["provides"])} libraries; {s.get("pin", "")}')
PY
"$CUDADEPS" resolve torch "${COMMON[@]}" --yes; echo "resolve exit $?"
echo "index requests: $(grep -c '"GET /files/' "$WORK/http.log") file downloads, $(grep -c '"HEAD /files/' "$WORK/http.log") HEAD"

log "4. real GPU work in a fresh python3, no environment change"
env -u LD_LIBRARY_PATH "$PYTHON" "$HERE/gpu_work.py" torch; echo "gpu_work exit $?"
ok=0; bad=0
while read -r p; do
  if cmp -s "$SITE/$p" "$HIDDEN/$p"; then ok=$((ok+1)); else bad=$((bad+1)); echo "differs: $p"; fi
done <"$WORK/libs"
echo "restored libraries identical to the removed ones: $ok, different or missing: $bad"

log "5. undo, restore, compare"
"$CUDADEPS" undo torch --prefix "$PREFIX"; echo "undo exit $?"
restore
trap - EXIT
SNAP_AFTER=$(cd "$SITE" && find nvidia torch -printf '%p %y %s %l\n' 2>/dev/null | sort | sha256sum)
[ "$SNAP_BEFORE" = "$SNAP_AFTER" ] && echo "tree restored exactly" || echo "TREE DIFFERS after undo and restore"
