#!/usr/bin/env bash
# The GPU proof of `resolve --source pypi`: the environment's own NVIDIA
# wheels, rebuilt from their installed files (pack_wheels.py), are served
# as a simple index from 127.0.0.1; their library directories are removed;
# `cudadeps resolve torch --source pypi` takes the exact pinned wheels back
# from that index and places their files where RECORD puts them; real GPU
# work runs in torch in a new process; undo and a put-back leave the tree
# exactly as before.
#
# Usage: e2e/gpu/pypi.sh CUDADEPS [--clean]   (--clean as in layout.sh)
# Environment: PYTHON, OUT, HIDE (default: nvidia/cu13/lib nvidia/cudnn/lib
# nvidia/cusparselt/lib).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
proof_setup "$@"
export PIP_CONFIG_FILE=/dev/null

log "host: $MODE; $("$CUDADEPS" --version)"
if [ "$MODE" = clean ]; then
  clean_host "$WORK" || { echo "could not make a clean host"; exit 1; }
fi
BEFORE=$(snapshot)

log "1. remove $HIDE and rebuild the wheels that own them as a simple index"
hide_dirs "$SITE" "$WORK" $HIDE || exit 1
restore() { restore_dirs "$SITE" "$WORK" $HIDE; }
trap restore EXIT
time "$PYTHON" "$HERE/pack_wheels.py" "$SITE" "$WORK/index" $HIDE -- "${MOVED[@]}"
PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PYTHON" -m http.server "$PORT" --bind 127.0.0.1 --directory "$WORK/index" > "$WORK/http.log" 2>&1 &
HTTP=$!
sleep 1
INDEX="http://127.0.0.1:$PORT/simple/"
"$PYTHON" -c 'import torch; print(torch.randn(2, device="cuda").sum())' > "$OUT/pypi-$MODE-before.txt" 2>&1
echo "torch before resolve: exit $? ($(tail -n 1 "$OUT/pypi-$MODE-before.txt" | cut -c1-160))"

log "2. resolve torch --source pypi"
COMMON=(--source pypi --index-url "$INDEX" --prefix "$PREFIX" --python "$PYTHON")
"$CUDADEPS" resolve torch "${COMMON[@]}" --dry-run > "$OUT/pypi-$MODE-dry.txt" 2>&1
echo "dry run exit $?"; head -n 40 "$OUT/pypi-$MODE-dry.txt"
"$CUDADEPS" resolve torch "${COMMON[@]}" --yes > "$OUT/pypi-$MODE-resolve.txt" 2>&1
echo "resolve exit $?"; grep -vE '^\s+→|^\s+←' "$OUT/pypi-$MODE-resolve.txt" | tail -n 30
echo "requests to the index: $(grep -c 'GET /' "$WORK/http.log")"
for d in $HIDE; do echo "$d: $(ls "$SITE/$d" 2>/dev/null | wc -l) entries, e.g. $(ls -l "$SITE/$d" 2>/dev/null | sed -n 2p | awk '{print $9, $10, $11}')"; done

log "3. GPU work in torch, new process"
"$PYTHON" "$HERE/gpu_work.py" torch > "$OUT/pypi-$MODE-work.txt" 2>&1
echo "torch GPU work: $? failure(s)"
grep -E '^(ok|FAIL)|cudnn version|mapped .*(cudnn\.so|cublas\.so|nvrtc|cusparseLt)' "$OUT/pypi-$MODE-work.txt"

log "4. undo, put back, compare"
"$CUDADEPS" undo torch --prefix "$PREFIX"; echo "undo exit $?"
restore
AFTER=$(snapshot)
[ "$BEFORE" = "$AFTER" ] && echo "tree restored exactly ($BEFORE)" || echo "TREE DIFFERS after undo and restore ($BEFORE vs $AFTER)"
kill "$HTTP" 2>/dev/null
