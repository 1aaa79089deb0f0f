#!/usr/bin/env bash
# bind-vs-ldd-r.sh: what binding every symbol costs `cudadeps scan`, against
# `ldd -r` over the same files, in one run on the same trees.
#
# For each tree (default: /usr/lib/x86_64-linux-gnu; on the GPU machine,
# the environment's site-packages):
#
#   scan        `cudadeps scan --symbols=false --json DIR`: closures only.
#   scan+bind   `cudadeps scan --json DIR`: closures and every symbol bound
#               (the default).
#   ldd -r      the host's ld.so as `ldd -r` runs it (LD_TRACE_LOADED_OBJECTS
#               LD_WARN LD_BIND_NOW) once per root of the scan (the list is
#               made beforehand and not timed), one process each, N at a
#               time (N = the processor count): the real loader binding the
#               same objects.
#
# Wall times are medians of RUNS runs taken one after another; compare the
# ratios of one run. Then the peak resident memory of scan+bind (GNU time).
# Targets (a whole torch environment, about 860 ELF files, on a 16-core
# machine): scan+bind under 1 s, peak RSS under 128 MiB.
#
# Usage: bench/bind-vs-ldd-r.sh [TREE...]
# Environment: RUNS (default 5), LDSO (default /lib64/ld-linux-x86-64.so.2),
# CUDADEPS (a built binary to measure; default: build one, which needs Go).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
LDSO=${LDSO:-/lib64/ld-linux-x86-64.so.2}
jobs=$(nproc)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cudadeps=${CUDADEPS:-}
if [ -z "$cudadeps" ]; then
  echo "== building cudadeps"
  go build -o "$work/cudadeps" ./cmd/cudadeps
  cudadeps="$work/cudadeps"
fi

trees=("$@")
[ ${#trees[@]} -eq 0 ] && trees=(/usr/lib/x86_64-linux-gnu)

now() { date +%s.%N; }

# median CMD...: the median wall time of RUNS runs, in seconds.
median() {
  local times=()
  for _ in $(seq "$RUNS"); do
    local t0 t1
    t0=$(now)
    "$@" >/dev/null 2>&1 || true
    t1=$(now)
    times+=("$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a - b}')")
  done
  printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

lddr_all() {
  xargs -0 -P "$jobs" -n 8 sh -c 'for f; do LD_TRACE_LOADED_OBJECTS=1 LD_WARN=yes LD_BIND_NOW=yes "$0" "$f"; done' "$LDSO" <"$1"
}

for tree in "${trees[@]}"; do
  echo "== $tree"
  "$cudadeps" scan --json "$tree" >"$work/scan.json" 2>/dev/null || true
  python3 - "$work/scan.json" "$work/roots" <<'EOF'
import json, sys
rep = json.load(open(sys.argv[1]))
roots = [r["path"] for r in rep["roots"]]
open(sys.argv[2], "wb").write(b"\0".join(p.encode() for p in roots) + b"\0")
undef = sum(len(r.get("undefined_symbols") or []) for r in rep["roots"])
bound = sum(1 for r in rep["roots"] if r.get("bound_in"))
print(f"{len(roots)} roots ({bound} bound in their interpreter), {undef} undefined symbols")
EOF
  t_scan=$(median "$cudadeps" scan --symbols=false --json "$tree")
  t_bind=$(median "$cudadeps" scan --json "$tree")
  t_ldd=$(median lddr_all "$work/roots")
  rss=$(/usr/bin/time -f '%M' -o "$work/rss" "$cudadeps" scan --json "$tree" >/dev/null 2>&1; tail -1 "$work/rss")
  rss_plain=$(/usr/bin/time -f '%M' -o "$work/rss" "$cudadeps" scan --symbols=false --json "$tree" >/dev/null 2>&1; tail -1 "$work/rss")
  printf '  %-12s %8.3f s\n' "scan" "$t_scan" "scan+bind" "$t_bind" "ldd -r (x$jobs)" "$t_ldd"
  printf '  binding adds %.3f s; scan+bind is %.1fx faster than ldd -r\n' \
    "$(awk -v a="$t_bind" -v b="$t_scan" 'BEGIN {print a - b}')" "$(awk -v a="$t_ldd" -v b="$t_bind" 'BEGIN {print a / b}')"
  printf '  peak RSS: scan %s KiB, scan+bind %s KiB\n' "$rss_plain" "$rss"
done
