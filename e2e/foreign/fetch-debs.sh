#!/usr/bin/env bash
# Download the .deb files of a pin list (pin.py's output) for its
# architecture (and "all") into DEBS, each checked against its sha256. A
# file already there with the right sha256 is kept. Needs curl, and
# python3 for --current.
#
# Usage: fetch-debs.sh [--current] [--dry-run] PINS DEBS [ARCH]
#   --current  the packages of PINS at the versions the suite's Packages
#              indexes list now (pin.py with NODEPS=1), each checked against
#              the index's sha256: Debian replaces a version in a point
#              release and drops the old file. The list fetched is written
#              to DEBS/$(basename PINS), where the tests read it, and each
#              package whose version changed is named. Without it: exactly
#              the pinned files, from the mirror, else from
#              snapshot.debian.org at the time the list was resolved.
#   --dry-run  choose the mirror and the files, print what would be
#              downloaded and its size, download no .deb (with --current
#              the Packages indexes are downloaded: about 20 MB).
#   ARCH       the architecture to fetch (default: the one the list's first
#              line names, "# SUITE ARCH: ...")
# The mirror: $MIRROR when set; else the first Debian mirror apt is
# configured with ($APT_ETC, default /etc/apt: sources.list,
# sources.list.d/*.list and *.sources) whose Release of the list's suite
# carries ARCH and the list's components and is not older than the Release
# the list was resolved from (a stale mirror or a snapshot is passed over),
# with deb.debian.org behind it; else http://deb.debian.org/debian. A
# download that fails or does not match its sha256 is tried three times at
# each, RETRY_SECONDS (default 5) times the try apart. Exits 1, naming the
# package, when one cannot be had.
set -euo pipefail
current= dry=
while [ $# -gt 0 ]; do
  case $1 in
    --current) current=1; shift ;;
    --dry-run) dry=1; shift ;;
    --) shift; break ;;
    -*) echo "fetch-debs.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
usage="usage: fetch-debs.sh [--current] [--dry-run] PINS DEBS [ARCH]"
pins=${1:?$usage}
debs=${2:?$usage}
here=$(cd "$(dirname "$0")" && pwd)
default_mirror=http://deb.debian.org/debian
apt_etc=${APT_ETC:-/etc/apt}
retry_wait=${RETRY_SECONDS:-5}
arch=${3:-$(sed -n '1s/^# [a-z]* \([a-z0-9]*\):.*/\1/p' "$pins")}
suite=$(sed -n '1s/^# \([a-z]*\) .*/\1/p' "$pins")
[ -n "$arch" ] && [ -n "$suite" ] || { echo "fetch-debs.sh: $pins: no suite and architecture on its first line" >&2; exit 1; }
stamp=$(sed -n 's/^# resolved \([0-9TZ]*\).*/\1/p' "$pins")
pinned_release=$(sed -n 's/^# Debian .*, Release of \(.*\)$/\1/p' "$pins")
# The components the pinned files come from (pool/COMPONENT/...).
components=$(awk '!/^#/ && NF == 6 { split($6, p, "/"); print p[2] }' "$pins" | sort -u | tr '\n' ' ')

# apt_uris prints the URIs of apt's "deb" sources, in the order apt reads
# its files: one-line entries ("deb [OPTIONS] URI SUITE COMPONENT...") and
# deb822 stanzas (Types:, URIs:, Enabled:).
apt_uris() {
  local f
  for f in "$apt_etc/sources.list" "$apt_etc"/sources.list.d/*; do
    [ -f "$f" ] || continue
    case $f in
      */sources.list|*.list)
        sed -n 's/^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\{0,1\}\([^[:space:]]\+\).*/\2/p' "$f" ;;
      *.sources)
        awk '
          function flush(   n, u, i) {
            if (types ~ /(^|[ \t])deb([ \t]|$)/ && enabled != "no") {
              n = split(uris, u, /[ \t]+/)
              for (i = 1; i <= n; i++) if (u[i] != "") print u[i]
            }
            types = uris = enabled = last = ""
          }
          /^#/ { next }
          /^[ \t]*$/ { flush(); next }
          /^[ \t]/ { if (last == "uris") uris = uris " " $0; else if (last == "types") types = types " " $0; next }
          {
            key = tolower($0); sub(/:.*/, "", key)
            val = $0; sub(/^[^:]*:[ \t]*/, "", val)
            last = key
            if (key == "types") types = val
            else if (key == "uris") uris = val
            else if (key == "enabled") enabled = tolower(val)
          }
          END { flush() }' "$f" ;;
    esac
  done
}

# serves URI: URI's Release of the suite is Debian's, carries the
# architecture and the components, and is not older than the pin list's.
serves() {
  local rel date c
  rel=$(curl -fsSL --connect-timeout 10 --max-time 60 --retry 2 "${1%/}/dists/$suite/Release" 2>/dev/null) || return 1
  grep -qx 'Origin: Debian' <<<"$rel" || return 1
  grep -Eq "^Architectures:(.* )?$arch( |\$)" <<<"$rel" || return 1
  for c in $components; do
    grep -Eq "^Components:(.* )?$c( |\$)" <<<"$rel" || return 1
  done
  [ -n "$pinned_release" ] || return 0
  date=$(sed -n 's/^Date: //p' <<<"$rel")
  [ -n "$date" ] && [ "$(date -ud "$date" +%s)" -ge "$(date -ud "$pinned_release" +%s)" ]
}

sources=()
if [ -n "${MIRROR:-}" ]; then
  mirror=$MIRROR
  sources=("$mirror")
  echo "mirror: $mirror (\$MIRROR)"
else
  mirror=
  seen=" "
  for uri in $(apt_uris); do
    case $seen in *" $uri "*) continue ;; esac
    seen="$seen$uri "
    if serves "$uri"; then mirror=${uri%/}; break; fi
  done
  if [ -n "$mirror" ]; then
    sources=("$mirror")
    [ "$mirror" = "$default_mirror" ] || sources+=("$default_mirror")
    echo "mirror: $mirror (apt's sources)"
  else
    mirror=$default_mirror
    sources=("$mirror")
    echo "mirror: $mirror (apt's sources name no Debian mirror serving $suite $arch${pinned_release:+ as of $pinned_release})"
  fi
fi

mkdir -p "$debs"
list=$pins
if [ -n "$current" ]; then
  # The pinned packages, resolved anew against the suite's indexes.
  seeds=$(mktemp)
  resolved=$(mktemp)
  trap 'rm -f "$seeds" "$resolved" "$resolved.err"' EXIT
  awk -v arch="$arch" '!/^#/ && NF == 6 && ($3 == arch || $3 == "all") { print $1 }' "$pins" > "$seeds"
  ok=
  for try in 1 2 3; do
    if MIRROR=$mirror COMPONENTS=$components NODEPS=1 python3 "$here/pin.py" "$suite" "$arch" "$seeds" > "$resolved" 2> "$resolved.err"; then
      ok=1; break
    fi
    grep -q 'is not in' "$resolved.err" && break
    [ "$try" = 3 ] || sleep $((try * retry_wait * 2))
  done
  if [ -z "$ok" ]; then
    cat "$resolved.err" >&2
    echo "fetch-debs.sh: could not resolve $pins's packages against $mirror/dists/$suite" >&2
    exit 1
  fi
  # What Debian replaced since the list was pinned.
  awk 'FNR == 1 { n++ } /^#/ || NF != 6 { next } n == 1 { v[$1] = $2; next } ($1 in v) && v[$1] != $2 { printf "re-resolved: %s %s, pinned %s\n", $1, $2, v[$1] }' "$pins" "$resolved"
  if [ -n "$dry" ]; then
    list=$resolved
  else
    list=$debs/$(basename "$pins")
    cp "$resolved" "$list"
    chmod 644 "$list"
  fi
fi

fetched=0 kept=0 bytes=0 start=$SECONDS
while read -r pkg ver parch sum size pool; do
  case $pkg in '#'*|'') continue ;; esac
  case $parch in "$arch"|all) ;; *) continue ;; esac
  out=$debs/$(basename "$pool")
  if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --status; then kept=$((kept + 1)); continue; fi
  if [ -n "$dry" ]; then
    echo "would fetch $pool ($size bytes)"
    fetched=$((fetched + 1)) bytes=$((bytes + size))
    continue
  fi
  urls=()
  for m in "${sources[@]}"; do urls+=("$m/$pool"); done
  # A pinned file Debian has replaced is still on snapshot.debian.org.
  [ -n "$current" ] || [ -z "$stamp" ] || urls+=("https://snapshot.debian.org/archive/debian/$stamp/$pool")
  ok=
  for url in "${urls[@]}"; do
    for try in 1 2 3; do
      if curl -fsSL --connect-timeout 20 --retry 2 -o "$out.part" "$url" && echo "$sum  $out.part" | sha256sum -c --status; then
        mv "$out.part" "$out"; ok=1; break 2
      fi
      echo "fetch-debs.sh: $url: try $try failed (download or sha256)" >&2
      [ "$try" = 3 ] || sleep $((try * retry_wait))
    done
  done
  if [ -z "$ok" ]; then
    rm -f "$out.part"
    echo "fetch-debs.sh: $pkg $ver ($parch): no copy with sha256 $sum at ${urls[*]}" >&2
    exit 1
  fi
  fetched=$((fetched + 1)) bytes=$((bytes + size))
done < "$list"
if [ -n "$dry" ]; then
  echo "$pins: would fetch $fetched ($bytes bytes), keep $kept, into $debs"
else
  echo "$pins: fetched $fetched ($bytes bytes) in $((SECONDS - start)) s, kept $kept, into $debs"
fi
