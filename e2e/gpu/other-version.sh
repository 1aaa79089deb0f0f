#!/usr/bin/env bash
# The GPU proof of a declared distribution installed at another version:
# torch pins nvidia-cudnn-cu13==9.19.0.56, and the environment holds cuDNN
# at the release the host's own cuDNN is (9.14 on the stock image), its
# libraries really that release's (the host's files), its .dist-info saying
# so, as pip leaves an older install.
#
#   1. on the intact environment: resolve --dry-run and check exit 0, and
#      the pinned wheel is packed for a simple index on 127.0.0.1;
#   2. cuDNN relabelled to the host's release (relabel.py);
#   3. what cudadeps says: resolve --dry-run, check, doctor, and a real
#      resolve, which must exit 3 naming the distribution, the requirement
#      and the pip command, and change no file;
#   4. real GPU work in torch, and in JAX (whose plugin admits cuDNN
#      >=9.12,<10): what that state does at run time;
#   5. the advice followed (pip install from the index on 127.0.0.1):
#      resolve and check exit 0, GPU work passes;
#   6. the environment put back exactly.
#
# Usage: e2e/gpu/other-version.sh CUDADEPS
# Environment: PYTHON, OUT (logs).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
proof_setup "$@"
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
torch_work() { # label
  "$PYTHON" "$HERE/gpu_work.py" torch > "$OUT/other-version-$1-torch.txt" 2>&1
  local fails=$?
  grep -E '^(ok|FAIL)|cudnn version|mapped .*cudnn\.so' "$OUT/other-version-$1-torch.txt" | cut -c1-300 | head -n 14
  echo "GPU work in torch ($1): $fails failure(s)"
}
says() { # label: what resolve --dry-run, check and doctor say
  "$CUDADEPS" resolve torch --python "$PYTHON" --dry-run > "$OUT/other-version-$1-dry.txt" 2>&1
  echo "resolve torch --dry-run exit $?"
  grep -iE 'cudnn|exit|nothing|whole' "$OUT/other-version-$1-dry.txt" | head -n 8
  "$CUDADEPS" check torch --python "$PYTHON" > "$OUT/other-version-$1-check.txt" 2>&1
  echo "check torch exit $?"
  head -n 6 "$OUT/other-version-$1-check.txt"
}

log "host: $MODE; $("$CUDADEPS" --version); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
SYSLIB=$(readlink -f /lib/x86_64-linux-gnu)
SYSCUDNN=$(ls "$SYSLIB"/libcudnn.so.9.* 2>/dev/null | head -n 1)
[ -n "$SYSCUDNN" ] || { echo "the host has no cuDNN of its own in $SYSLIB: nothing to take another release from"; exit 1; }
OTHER=${SYSCUDNN##*/libcudnn.so.}
echo "the host's cuDNN: $SYSCUDNN (release $OTHER); site-packages: $SITE"
"$PYTHON" -m pip --version 2>&1 | head -n 1

log "1. the intact environment"
INTACT=$(nvsnap)
says intact
INDEX=$WORK/index
"$PYTHON" "$HERE/pack_wheels.py" "$SITE" "$INDEX" nvidia/cudnn > "$OUT/other-version-pack.txt" 2>&1
tail -n 1 "$OUT/other-version-pack.txt"

log "2. cuDNN relabelled to $OTHER, its libraries the host's"
BACKUP=$WORK/backup
"$PYTHON" "$HERE/relabel.py" "$SITE" relabel nvidia-cudnn-cu13 "$OTHER" "$BACKUP" "$SYSLIB"
restore() { "$PYTHON" "$HERE/relabel.py" "$SITE" restore "$BACKUP"; }
trap restore EXIT
"$PYTHON" "$HERE/pipdist.py" "$SITE" check 2>&1 | grep -i cudnn | head -n 3

log "3. what cudadeps says"
says other
"$CUDADEPS" doctor torch --python "$PYTHON" > "$OUT/other-version-doctor.txt" 2>&1
echo "doctor torch exit $?"
grep -iE 'cudnn' "$OUT/other-version-doctor.txt" | head -n 6
BEFORE=$(nvsnap)
IPORT=$(port)
"$PYTHON" -m http.server "$IPORT" --bind 127.0.0.1 --directory "$INDEX" > "$WORK/index.log" 2>&1 &
IHTTP=$!
trap 'restore; kill $IHTTP 2>/dev/null' EXIT
sleep 1
"$CUDADEPS" resolve torch --python "$PYTHON" --source auto --index-url "http://127.0.0.1:$IPORT/simple/" --allow-http --prefix "$PREFIX" --yes --json > "$OUT/other-version-resolve.json" 2> "$OUT/other-version-resolve.err"
echo "resolve torch --yes exit $?"
"$PYTHON" - "$OUT/other-version-resolve.json" <<'EOF'
import json, sys
o = json.load(open(sys.argv[1]))
print("ok:", o.get("ok"), "| stopped:", o.get("stopped"))
for u in o.get("unresolved") or []:
    print(f"unresolved {u['kind']} {u['soname']}: {u['reason']} -- {u.get('advice', '')}")
EOF
[ "$(nvsnap)" = "$BEFORE" ] && echo "resolve changed no file of the nvidia tree" || echo "RESOLVE CHANGED THE TREE"

log "4. GPU work with cuDNN $OTHER where 9.19.0.56 is pinned"
torch_work other
# The JAX plugin asks cuDNN >=9.12,<10: the installed release meets its own
# requirement, whatever torch pins.
"$CUDADEPS" resolve jax-cuda13-plugin --python "$PYTHON" --dry-run > "$OUT/other-version-other-jax-dry.txt" 2>&1
echo "resolve jax-cuda13-plugin --dry-run exit $?"
grep -E 'nvidia-cudnn-cu13 ' "$OUT/other-version-other-jax-dry.txt" | head -n 2
"$PYTHON" "$HERE/gpu_work.py" jax > "$OUT/other-version-other-jax.txt" 2>&1
echo "GPU work in JAX: $? failure(s)"
grep -E '^(ok|FAIL)|platform|devices|mapped .*cudnn\.so' "$OUT/other-version-other-jax.txt" | cut -c1-200 | head -n 8

log "5. the advice followed: pip install from the index on 127.0.0.1"
"$PYTHON" -m pip install --no-deps --no-compile --index-url "http://127.0.0.1:$IPORT/simple/" 'nvidia-cudnn-cu13==9.19.0.56' > "$OUT/other-version-pip.txt" 2>&1
echo "pip install exit $?: $(tail -n 1 "$OUT/other-version-pip.txt")"
says fixed
torch_work fixed

log "6. put the environment back"
restore
trap 'kill $IHTTP 2>/dev/null' EXIT
[ "$(nvsnap)" = "$INTACT" ] && echo "environment restored exactly ($INTACT)" || echo "ENVIRONMENT DIFFERS from the intact one"
