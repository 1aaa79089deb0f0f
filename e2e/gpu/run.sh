#!/usr/bin/env bash
# The real-GPU proof of `cudadeps resolve`, on a machine with an NVIDIA GPU
# and a PyTorch + CUDA 13 environment:
#
#   1. scan the whole environment and time it (and the same with --json);
#   2. hide one library directory of the environment (default
#      nvidia/cusparselt, which libtorch_cuda.so needs), repack it as an
#      NVIDIA-layout .tar.xz served from 127.0.0.1, with a catalog layer for
#      it, and show that `import torch` now fails;
#   3. run `cudadeps resolve torch` against that mirror;
#   4. run a CUDA matrix product in a fresh python3, with no environment
#      change;
#   5. `cudadeps undo torch`, put the hidden directory back, check the tree
#      is as before;
#   6. report what cudadeps says about cupy-cuda13x (scan and resolve
#      --dry-run), and run `cudadeps doctor torch --probe` plainly, with
#      CUDA_VISIBLE_DEVICES empty, and with the toolkit's stub libcuda first
#      on LD_LIBRARY_PATH.
#
# Usage: e2e/gpu/run.sh [CUDADEPS_BINARY]
# Environment: PYTHON (default: the python3 on PATH), HIDE (default
# nvidia/cusparselt), OUT (where logs go; default a temporary directory).
set -uo pipefail

CUDADEPS=${1:-cudadeps}
PYTHON=${PYTHON:-$(command -v python3)}
HIDE=${HIDE:-nvidia/cusparselt}
OUT=${OUT:-$(mktemp -d)}
WORK=$(mktemp -d)
PREFIX=$WORK/prefix
export XDG_CACHE_HOME=$WORK/cache
mkdir -p "$OUT"
log() { printf '\n=== %s\n' "$*"; }

SITE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
ENVROOT=$("$PYTHON" -c 'import sys; print(sys.prefix)')
log "environment: $PYTHON, site-packages $SITE"
"$CUDADEPS" --version
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true

log "1. scan of the whole environment ($ENVROOT), 5 runs each"
"$PYTHON" - "$CUDADEPS" "$ENVROOT" <<'PY'
import os, resource, statistics, subprocess, sys, time
exe, root = sys.argv[1], sys.argv[2]
for args in (["scan", root], ["scan", "--json", root]):
    times = []
    for _ in range(5):
        t = time.perf_counter()
        r = subprocess.run([exe] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"cudadeps {' '.join(args[:-1])}: median {statistics.median(times):.3f} s, min {min(times):.3f} s, exit {r.returncode}, peak RSS so far {rss:.1f} MiB")
n = 0
for d, _, files in os.walk(root):
    for f in files:
        p = os.path.join(d, f)
        try:
            with open(p, "rb") as fh:
                if fh.read(4) == b"\x7fELF" and not os.path.islink(p):
                    n += 1
        except OSError:
            pass
print(f"ELF files under {root}: {n}")
PY
"$CUDADEPS" scan "$ENVROOT" > "$OUT/scan-env.txt" 2>&1; echo "scan exit $?"; tail -n 25 "$OUT/scan-env.txt"
"$CUDADEPS" scan "$SITE/torch/lib/libtorch_cuda.so" | head -n 40
"$CUDADEPS" resolve torch --python "$PYTHON" --dry-run --prefix "$PREFIX"; echo "resolve --dry-run on the intact environment: exit $?"

log "2. hide $HIDE and repack it as an NVIDIA archive served from 127.0.0.1"
SNAP_BEFORE=$(cd "$SITE" && find nvidia torch -printf '%p %y %s %l\n' 2>/dev/null | sort | sha256sum)
HIDDEN=$WORK/hidden
mkdir -p "$HIDDEN"
mv "$SITE/$HIDE" "$HIDDEN/" || { echo "cannot hide $SITE/$HIDE"; exit 1; }
restore() { [ -d "$HIDDEN/$(basename "$HIDE")" ] && [ ! -e "$SITE/$HIDE" ] && mv "$HIDDEN/$(basename "$HIDE")" "$SITE/$HIDE"; }
trap restore EXIT
MIRROR=$WORK/mirror
"$PYTHON" - "$HIDDEN/$(basename "$HIDE")" "$MIRROR" <<'PY'
import hashlib, io, os, sys, tarfile
src, mirror = sys.argv[1], sys.argv[2]
version = "99.0.0.0"
name = f"libcusparse_lt-linux-x86_64-{version}_cuda13-archive"
rel = f"libcusparse_lt/linux-x86_64/{name}.tar.xz"
out = os.path.join(mirror, rel)
os.makedirs(os.path.dirname(out), exist_ok=True)
sonames = []
with tarfile.open(out, "w:xz") as tar:
    lib = os.path.join(src, "lib")
    for f in sorted(os.listdir(lib)):
        p = os.path.join(lib, f)
        tar.add(p, arcname=f"{name}/lib/{f}", recursive=False)
        if ".so" in f and not os.path.islink(p):
            sonames.append(f)
data = open(out, "rb").read()
with open(os.path.join(mirror, "catalog.yaml"), "w") as c:
    c.write(f"""format: 1
components:
  libcusparse_lt:
    product: cusparselt
    releases:
      - version: {version}
        archives:
          - platform: linux-x86_64
            cuda_variant: cuda13
            path: {rel}
            sha256: {hashlib.sha256(data).hexdigest()}
            size: {len(data)}
            sonames: [libcusparseLt.so.0]
""")
print(f"packed {sonames} into {rel} ({len(data)} bytes)")
PY
PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PYTHON" -m http.server "$PORT" --bind 127.0.0.1 --directory "$MIRROR" >"$WORK/http.log" 2>&1 &
HTTP=$!
sleep 1
"$PYTHON" -c 'import torch' 2>&1 | tail -n 2

log "3. cudadeps resolve torch (dry run, then for real)"
COMMON=(--python "$PYTHON" --catalog "$MIRROR/catalog.yaml" --mirror "http://127.0.0.1:$PORT/" --prefix "$PREFIX")
"$CUDADEPS" resolve torch "${COMMON[@]}" --dry-run; echo "dry run exit $?"
"$CUDADEPS" resolve torch "${COMMON[@]}" --yes; echo "resolve exit $?"
"$CUDADEPS" resolve torch "${COMMON[@]}" --yes --json > "$OUT/resolve-again.json"; echo "second resolve exit $? (downloads: $(grep -c 'GET /' "$WORK/http.log"))"

log "4. a CUDA matrix product in a fresh python3, no environment change"
env -u LD_LIBRARY_PATH "$PYTHON" -c '
import torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
c = a @ b
torch.cuda.synchronize()
ref = (a.float() @ b.float())
print("torch", torch.__version__, "on", torch.cuda.get_device_name(0), "matmul max abs err vs fp32:", float((c.float() - ref).abs().max()))
'; echo "matmul exit $?"

log "5. undo, restore, compare"
"$CUDADEPS" undo torch --prefix "$PREFIX"; echo "undo exit $?"
restore
SNAP_AFTER=$(cd "$SITE" && find nvidia torch -printf '%p %y %s %l\n' 2>/dev/null | sort | sha256sum)
[ "$SNAP_BEFORE" = "$SNAP_AFTER" ] && echo "tree restored exactly" || echo "TREE DIFFERS after undo and restore"
kill $HTTP 2>/dev/null

log "6a. cupy-cuda13x"
"$CUDADEPS" resolve cupy-cuda13x --python "$PYTHON" --dry-run --prefix "$PREFIX" > "$OUT/cupy-dry-run.txt" 2>&1; echo "resolve --dry-run exit $?"
cat "$OUT/cupy-dry-run.txt" | head -n 40
CUPY=$("$PYTHON" -c 'import importlib.util as u; print(u.find_spec("cupy").submodule_search_locations[0])' 2>/dev/null)
[ -n "$CUPY" ] && "$CUDADEPS" why libcutensor.so.2 --from "$(ls "$CUPY"/../cupy_backends/cuda/libs/cutensor*.so 2>/dev/null | head -n 1)" 2>&1 | head -n 30

log "6b. doctor"
if "$CUDADEPS" doctor --help >/dev/null 2>&1; then
  "$CUDADEPS" doctor torch --probe --python "$PYTHON"; echo "doctor exit $?"
  echo "--- with CUDA_VISIBLE_DEVICES="
  CUDA_VISIBLE_DEVICES= "$CUDADEPS" doctor torch --probe --python "$PYTHON"; echo "doctor exit $?"
  STUB=$(find / -path /proc -prune -o -name libcuda.so -path '*stubs*' -print 2>/dev/null | head -n 1)
  # The classic mistake: the toolkit's stub made into libcuda.so.1 and put
  # first on LD_LIBRARY_PATH.
  mkdir -p "$WORK/stubs" && ln -sf "$STUB" "$WORK/stubs/libcuda.so.1"
  echo "--- with the stub ($STUB) as libcuda.so.1 first on LD_LIBRARY_PATH"
  [ -n "$STUB" ] && LD_LIBRARY_PATH=$WORK/stubs "$CUDADEPS" doctor torch --probe --python "$PYTHON"; echo "doctor exit $?"
else
  echo "this build has no doctor command"
fi
