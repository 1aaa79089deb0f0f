#!/usr/bin/env bash
# Times cudadeps' .tar.zst path (download + sha256 verify + in-process zstd
# decode + extract, through the fetch package) against
# `curl -s URL | zstd -dc | tar x` on one archive served from 127.0.0.1, and
# the bare decoders against each other (`zstd -dc >/dev/null` and the same
# decoder settings as cudadeps in Go, `fetchbench unzstd`), with each run's
# peak RSS.
#
#   bench/fetch-zstd.sh                  a ~400 MB tar, zstd -3 and -19
#   BENCH_MB=100 LEVELS="3" bench/fetch-zstd.sh
#   REPEAT=5 ...                         rounds (default 3); the median is reported
#
# Needs go, curl, zstd, tar and GNU time (/usr/bin/time).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
top=$(dirname "$here")
mb=${BENCH_MB:-400}
repeat=${REPEAT:-3}
levels=${LEVELS:-3 19}
work=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work/srv"
for tool in curl zstd tar /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "fetch-zstd: $tool is required" >&2; exit 1; }
done
bin=$work/fetchbench
(cd "$top" && go build -o "$bin" ./bench/fetchbench)

"$bin" serve "$work/srv" >"$work/url" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$work/url" ] && break; sleep 0.1; done
base=$(cat "$work/url")

echo "zstd: $(zstd --version); cpus: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg); median of $repeat rounds"
for level in $levels; do
  archive=$work/srv/bench-$mb-$level.tar.zst
  if [ ! -s "$archive" ]; then
    "$bin" gen -mb "$mb" | zstd -q -"$level" -T1 >"$archive.tmp" && mv "$archive.tmp" "$archive"
  fi
  url=$base/$(basename "$archive")
  one="$url $(sha256sum "$archive" | cut -d' ' -f1) $(stat -c %s "$archive")"
  names=("zstd -dc >/dev/null" "fetchbench unzstd (Go, same settings)" "curl | zstd -dc | tar x" "fetch: install (streaming)")
  declare -A cmd=(
    ["${names[0]}"]="zstd -dc '$archive' >/dev/null"
    ["${names[1]}"]="'$bin' unzstd '$archive'"
    ["${names[2]}"]="curl -sf '$url' | zstd -dc | tar x -C '$work/out'"
    ["${names[3]}"]="'$bin' fetch -store '$work/out' -cache '$work/cache' $one"
  )
  declare -A times=() rss=()
  for _ in $(seq "$repeat"); do
    for name in "${names[@]}"; do
      timed_run fetch-zstd "$name" "${cmd[$name]}"
    done
  done
  echo
  echo "zstd -$level: $(awk "BEGIN{printf \"%.1f\", $(stat -c %s "$archive")/1e6}") MB .tar.zst, $mb MiB unpacked"
  for name in "${names[@]}"; do
    med=$(printf '%s\n' ${times[$name]} | sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
    printf '  %-40s %7.2f s  %7.0f MiB/s  (runs:%s)   peak RSS %6.1f MB\n' "$name" "$med" "$(awk "BEGIN{print $mb/$med}")" "${times[$name]}" "$(awk "BEGIN{print ${rss[$name]}/1024}")"
  done
done
