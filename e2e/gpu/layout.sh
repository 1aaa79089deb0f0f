#!/usr/bin/env bash
# The GPU proof that `cudadeps resolve` restores what a Python package was
# built for: the versions its metadata pins, where the wheels' RECORDs put
# them, with no wrong copy found first.
#
#   1. real GPU work in torch, JAX and CuPy on the intact environment;
#   2. remove nvidia/cu13/lib, nvidia/cudnn/lib and nvidia/cusparselt/lib
#      from site-packages and show what breaks;
#   3. pack what was removed as NVIDIA redistributable archives with
#      NVIDIA-format manifests, served from 127.0.0.1 (pack_redist.py), and
#      `cudadeps catalog import --scan` them;
#   4. `cudadeps resolve` torch, the JAX CUDA plugin and CuPy;
#   5. real GPU work again, each framework in a new process with this
#      shell's own environment (gpu_work.py);
#   6. `cudadeps undo` all three, put the removed directories back, and
#      check the tree is exactly as before.
#
# With --clean it first makes this host clean in a private mount namespace:
# the CUDA toolkit's library directory and the system cuDNN become
# invisible, and ld.so.cache is rebuilt without them and bound over
# /etc/ld.so.cache. Without it the stock host keeps its own CUDA toolkit (in
# ld.so.cache) and cuDNN, which a removed library silently falls back to.
#
# Usage: e2e/gpu/layout.sh CUDADEPS [--clean]
# Environment: PYTHON (default python3), OUT (logs), MIRROR (a packed
# mirror to reuse; default a directory under /tmp kept between runs), HIDE
# (the directories removed) and TARGETS (the packages resolved, in order).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
proof_setup "$@"
MIRROR=${MIRROR:-/tmp/cudadeps-gpu-mirror}
TARGETS=${TARGETS:-torch jax-cuda13-plugin cupy-cuda13x}

gpu_work() { # label
  local fails=0
  for fw in torch jax cupy; do
    "$PYTHON" "$HERE/gpu_work.py" "$fw" > "$OUT/work-$1-$fw.txt" 2>&1
    fails=$((fails + $?))
    grep -E '^(ok|FAIL)|failure|cudnn version|mapped .*(cudnn\.so|cublas\.so|nvrtc|cusparseLt)' "$OUT/work-$1-$fw.txt"
  done
  echo "GPU work ($1): $fails failure(s)"
}


log "host: $MODE; $("$CUDADEPS" --version); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
if [ "$MODE" = clean ]; then
  clean_host "$WORK" || { echo "could not make a clean host"; exit 1; }
fi
echo "site-packages: $SITE"

log "1. GPU work on the intact environment"
gpu_work intact
BEFORE=$(snapshot)

log "2. remove $HIDE"
hide_dirs "$SITE" "$WORK" $HIDE || exit 1
restore() { restore_dirs "$SITE" "$WORK" $HIDE; }
trap restore EXIT
gpu_work removed

log "3. pack the removed files as NVIDIA archives, serve them, catalog import --scan"
if [ ! -d "$MIRROR/manifests" ]; then
  time "$PYTHON" "$HERE/pack_redist.py" "$CUDADEPS" "$SITE" "$MIRROR" "${MOVED[@]}"
fi
ls "$MIRROR/manifests"
PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PYTHON" -m http.server "$PORT" --bind 127.0.0.1 --directory "$MIRROR" > "$WORK/http.log" 2>&1 &
HTTP=$!
sleep 1
URL="http://127.0.0.1:$PORT/"
"$CUDADEPS" catalog import --scan --allow-http --mirror "$URL" -o "$WORK/layer.yaml" "$MIRROR/manifests"
echo "catalog import exit $?"
COMMON=(--catalog "$WORK/layer.yaml" --mirror "$URL" --allow-http --prefix "$PREFIX" --python "$PYTHON")

log "4. cudadeps resolve"
FIRST=${TARGETS%% *}
"$CUDADEPS" resolve "$FIRST" "${COMMON[@]}" --dry-run > "$OUT/resolve-$MODE-$FIRST-dry.txt" 2>&1
echo "$FIRST dry run exit $?"
head -n 60 "$OUT/resolve-$MODE-$FIRST-dry.txt"
for t in $TARGETS; do
  "$CUDADEPS" resolve "$t" "${COMMON[@]}" --yes > "$OUT/resolve-$MODE-$t.txt" 2>&1
  echo "resolve $t exit $?"
  grep -vE '^\s+→|^\s+←' "$OUT/resolve-$MODE-$t.txt" | tail -n 25
done
for t in $TARGETS; do
  "$CUDADEPS" resolve "$t" "${COMMON[@]}" --yes --json > "$OUT/resolve-$MODE-$t.json" 2>/dev/null
  echo "second resolve $t exit $? (JSON in resolve-$MODE-$t.json)"
done
echo "downloads from the mirror: $(grep -c 'GET /' "$WORK/http.log")"
[ -e "$PREFIX/env.sh" ] && echo "an activation script was written (not sourced below): $(cat "$PREFIX/env.sh")"
for d in $HIDE; do echo "$d: $(ls "$SITE/$d" 2>/dev/null | wc -l) entries, e.g. $(ls -l "$SITE/$d" 2>/dev/null | sed -n 2p | awk '{print $9, $10, $11}')"; done

log "5. GPU work after resolve, each framework in a new process"
gpu_work resolved

log "6. undo, put the removed directories back, compare"
for t in $TARGETS; do "$CUDADEPS" undo "$t" --prefix "$PREFIX"; echo "undo $t exit $?"; done
restore
AFTER=$(snapshot)
[ "$BEFORE" = "$AFTER" ] && echo "tree restored exactly ($BEFORE)" || echo "TREE DIFFERS after undo and restore ($BEFORE vs $AFTER)"
kill "$HTTP" 2>/dev/null
