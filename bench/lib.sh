# Shell functions of the fetch benchmarks.

# timed_run TOOL NAME CMD: runs CMD (a shell command) once with an empty
# $work/out and $work/cache, appends its wall time to times[NAME] and keeps
# the largest peak RSS of its runs in rss[NAME]; a failure stops the
# benchmark with CMD's stderr, naming TOOL. times and rss are associative
# arrays of the caller.
timed_run() {
  local tool=$1 name=$2 cmd=$3 s kb
  rm -rf "$work/out" "$work/cache" && mkdir -p "$work/out" "$work/cache"
  sync
  if ! /usr/bin/time -f "%e %M" -o "$work/time" bash -c "$cmd" >/dev/null 2>"$work/stderr"; then
    echo "$tool: $name failed:" >&2
    cat "$work/stderr" >&2
    exit 1
  fi
  read -r s kb <"$work/time"
  times[$name]="${times[$name]:-} $s"
  if [ "${rss[$name]:-0}" -lt "$kb" ]; then rss[$name]=$kb; fi
}
