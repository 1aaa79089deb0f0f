#!/usr/bin/env bash
# The GPU proof that `cudadeps resolve` restores what a package declares,
# not only what is still installed: every nvidia-* distribution of the real
# environment is uninstalled as pip does (files and .dist-info; cuda-toolkit
# stays), and resolve brings them back at their pins, as installed
# distributions from the exact wheels (or NVIDIA's archives of the same
# releases), so that real GPU work runs again.
#
#   1. real GPU work in torch, JAX and CuPy on the intact environment;
#   2. the nvidia-* distributions packed as their wheels (a simple index on
#      127.0.0.1) and as NVIDIA archives of the same releases (a mirror on
#      127.0.0.1, catalog import --scan), then uninstalled as pip does;
#   3. for each SOURCE: resolve torch, the JAX CUDA plugin and CuPy; real
#      GPU work in each framework in a new process with this shell's own
#      environment; pip check; a second resolve that downloads nothing;
#      undo of all three, which must give back the post-uninstall tree
#      exactly;
#   4. the distributions put back as they were.
#
# UNINSTALL are the distributions uninstalled (pipdist.py patterns; default
# nvidia-*). "nvidia-* cuda-toolkit" is what `pip install --no-deps torch`
# leaves: no NVIDIA distribution and no cuda-toolkit, whose extras pin the
# toolkit's wheels; the index then serves cuda-toolkit too, and resolve
# installs it back.
#
# SOURCES are --source values, and "mixed": --source auto with an index
# that lacks cuDNN and cuSPARSELt, which then come from NVIDIA's archives of
# the same releases (supplied: pip check lists them, as the plan says).
#
# Usage: e2e/gpu/absent.sh CUDADEPS [--clean]   (--clean as in layout.sh)
# Environment: PYTHON, OUT (logs), SOURCES (default "auto pypi"), TARGETS,
# UNINSTALL.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
proof_setup "$@"
SOURCES=${SOURCES:-auto pypi}
TARGETS=${TARGETS:-torch jax-cuda13-plugin cupy-cuda13x}
read -r -a UNINSTALL <<< "${UNINSTALL:-nvidia-*}"
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1

gpu_work() { # label
  local fails=0
  for fw in torch jax cupy; do
    "$PYTHON" "$HERE/gpu_work.py" "$fw" > "$OUT/absent-$MODE-$1-$fw.txt" 2>&1
    fails=$((fails + $?))
    grep -E '^(ok|FAIL)|failure|cudnn version|platform|mapped .*(cudnn\.so|cublas\.so|nvrtc-builtins|cusparseLt)' "$OUT/absent-$MODE-$1-$fw.txt" | head -n 20
  done
  echo "GPU work ($1): $fails failure(s)"
}

log "host: $MODE; $("$CUDADEPS" --version); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
if [ "$MODE" = clean ]; then
  clean_host "$WORK" || { echo "could not make a clean host"; exit 1; }
fi
echo "site-packages: $SITE"
"$PYTHON" -m pip --version 2>&1 | head -n 1; command -v uv >/dev/null && uv --version

log "1. GPU work on the intact environment"
gpu_work intact
INTACT=$(nvsnap)

log "2. pack the nvidia-* distributions (and cuda-toolkit) as wheels and the libraries as NVIDIA archives, then uninstall ${UNINSTALL[*]} as pip does"
BACKUP=$(dirname "$SITE")/.cudadeps-proof-backup
rm -rf "$BACKUP"
INDEX=$WORK/index MIRROR=$WORK/mirror
# cuda-toolkit installs nothing but its .dist-info: that directory names it.
TOOLKIT_INFO=$(cd "$SITE" && ls -d cuda_toolkit-*.dist-info 2>/dev/null | head -n 1)
time "$PYTHON" "$HERE/pack_wheels.py" "$SITE" "$INDEX" nvidia $TOOLKIT_INFO > "$OUT/absent-$MODE-pack-wheels.txt" 2>&1
tail -n 1 "$OUT/absent-$MODE-pack-wheels.txt"
PAIRS=()
for d in "$SITE"/nvidia/*/lib; do PAIRS+=("$d:${d#"$SITE"/}"); done
time "$PYTHON" "$HERE/pack_redist.py" "$CUDADEPS" "$SITE" "$MIRROR" "${PAIRS[@]}" > "$OUT/absent-$MODE-pack-redist.txt" 2>&1
grep -c 'MiB$' "$OUT/absent-$MODE-pack-redist.txt" | sed 's/^/NVIDIA archives packed: /'
"$PYTHON" "$HERE/pipdist.py" "$SITE" uninstall "$BACKUP" "${UNINSTALL[@]}"
restore() { "$PYTHON" "$HERE/pipdist.py" "$SITE" restore "$BACKUP" >/dev/null; }
trap restore EXIT
UNINSTALLED=$(nvsnap)
echo "nvidia and cuda_toolkit entries in site-packages now: $(ls -d "$SITE"/nvidia* "$SITE"/cuda_toolkit* 2>/dev/null | wc -l)"
"$PYTHON" -c 'import torch; torch.randn(2, device="cuda").sum()' > "$OUT/absent-$MODE-before.txt" 2>&1
echo "torch before resolve: exit $? ($(tail -n 1 "$OUT/absent-$MODE-before.txt" | cut -c1-200))"

# the index without cuDNN and cuSPARSELt, for "mixed"
cp -al "$INDEX" "$WORK/index-mixed" && rm -rf "$WORK/index-mixed/simple/nvidia-cudnn-cu13" "$WORK/index-mixed/simple/nvidia-cusparselt-cu13"
sed -i '/nvidia-cudnn-cu13\|nvidia-cusparselt-cu13/d' "$WORK/index-mixed/simple/index.html"
IPORT=$(port); MPORT=$(port); XPORT=$(port)
"$PYTHON" -m http.server "$IPORT" --bind 127.0.0.1 --directory "$INDEX" > "$WORK/index.log" 2>&1 &
IHTTP=$!
"$PYTHON" -m http.server "$MPORT" --bind 127.0.0.1 --directory "$MIRROR" > "$WORK/mirror.log" 2>&1 &
MHTTP=$!
"$PYTHON" -m http.server "$XPORT" --bind 127.0.0.1 --directory "$WORK/index-mixed" >> "$WORK/index.log" 2>&1 &
XHTTP=$!
trap 'restore; kill $IHTTP $MHTTP $XHTTP 2>/dev/null' EXIT
sleep 1
MURL="http://127.0.0.1:$MPORT/"
"$CUDADEPS" catalog import --scan --allow-http --mirror "$MURL" -o "$WORK/layer.yaml" "$MIRROR/manifests" > /dev/null
echo "catalog import exit $?"
# downloads: wheels from the index and archives from the mirror (index
# pages and manifests are no downloads)
gets() { cat "$WORK/index.log" "$WORK/mirror.log" | grep -cE 'GET [^ ]+\.(whl|tar\.xz|tar\.gz|zip) '; }

for SRC in $SOURCES; do
  log "3. --source $SRC"
  PREFIX=$WORK/prefix-$SRC
  COMMON=(--source "$SRC" --index-url "http://127.0.0.1:$IPORT/simple/" --catalog "$WORK/layer.yaml" --mirror "$MURL" --allow-http --prefix "$PREFIX" --python "$PYTHON")
  if [ "$SRC" = mixed ]; then
    COMMON=(--source auto --index-url "http://127.0.0.1:$XPORT/simple/" --catalog "$WORK/layer.yaml" --mirror "$MURL" --allow-http --prefix "$PREFIX" --python "$PYTHON")
  fi
  FIRST=${TARGETS%% *}
  "$CUDADEPS" resolve "$FIRST" "${COMMON[@]}" --dry-run > "$OUT/absent-$MODE-$SRC-$FIRST-dry.txt" 2>&1
  echo "$FIRST dry run exit $?"
  sed -n '1,45p' "$OUT/absent-$MODE-$SRC-$FIRST-dry.txt"
  for t in $TARGETS; do
    "$CUDADEPS" resolve "$t" "${COMMON[@]}" --yes > "$OUT/absent-$MODE-$SRC-$t.txt" 2>&1
    echo "resolve $t exit $?"
    grep -vE '^\s+(→|←)' "$OUT/absent-$MODE-$SRC-$t.txt" | tail -n 14
  done
  gpu_work "resolved-$SRC"
  "$PYTHON" "$HERE/pipdist.py" "$SITE" check > "$OUT/absent-$MODE-$SRC-pipcheck.txt" 2>&1
  echo "pip check exit $?: $(grep -ciE 'nvidia|cuda-toolkit' "$OUT/absent-$MODE-$SRC-pipcheck.txt") line(s) naming NVIDIA distributions"
  grep -iE 'nvidia|cuda-toolkit|No broken' "$OUT/absent-$MODE-$SRC-pipcheck.txt" | head -n 8
  echo "INSTALLER of the restored: $(cat "$SITE"/nvidia_*.dist-info/INSTALLER "$SITE"/cuda_toolkit-*.dist-info/INSTALLER 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
  N=$(gets)
  for t in $TARGETS; do
    "$CUDADEPS" resolve "$t" "${COMMON[@]}" --yes --json > "$OUT/absent-$MODE-$SRC-$t-again.json" 2>/dev/null
    echo "second resolve $t exit $?"
  done
  echo "downloads from the index and the mirror during the second resolves: $(( $(gets) - N ))"
  for t in $TARGETS; do "$CUDADEPS" undo "$t" --prefix "$PREFIX" > /dev/null 2>&1; echo "undo $t exit $?"; done
  AFTER=$(nvsnap)
  [ "$AFTER" = "$UNINSTALLED" ] && echo "undo gave back the post-uninstall tree exactly ($AFTER)" || echo "TREE DIFFERS after undo ($UNINSTALLED vs $AFTER)"
done

log "4. put the distributions back"
restore
trap 'kill $IHTTP $MHTTP $XHTTP 2>/dev/null' EXIT
[ "$(nvsnap)" = "$INTACT" ] && echo "environment restored exactly ($INTACT)" || echo "ENVIRONMENT DIFFERS from the intact one"
rm -rf "$BACKUP"
