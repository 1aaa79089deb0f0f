#!/usr/bin/env bash
# The GPU proof of damaged distributions: files their RECORDs list deleted
# from the real environment, the distributions themselves left installed.
#
#   1. the nvidia-cufft and nvidia-cuda-runtime wheels packed for a simple
#      index on 127.0.0.1; libcufft.so.12 (a library torch loads) and a
#      header of nvidia-cuda-runtime (no library) deleted;
#   2. resolve torch: the library comes back from the exact wheel at its
#      RECORD path; the header, which cudadeps does not write into pip's
#      distribution, is named with the reinstall that brings it back (exit
#      3, as check says); real GPU work in torch (cuFFT among it) passes;
#   3. the advice followed (pip install --force-reinstall from the index):
#      check exits 0;
#   4. undo, and the environment put back exactly;
#   5. nvidia/cudnn removed whole, its .dist-info left: resolve brings the
#      libraries and the other files back from the wheel of the installed
#      release (exit 0, check 0, GPU work in torch passes), undo, put back.
#
# Usage: e2e/gpu/damaged.sh CUDADEPS [--clean]   (--clean as in layout.sh:
# the system's CUDA hidden, so that no other copy stands in for a deleted
# library)
# Environment: PYTHON, OUT (logs).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
proof_setup "$@"
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1

log "host: $MODE; $("$CUDADEPS" --version); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
if [ "$MODE" = clean ]; then
  clean_host "$WORK" || { echo "could not make a clean host"; exit 1; }
fi
LIB=nvidia/cu13/lib/libcufft.so.12
HEADER=$(cd "$SITE" && ls nvidia/cu13/include/cuda_fp16.h 2>/dev/null || ls nvidia/cu13/include/*.h | head -n 1)
RUNTIME_VERSION=$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("nvidia-cuda-runtime"))')
echo "site-packages: $SITE; deleting $LIB and $HEADER (nvidia-cuda-runtime $RUNTIME_VERSION)"

log "1. pack the wheels, keep the files aside, delete them"
INTACT=$(nvsnap)
INDEX=$WORK/index
"$PYTHON" "$HERE/pack_wheels.py" "$SITE" "$INDEX" nvidia/cu13/lib/libcufft.so.12 "$HEADER" nvidia/cudnn > "$OUT/damaged-pack.txt" 2>&1
tail -n 1 "$OUT/damaged-pack.txt"
mkdir -p "$WORK/aside"
# pip's reinstall (step 3) writes its own INSTALLER and RECORD: the
# .dist-info is kept aside too.
INFO=$(cd "$SITE" && ls -d nvidia_cuda_runtime-*.dist-info)
cp -a "$SITE/$LIB" "$WORK/aside/lib" && cp -a "$SITE/$HEADER" "$WORK/aside/header" && cp -a "$SITE/$INFO" "$WORK/aside/info" || exit 1
put_back() {
  [ -e "$SITE/$LIB" ] || cp -a "$WORK/aside/lib" "$SITE/$LIB"
  [ -e "$SITE/$HEADER" ] || cp -a "$WORK/aside/header" "$SITE/$HEADER"
  rm -rf "${SITE:?}/$INFO" && cp -a "$WORK/aside/info" "$SITE/$INFO"
}
trap put_back EXIT
rm -f "$SITE/$LIB" "$SITE/$HEADER"
"$CUDADEPS" check torch --python "$PYTHON" > "$OUT/damaged-check-before.txt" 2>&1
echo "check torch exit $?"
cat "$OUT/damaged-check-before.txt" | cut -c1-300

log "2. resolve torch"
IPORT=$(port)
"$PYTHON" -m http.server "$IPORT" --bind 127.0.0.1 --directory "$INDEX" > "$WORK/index.log" 2>&1 &
IHTTP=$!
trap 'put_back; kill $IHTTP 2>/dev/null' EXIT
sleep 1
COMMON=(--python "$PYTHON" --source auto --index-url "http://127.0.0.1:$IPORT/simple/" --allow-http --prefix "$PREFIX")
"$CUDADEPS" resolve torch "${COMMON[@]}" --dry-run > "$OUT/damaged-dry.txt" 2>&1
echo "resolve torch --dry-run exit $?"
grep -vE '^\s+(→|←)|  intact  ' "$OUT/damaged-dry.txt" | tail -n 14
"$CUDADEPS" resolve torch "${COMMON[@]}" --yes > "$OUT/damaged-resolve.txt" 2>&1
echo "resolve torch exit $?"
grep -vE '^\s+(→|←)|  intact  ' "$OUT/damaged-resolve.txt" | tail -n 14
echo "$LIB now: $(ls -l "$SITE/$LIB" 2>&1 | awk '{print $1, $NF}')"
"$PYTHON" "$HERE/gpu_work.py" torch > "$OUT/damaged-torch.txt" 2>&1
echo "GPU work in torch: $? failure(s)"
grep -E '^(ok|FAIL)|mapped .*cufft' "$OUT/damaged-torch.txt" | cut -c1-200

log "3. the advice followed: pip install --force-reinstall from the index on 127.0.0.1"
"$PYTHON" -m pip install --force-reinstall --no-deps --no-compile --index-url "http://127.0.0.1:$IPORT/simple/" "nvidia-cuda-runtime==$RUNTIME_VERSION" > "$OUT/damaged-pip.txt" 2>&1
echo "pip install exit $?: $(tail -n 1 "$OUT/damaged-pip.txt")"
"$CUDADEPS" check torch --python "$PYTHON" > "$OUT/damaged-check-after.txt" 2>&1
echo "check torch exit $?: $(head -n 1 "$OUT/damaged-check-after.txt" | cut -c1-200)"

log "4. undo, and the environment put back"
"$CUDADEPS" undo torch --prefix "$PREFIX" > "$OUT/damaged-undo.txt" 2>&1
echo "undo torch exit $?"
put_back
[ "$(nvsnap)" = "$INTACT" ] && echo "environment restored exactly ($INTACT)" || echo "ENVIRONMENT DIFFERS from the intact one"

log "5. nvidia/cudnn removed whole (libraries, headers, Python files), its .dist-info left"
cp -a "$SITE/nvidia/cudnn" "$WORK/aside/cudnn" || exit 1
put_cudnn() { [ -e "$SITE/nvidia/cudnn" ] || cp -a "$WORK/aside/cudnn" "$SITE/nvidia/cudnn"; }
trap 'put_back; put_cudnn; kill $IHTTP 2>/dev/null' EXIT
rm -rf "$SITE/nvidia/cudnn"
"$CUDADEPS" resolve torch "${COMMON[@]}" --yes > "$OUT/damaged-cudnn-resolve.txt" 2>&1
echo "resolve torch exit $?"
grep -E 'repairs|other files|cudnn .*(intact|damaged)|Done|Not done' "$OUT/damaged-cudnn-resolve.txt" | cut -c1-250 | head -n 8
"$CUDADEPS" check torch --python "$PYTHON" > "$OUT/damaged-cudnn-check.txt" 2>&1
echo "check torch exit $?: $(head -n 1 "$OUT/damaged-cudnn-check.txt" | cut -c1-200)"
"$PYTHON" "$HERE/gpu_work.py" torch > "$OUT/damaged-cudnn-torch.txt" 2>&1
echo "GPU work in torch: $? failure(s)"
grep -E '^(ok|FAIL)|cudnn version|mapped .*cudnn\.so' "$OUT/damaged-cudnn-torch.txt" | cut -c1-200
"$CUDADEPS" undo torch --prefix "$PREFIX" > "$OUT/damaged-cudnn-undo.txt" 2>&1
echo "undo torch exit $?; nvidia/cudnn after undo: $(find "$SITE/nvidia/cudnn" -type f 2>/dev/null | wc -l) file(s)"
put_cudnn
trap 'kill $IHTTP 2>/dev/null' EXIT
[ "$(nvsnap)" = "$INTACT" ] && echo "environment restored exactly ($INTACT)" || echo "ENVIRONMENT DIFFERS from the intact one"
