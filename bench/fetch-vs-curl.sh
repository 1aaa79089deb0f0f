#!/usr/bin/env bash
# Times cudadeps' fetch path (download + sha256 verify + extract, through the
# fetch package) against `curl -s URL | xz -dc | tar x` on one ~200 MB
# .tar.xz served from 127.0.0.1, and prints the ratio (target: <= 1.5x) and
# each run's peak RSS (target: < 64 MB).
#
#   bench/fetch-vs-curl.sh                 the default ~400 MB tar (~200 MB .tar.xz)
#   BENCH_MB=100 bench/fetch-vs-curl.sh    a smaller archive
#   BENCH_DIR=/var/tmp/b bench/fetch-vs-curl.sh   keep the generated archives there (reused)
#   REPEAT=5 ...                           rounds (default 3); the median is reported
#
# Needs go, curl, xz, tar and GNU time (/usr/bin/time).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
top=$(dirname "$here")
mb=${BENCH_MB:-400}
repeat=${REPEAT:-3}
work=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work/srv"
for tool in curl xz tar /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "fetch-vs-curl: $tool is required" >&2; exit 1; }
done

bin=$work/fetchbench
if [ -n "${FETCHBENCH:-}" ]; then
  cp "$FETCHBENCH" "$bin"
else
  (cd "$top" && go build -o "$bin" ./bench/fetchbench)
fi

# One archive of the full size, and four different archives of a quarter of
# it for the parallel variant. Single-threaded xz -6: one block, like
# `tar cJf`.
archive=$work/srv/bench-$mb.tar.xz
if [ ! -s "$archive" ]; then
  echo "generating a $mb MB tar and compressing it with xz -6 (once; kept in $work)..." >&2
  "$bin" gen -mb "$mb" | xz -6 -T1 >"$archive.tmp" && mv "$archive.tmp" "$archive"
fi
quarter=$((mb / 4))
for i in 1 2 3 4; do
  part=$work/srv/part$i-$quarter.tar.xz
  if [ ! -s "$part" ]; then
    "$bin" gen -mb "$quarter" -seed $((i + 1)) | xz -6 -T1 >"$part.tmp" && mv "$part.tmp" "$part"
  fi
done

"$bin" serve "$work/srv" >"$work/url" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$work/url" ] && break; sleep 0.1; done
base=$(cat "$work/url")

triple() { # URL SHA256 SIZE of a served file
  echo "$base/$(basename "$1") $(sha256sum "$1" | cut -d' ' -f1) $(stat -c %s "$1")"
}
one=$(triple "$archive")
four="" four_urls=""
for i in 1 2 3 4; do
  t=$(triple "$work/srv/part$i-$quarter.tar.xz")
  four="$four $t" four_urls="$four_urls ${t%% *}"
done
url=${one%% *}

# The variants: shell commands, each run with a fresh output directory,
# store and download cache.
names=(
  "curl | xz -dc | tar x"
  "fetch: install, system xz (streaming)"
  "fetch: download, then extract (system xz)"
  "fetch: install, pure-Go xz"
  "4 archives: curl | xz -dc | tar x, in turn"
  "4 archives: fetch install, 4 in parallel"
  "4 archives: fetch install, 1 at a time"
)
declare -A cmd
cmd[${names[0]}]="curl -sf '$url' | xz -dc | tar x -C '$work/out'"
cmd[${names[1]}]="'$bin' fetch -store '$work/out' -cache '$work/cache' $one"
cmd[${names[2]}]="'$bin' fetch -mode sequential -store '$work/out/x' -cache '$work/cache' $one"
cmd[${names[3]}]="'$bin' fetch -xz go -store '$work/out' -cache '$work/cache' $one"
cmd[${names[4]}]="for u in $four_urls; do curl -sf \$u | xz -dc | tar x -C '$work/out'; done"
cmd[${names[5]}]="'$bin' fetch -parallel 4 -store '$work/out' -cache '$work/cache' $four"
cmd[${names[6]}]="'$bin' fetch -parallel 1 -store '$work/out' -cache '$work/cache' $four"

size=$(stat -c %s "$archive")
echo "archive: $(awk "BEGIN{printf \"%.1f\", $size/1e6}") MB .tar.xz ($mb MiB unpacked; 4 x $quarter MiB for the 4-archive rows), served from $base"
echo "xz: $(xz --version | head -1); cpus: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg); median of $repeat rounds"
echo

# Rounds run every variant once, in turn, so that a change in the machine's
# load touches all of them alike; each variant's median is reported, with
# the largest peak RSS of its runs (the largest process, xz included).
declare -A times rss
for round in $(seq "$repeat"); do
  for name in "${names[@]}"; do
    timed_run fetch-vs-curl "$name" "${cmd[$name]}"
  done
  echo "round $round of $repeat done" >&2
done
declare -A secs
for name in "${names[@]}"; do
  secs[$name]=$(printf '%s\n' ${times[$name]} | sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
  printf '%-44s %7.2f s  (runs:%s)   peak RSS %6.1f MB\n' "$name" "${secs[$name]}" "${times[$name]}" "$(awk "BEGIN{print ${rss[$name]}/1024}")"
done

ratio() { awk "BEGIN{printf \"%.2f\", ${secs[$1]} / ${secs[$2]}}"; }
echo
echo "ratio, fetch install (system xz) / curl pipeline:        $(ratio "fetch: install, system xz (streaming)" "curl | xz -dc | tar x")x  (target <= 1.5x)"
echo "ratio, download then extract / curl pipeline:            $(ratio "fetch: download, then extract (system xz)" "curl | xz -dc | tar x")x"
echo "ratio, pure-Go xz / curl pipeline:                       $(ratio "fetch: install, pure-Go xz" "curl | xz -dc | tar x")x"
echo "ratio, 4 archives in parallel / 4 curl pipelines in turn: $(ratio "4 archives: fetch install, 4 in parallel" "4 archives: curl | xz -dc | tar x, in turn")x"
