# Shell functions of the scan benchmarks (scan-vs-peers.sh, gpu-env.sh).
# They need bash, coreutils and python3; GNU time is used when present.

# median_wall RUNS WARMUP CMD...: the median wall time of CMD, in seconds,
# over RUNS runs after WARMUP untimed ones (output and exit status
# ignored).
median_wall() {
  local runs=$1 warmup=$2 i s e
  shift 2
  for ((i = 0; i < warmup; i++)); do "$@" >/dev/null 2>&1 || true; done
  for ((i = 0; i < runs; i++)); do
    s=$(date +%s%N)
    "$@" >/dev/null 2>&1 || true
    e=$(date +%s%N)
    echo $((e - s))
  done | sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) printf "%.4f\n", v[(NR + 1) / 2] / 1e9; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2e9 }'
}

# peak_rss CMD...: the peak resident memory of CMD, in KiB: GNU time's
# when installed (it forks), else the high-water mark python3 reads from
# /proc/PID/status while CMD runs (a child started by vfork counts its
# parent's peak in its rusage).
peak_rss() {
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o "${TMPDIR:-/tmp}/peak_rss.$$" "$@" >/dev/null 2>&1 || true
    tail -1 "${TMPDIR:-/tmp}/peak_rss.$$"
    rm -f "${TMPDIR:-/tmp}/peak_rss.$$"
    return
  fi
  python3 -c 'import subprocess, sys, time
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
peak = 0
while p.poll() is None:
    try:
        for line in open("/proc/%d/status" % p.pid):
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]))
    except OSError:
        pass
    time.sleep(0.001)
print(peak)' "$@"
}

# elf_files TREE: the regular files under TREE that start with the ELF
# magic, one a line (symbolic links are not followed, as cudadeps walks).
elf_files() {
  python3 - "$1" <<'EOF'
import os, sys
for d, dirs, files in os.walk(sys.argv[1]):
    for n in sorted(files):
        p = os.path.join(d, n)
        try:
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    print(p)
        except OSError:
            pass
EOF
}

# scan_roots CUDADEPS TREE: the objects a scan of TREE examines as roots
# (loadable shared objects and programs), one a line.
scan_roots() {
  { "$1" scan --json --symbols=false --no-runtime-opens "$2" 2>/dev/null || true; } |
    python3 -c 'import json, sys; print("\n".join(r["path"] for r in json.load(sys.stdin)["roots"]))'
}

# ratio A B: A / B as "12.3x", or n/a.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || a == "" || b == "" || b == 0) print "n/a"; else printf "%.1fx", a / b }'; }

# verdict NAME CONDITION: PASS or FAIL for an awk condition.
verdict() { if awk "BEGIN { exit !($2) }"; then echo "  PASS  $1"; else echo "  FAIL  $1"; fi; }

# ldd_loop LIST: ldd once per file of LIST (one process each).
ldd_loop() { xargs -d '\n' -n 1 ldd <"$1"; }

# libtree_loop LIST: libtree once per file of LIST.
libtree_loop() { xargs -d '\n' -n 1 libtree <"$1"; }

# lddr_loop LIST: `ldd -r` once per file of LIST, as many at a time as
# there are processors: the real loader binding every symbol.
lddr_loop() { xargs -d '\n' -P "$(nproc)" -n 1 ldd -r <"$1"; }

# lddr_one LIST: `ldd -r` given every file of LIST at once: what
# `xargs -P 16 ldd -r` runs, since without -n xargs packs the names into
# one command line (one ldd process, the files one after another).
lddr_one() { xargs -d '\n' ldd -r <"$1"; }

# unbound CMD...: CMD with the binding answers kept in $XDG_CACHE_HOME
# removed first: every symbol table is read again (what the interpreters
# said stays cached, as on any run but a machine's first).
unbound() { rm -f "$XDG_CACHE_HOME"/cudadeps/facts/bind-*; "$@"; }

# scan_table CUDADEPS TREE WORK RUNS SLOW_RUNS: times, in one run, the
# loader-only scan (also on one processor), the default scan (warm: the
# binding answers kept by the untimed runs before it), the default scan with
# no binding answer kept (unbound: every symbol table read), and the peers over
# TREE; prints a table and sets the globals T_LOADER, T_LOADER1, T_DEFAULT,
# T_DEFAULT1, T_COMPUTED, T_LDD, T_LIBTREE, T_LDDR, T_LDDR1, RSS_DEFAULT,
# RSS_COMPUTED, RSS_LOADER (KiB).
scan_table() {
  local cd=$1 tree=$2 work=$3 runs=$4 slow=$5
  local list=$work/elf-files roots=$work/roots
  elf_files "$tree" >"$list"
  scan_roots "$cd" "$tree" >"$roots"
  echo "$tree: $(find "$tree" -type f | wc -l) files in $(find "$tree" -type d | wc -l) directories, $(wc -l <"$list") ELF files, $(wc -l <"$roots") roots; $(nproc) processors"
  local loader=(scan --quiet --symbols=false --no-runtime-opens "$tree")
  T_LOADER=$(median_wall "$runs" 2 "$cd" "${loader[@]}")
  T_LOADER1=$(GOMAXPROCS=1 median_wall "$runs" 1 "$cd" "${loader[@]}")
  T_DEFAULT=$(median_wall "$runs" 2 "$cd" scan --quiet "$tree")
  T_DEFAULT1=$(GOMAXPROCS=1 median_wall "$runs" 1 "$cd" scan --quiet "$tree")
  T_COMPUTED=$(median_wall "$runs" 1 unbound "$cd" scan --quiet "$tree")
  T_LDD=nan T_LIBTREE=nan T_LDDR=nan T_LDDR1=nan
  command -v ldd >/dev/null && T_LDD=$(median_wall "$slow" 0 ldd_loop "$list")
  command -v libtree >/dev/null && T_LIBTREE=$(median_wall "$slow" 1 libtree_loop "$list")
  command -v ldd >/dev/null && T_LDDR=$(median_wall "$slow" 0 lddr_loop "$roots")
  command -v ldd >/dev/null && T_LDDR1=$(median_wall "$slow" 0 lddr_one "$roots")
  RSS_DEFAULT=$(GOMEMLIMIT=off peak_rss "$cd" scan --quiet "$tree")
  RSS_COMPUTED=$(GOMEMLIMIT=off unbound peak_rss "$cd" scan --quiet "$tree")
  RSS_LOADER=$(GOMEMLIMIT=off peak_rss "$cd" "${loader[@]}")
  printf '  %-46s %9s s\n' "cudadeps scan, loader only" "$T_LOADER"
  printf '  %-46s %9s s   %s faster on %d processors than on one\n' "cudadeps scan, loader only, GOMAXPROCS=1" "$T_LOADER1" "$(ratio "$T_LOADER1" "$T_LOADER")" "$(nproc)"
  printf '  %-46s %9s s   libtree/cudadeps %s\n' "libtree, a process per ELF file" "$T_LIBTREE" "$(ratio "$T_LIBTREE" "$T_LOADER")"
  printf '  %-46s %9s s   ldd/cudadeps %s\n' "ldd, a process per ELF file" "$T_LDD" "$(ratio "$T_LDD" "$T_LOADER")"
  printf '  %-46s %9s s\n' "cudadeps scan (symbols, run-time opens), warm" "$T_DEFAULT"
  printf '  %-46s %9s s   %s faster on %d processors than on one\n' "cudadeps scan, default, GOMAXPROCS=1" "$T_DEFAULT1" "$(ratio "$T_DEFAULT1" "$T_DEFAULT")" "$(nproc)"
  printf '  %-46s %9s s\n' "cudadeps scan, no binding answer kept" "$T_COMPUTED"
  printf '  %-46s %9s s   ldd -r/cudadeps %s warm, %s none kept\n' "ldd -r on every root, $(nproc) at a time" "$T_LDDR" "$(ratio "$T_LDDR" "$T_DEFAULT")" "$(ratio "$T_LDDR" "$T_COMPUTED")"
  printf '  %-46s %9s s   ldd -r/cudadeps %s warm, %s none kept\n' "ldd -r given every root at once (one process)" "$T_LDDR1" "$(ratio "$T_LDDR1" "$T_DEFAULT")" "$(ratio "$T_LDDR1" "$T_COMPUTED")"
  printf '  %-46s %9s MiB\n' "peak RSS, default scan, warm (GOMEMLIMIT=off)" "$(awk -v k="$RSS_DEFAULT" 'BEGIN { printf "%.1f", k / 1024 }')"
  printf '  %-46s %9s MiB\n' "peak RSS, default scan, no answer kept" "$(awk -v k="$RSS_COMPUTED" 'BEGIN { printf "%.1f", k / 1024 }')"
  printf '  %-46s %9s MiB\n' "peak RSS, loader only (GOMEMLIMIT=off)" "$(awk -v k="$RSS_LOADER" 'BEGIN { printf "%.1f", k / 1024 }')"
}
