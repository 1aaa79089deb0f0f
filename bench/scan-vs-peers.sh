#!/usr/bin/env bash
# scan-vs-peers.sh: how long `cudadeps scan DIR` takes against the tools
# people otherwise use, in one run on the same trees.
#
# For each tree (default: /usr/lib/x86_64-linux-gnu; a skeleton of a real
# PyTorch 2.11 + CUDA 13 environment, its 859 ELF files padded to their real
# 6.5 GB as sparse files, built from ../shared/corpus/torch; and the same
# skeleton with as many other, non-ELF files and directories as the real
# environment has, 68,849 files in 7,811 directories, which a scan must open
# to find the ELF ones):
#
#   cudadeps   `cudadeps scan --quiet DIR`: walks the whole tree, finds the
#              ELF files itself and computes every closure.
#   libtree    `libtree FILE` once per ELF file of the tree (the list is made
#              beforehand and not timed: the peers are spared the walk), and,
#              for reference, one `libtree FILE...` over all of them.
#   ldd        `ldd FILE` once per ELF file: the real loader, one process
#              each.
#   lddtree    pax-utils' lddtree, one process over all the ELF files (it is
#              a Python script; once per file would take minutes).
#
# Wall times are medians of several runs (hyperfine when installed, else a
# loop), taken one after another in this one run: the machine may be shared
# and noisy, so compare the ratios of one run, not numbers across runs.
# Then, for cudadeps: peak resident memory (GNU time), and the bytes it read
# per ELF file (rchar of /proc, counted by the shell that waits for it: the
# ld.so.cache and the first bytes of non-ELF files included).
#
# Peers that are not installed, or that fail on a plain library, are
# skipped. Targets, over /usr/lib/x86_64-linux-gnu: 5x faster than libtree
# (one process per file), 50x faster than ldd, peak RSS under 64 MiB, under
# 256 KiB read per file (`go test ./elfscan -run TestReadCostIsBounded`
# checks the bound file by file).
#
# Usage: bench/scan-vs-peers.sh [TREE...]
# Environment: RUNS (fast commands, default 10), SLOW_RUNS (ldd and
# lddtree, default 3), CORPUS (the recorded environment, default
# ../shared/corpus/torch/torch-2.11.0-cu130-x86_64-venv.jsonl.gz).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-10}
SLOW_RUNS=${SLOW_RUNS:-3}
CORPUS=${CORPUS:-../shared/corpus/torch/torch-2.11.0-cu130-x86_64-venv.jsonl.gz}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== building cudadeps"
go build -o "$work/cudadeps" ./cmd/cudadeps
cudadeps="$work/cudadeps"

trees=("$@")
if [ ${#trees[@]} -eq 0 ]; then
  [ -d /usr/lib/x86_64-linux-gnu ] && trees+=(/usr/lib/x86_64-linux-gnu)
  if [ -f "$CORPUS" ]; then
    echo "== writing the torch skeleton, and the skeleton with the real environment's other files"
    go run ./internal/torchtree/cmd/torchtree -pad "$CORPUS" "$work/torch/site-packages" 2>/dev/null
    go run ./internal/torchtree/cmd/torchtree -pad -others "$CORPUS" "$work/torch-env/site-packages" 2>/dev/null
    trees+=("$work/torch/site-packages" "$work/torch-env/site-packages")
  else
    echo "(no torch skeleton: $CORPUS is absent)"
  fi
fi

# median reads numbers, one a line, and prints their median.
median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# measure RUNS WARMUP COMMAND: the median wall time of a shell command, in
# seconds (its output and exit status ignored).
measure() {
  local runs=$1 warmup=$2 cmd=$3
  if command -v hyperfine >/dev/null; then
    hyperfine --ignore-failure --style none --warmup "$warmup" --runs "$runs" \
      --export-csv "$work/h.csv" "$cmd" >/dev/null 2>&1
    awk -F, 'NR == 2 { print $4 }' "$work/h.csv"
    return
  fi
  local i s e
  for ((i = 0; i < warmup; i++)); do bash -c "$cmd" >/dev/null 2>&1 || true; done
  for ((i = 0; i < runs; i++)); do
    s=$(date +%s%N)
    bash -c "$cmd" >/dev/null 2>&1 || true
    e=$(date +%s%N)
    echo "$(( e - s ))" | awk '{ print $1 / 1e9 }'
  done | median
}

# works PEER...: the peer command runs on a plain system library.
works() {
  local probe
  probe=$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libz.so.1 2>/dev/null | head -1)
  [ -n "$probe" ] && "$@" "$probe" >/dev/null 2>&1
}

# peak_rss COMMAND...: the maximum resident set size in KiB (GNU time).
peak_rss() {
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o "$work/rss" "$@" >/dev/null 2>&1 || true
    tail -1 "$work/rss"
  else
    echo "nan"
  fi
}

# bytes_read COMMAND...: what the command read through read(2) and pread(2),
# children included (a waiting shell's rchar includes its reaped children).
bytes_read() {
  bash -c 'rchar() { local k v; while read -r k v; do [ "$k" = rchar: ] && echo "$v"; done </proc/$$/io; }
    a=$(rchar); "$@" >/dev/null 2>&1; b=$(rchar); echo $(( b - a ))' _ "$@"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.1fx", a / b }'; }

for tree in "${trees[@]}"; do
  echo
  echo "== $tree"
  list="$work/elf-files"
  : >"$list"
  while IFS= read -r -d '' f; do
    m=""
    IFS= read -r -N 4 m <"$f" 2>/dev/null || true
    [ "$m" = $'\x7fELF' ] && printf '%s\n' "$f" >>"$list"
  done < <(find "$tree" -type f -print0)
  nelf=$(wc -l <"$list")
  nfiles=$(find "$tree" -type f | wc -l)
  echo "$nfiles files, $nelf ELF files"

  declare -A t=()
  t[cudadeps]=$(measure "$RUNS" 2 "'$cudadeps' scan --quiet '$tree'")
  printf '  %-34s %8.3f s\n' "cudadeps scan" "${t[cudadeps]}"
  if command -v libtree >/dev/null && works libtree; then
    t[libtree]=$(measure "$RUNS" 1 "xargs -d '\n' -n 1 libtree <'$list'")
    printf '  %-34s %8.3f s   %s the time of cudadeps\n' "libtree, one process per file" "${t[libtree]}" "$(ratio "${t[libtree]}" "${t[cudadeps]}")"
    t[libtree1]=$(measure "$RUNS" 1 "xargs -d '\n' libtree <'$list'")
    printf '  %-34s %8.3f s   %s the time of cudadeps\n' "libtree, one process for all" "${t[libtree1]}" "$(ratio "${t[libtree1]}" "${t[cudadeps]}")"
  else
    echo "  libtree: not installed or not working, skipped"
  fi
  if command -v ldd >/dev/null && works ldd; then
    t[ldd]=$(measure "$SLOW_RUNS" 0 "xargs -d '\n' -n 1 ldd <'$list'")
    printf '  %-34s %8.3f s   %s the time of cudadeps\n' "ldd, one process per file" "${t[ldd]}" "$(ratio "${t[ldd]}" "${t[cudadeps]}")"
  else
    echo "  ldd: not installed or not working, skipped"
  fi
  lddtree=()
  if command -v lddtree >/dev/null; then
    if works lddtree; then
      lddtree=(lddtree)
    elif [ -x /usr/bin/python3 ] && works /usr/bin/python3 "$(command -v lddtree)"; then
      # The python3 first on PATH may lack pyelftools; the system's has it.
      lddtree=(/usr/bin/python3 "$(command -v lddtree)")
    fi
  fi
  if [ ${#lddtree[@]} -gt 0 ]; then
    t[lddtree]=$(measure "$SLOW_RUNS" 0 "xargs -d '\n' ${lddtree[*]} <'$list'")
    printf '  %-34s %8.3f s   %s the time of cudadeps\n' "lddtree, one process for all" "${t[lddtree]}" "$(ratio "${t[lddtree]}" "${t[cudadeps]}")"
  else
    echo "  lddtree: not installed or not working, skipped"
  fi

  rss=$(peak_rss "$cudadeps" scan --quiet "$tree")
  read_bytes=$(bytes_read "$cudadeps" scan --quiet "$tree")
  per_file=$(awk -v b="$read_bytes" -v n="$nelf" 'BEGIN { if (n > 0) printf "%.0f", b / n; else print "nan" }')
  echo "  cudadeps peak RSS: $(awk -v k="$rss" 'BEGIN { if (k == "nan") print "n/a"; else printf "%.1f MiB", k / 1024 }')"
  echo "  cudadeps read: $read_bytes bytes in all, $per_file bytes per ELF file"

  if [ "$tree" = /usr/lib/x86_64-linux-gnu ]; then
    echo "  targets:"
    check() { if awk "BEGIN { exit !($2) }"; then echo "    PASS  $1"; else echo "    FAIL  $1"; fi; }
    [ -n "${t[libtree]:-}" ] && check "at least 5x faster than libtree (one process per file)" "${t[libtree]} >= 5 * ${t[cudadeps]}"
    [ -n "${t[ldd]:-}" ] && check "at least 50x faster than ldd" "${t[ldd]} >= 50 * ${t[cudadeps]}"
    [ "$rss" != nan ] && check "peak RSS under 64 MiB" "$rss < 64 * 1024"
    check "under 256 KiB read per ELF file" "$per_file < 256 * 1024"
  fi
  unset t
done
