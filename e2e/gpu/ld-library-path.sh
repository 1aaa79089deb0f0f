#!/usr/bin/env bash
# The GPU proof of the system's CUDA in the way through LD_LIBRARY_PATH,
# the environment itself intact. For each value (unset; the host's CUDA
# toolkit library directory, whose libraries are the releases the
# environment pins; the system library directory, which holds the host's
# older cuDNN, as a cluster module or a Dockerfile's ENV puts them there):
#
#   1. what cudadeps says: check of torch, the JAX plugin and CuPy, resolve
#      torch --dry-run, doctor torch's target line;
#   2. real GPU work in torch, JAX and CuPy, each in a new process, and the
#      cuDNN, cuBLASLt and nvJitLink files each mapped;
#   3. a real resolve torch --yes (import and probes), then undo: the
#      environment must be unchanged;
#   4. whether the two agree: check of each framework's target exits 0
#      exactly when that framework's GPU work passes (3 when it fails).
#
# Usage: e2e/gpu/ld-library-path.sh CUDADEPS
# Environment: PYTHON, OUT (logs), DIRS (the values, default: "" the
# toolkit's lib64 and /lib/x86_64-linux-gnu).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
proof_setup "$@"
log "host: $MODE; $("$CUDADEPS" --version); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
TOOLKIT=$(readlink -f /usr/local/cuda/lib64 2>/dev/null)
SYSLIB=$(dirname "$(readlink -f /lib/x86_64-linux-gnu/libc.so.6)")
if [ -z "${DIRS+x}" ]; then DIRS=("" "$TOOLKIT" "$SYSLIB"); else read -r -a DIRS <<< "$DIRS"; fi
agree=0 disagree=0
INTACT=$(nvsnap)
for llp in "${DIRS[@]}"; do
  label=$(echo "${llp:-unset}" | tr / _)
  log "LD_LIBRARY_PATH=${llp:-(unset)}: $(ls "$llp" 2>/dev/null | grep -E '^lib(cudnn|cudnn_graph|nvJitLink|cublasLt)\.so\.[0-9.]+$' | tr '\n' ' ')"
  run() { if [ -n "$llp" ]; then LD_LIBRARY_PATH=$llp "$@"; else env -u LD_LIBRARY_PATH "$@"; fi; }
  for pair in torch:torch jax:jax-cuda13-plugin cupy:cupy-cuda13x; do
    fw=${pair%%:*} target=${pair#*:}
    run "$CUDADEPS" check "$target" --python "$PYTHON" > "$OUT/llp-$label-check-$target.txt" 2>&1
    code=$?
    echo "check $target: exit $code"
    cut -c1-260 "$OUT/llp-$label-check-$target.txt" | head -n 6
    run "$PYTHON" "$HERE/gpu_work.py" "$fw" > "$OUT/llp-$label-$fw.txt" 2>&1
    n=$?
    echo "GPU work in $fw: $n failure(s)"
    grep -E '^FAIL|mapped .*(cudnn[a-z_]*\.so|nvJitLink|cublasLt)' "$OUT/llp-$label-$fw.txt" | grep -v "mapped $SITE" | cut -c1-220 | head -n 8
    if { [ "$code" = 0 ] && [ "$n" = 0 ]; } || { [ "$code" = 3 ] && [ "$n" != 0 ]; }; then
      agree=$((agree + 1)); echo "  $target: cudadeps and the GPU agree"
    else
      disagree=$((disagree + 1)); echo "  $target: DISAGREE (check exit $code, $n GPU failure(s))"
    fi
  done
  run "$CUDADEPS" resolve torch --python "$PYTHON" --dry-run > "$OUT/llp-$label-resolve.txt" 2>&1
  echo "resolve torch --dry-run: exit $?"
  grep -A3 -E '^(Still found first|Taken from elsewhere)' "$OUT/llp-$label-resolve.txt" | cut -c1-260
  run "$CUDADEPS" doctor torch --python "$PYTHON" 2>&1 | grep -E '^(FAIL|warn|ok) +target' | cut -c1-260
  # A real resolve, with its import and probes: what placement cannot win
  # must change nothing (no network here: a planned download would fail).
  run "$CUDADEPS" resolve torch --python "$PYTHON" --prefix "$PREFIX" --yes > "$OUT/llp-$label-resolve-real.txt" 2>&1
  echo "resolve torch --yes: exit $?; $(grep -cE '^ +→' "$OUT/llp-$label-resolve-real.txt") placement line(s)"
  grep -E '^(Done|Not done)|^Probe' "$OUT/llp-$label-resolve-real.txt" | cut -c1-200
  "$CUDADEPS" undo torch --prefix "$PREFIX" --yes > /dev/null 2>&1
  [ "$(nvsnap)" = "$INTACT" ] && echo "the environment unchanged ($INTACT)" || { echo "THE ENVIRONMENT CHANGED"; disagree=$((disagree + 1)); }
done
log "$agree target(s) and state(s) where cudadeps and the GPU agree, $disagree where they do not"
[ "$disagree" = 0 ]
