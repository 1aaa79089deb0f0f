#!/usr/bin/env bash
# scan-vs-peers.sh: how long `cudadeps scan DIR` takes against the tools
# people otherwise use, in one run on the same trees, and its peak memory.
#
# For each tree (default: /usr/lib/x86_64-linux-gnu; with the corpus at
# hand, also the skeleton of a real PyTorch 2.11 + CUDA 13 environment, its
# 859 ELF files padded to their real sizes as sparse files, with as many
# other files and directories as the real environment has: 68,849 files in
# 7,811 directories, which a scan must open to find the ELF ones):
#
#   loader only   `cudadeps scan --symbols=false --no-runtime-opens DIR`:
#                 walks the tree, finds the ELF files itself and computes
#                 every closure; again with GOMAXPROCS=1 (one processor),
#                 for how the work spreads over the machine.
#   default       `cudadeps scan DIR`: closures, every symbol bound, the
#                 libraries opened at run time resolved; GOMAXPROCS=1 too.
#                 Warm: the binding answers come from what the untimed
#                 runs before kept. Again with no answer kept (the
#                 cache's bind-* files removed): every symbol table read.
#   libtree       `libtree FILE` once per ELF file (the list is made
#                 beforehand and not timed: the peers are spared the walk).
#   ldd           `ldd FILE` once per ELF file: the real loader.
#   ldd -r        `ldd -r FILE` once per root of the scan, as many at a time
#                 as there are processors: the real loader binding every
#                 symbol, against the default scan; and `ldd -r` given
#                 every root at once (one process, the roots one after
#                 another: what `xargs -P N ldd -r` runs without -n).
#
# Then the peak resident memory of both scans with GOMEMLIMIT=off.
# Wall times are medians taken one after another in this one run: compare
# the ratios of one run, not numbers across runs. Goals: on this 2-processor
# machine, peak RSS under 64 MiB (TestScanPeakRSS gates it in CI); on the
# 16-processor GPU machine see bench/gpu-env.sh and docs/performance.md.
#
# Usage: bench/scan-vs-peers.sh [TREE...]
# Environment: RUNS (cudadeps, default 10), SLOW_RUNS (the peers, default
# 3), CUDADEPS (a built binary; default: build one), CORPUS (the recorded
# environment, default ../shared/corpus/torch/torch-2.11.0-cu130-x86_64-venv.jsonl.gz).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/scanlib.sh

RUNS=${RUNS:-10}
SLOW_RUNS=${SLOW_RUNS:-3}
CORPUS=${CORPUS:-../shared/corpus/torch/torch-2.11.0-cu130-x86_64-venv.jsonl.gz}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cudadeps=${CUDADEPS:-}
if [ -z "$cudadeps" ]; then
  echo "== building cudadeps"
  go build -o "$work/cudadeps" ./cmd/cudadeps
  cudadeps="$work/cudadeps"
fi
export XDG_CACHE_HOME="$work/cache"

trees=("$@")
if [ ${#trees[@]} -eq 0 ]; then
  [ -d /usr/lib/x86_64-linux-gnu ] && trees+=(/usr/lib/x86_64-linux-gnu)
  if [ -f "$CORPUS" ] && command -v go >/dev/null; then
    echo "== writing the torch environment's skeleton"
    go run ./internal/testkit/torchtree/cmd/torchtree -pad -others "$CORPUS" "$work/torch-env/site-packages" 2>/dev/null
    trees+=("$work/torch-env/site-packages")
  fi
fi

for tree in "${trees[@]}"; do
  echo
  echo "== $(date -u +%Y-%m-%dT%H:%MZ) $tree"
  scan_table "$cudadeps" "$tree" "$work" "$RUNS" "$SLOW_RUNS"
  verdict "peak RSS of the default scan under 64 MiB, warm and none kept" "$RSS_DEFAULT < 64 * 1024 && $RSS_COMPUTED < 64 * 1024"
done
