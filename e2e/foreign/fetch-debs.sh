#!/usr/bin/env bash
# Download the .deb files of a pin list (pin.py's output) for its
# architecture (and "all") into DEBS, each checked against its pinned
# sha256: from deb.debian.org, else from snapshot.debian.org at the time
# the list was resolved (Debian's archive drops superseded versions). A
# file already there with the right sha256 is kept. Needs curl.
#
# Usage: fetch-debs.sh PINS DEBS [ARCH]
#   ARCH  the architecture to fetch (default: the one the list's first line
#         names, "# SUITE ARCH: ...")
# Environment: MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
pins=${1:?usage: fetch-debs.sh PINS DEBS [ARCH]}
debs=${2:?usage: fetch-debs.sh PINS DEBS [ARCH]}
mirror=${MIRROR:-http://deb.debian.org/debian}
arch=${3:-$(sed -n '1s/^# [a-z]* \([a-z0-9]*\):.*/\1/p' "$pins")}
[ -n "$arch" ] || { echo "fetch-debs.sh: $pins: no architecture on its first line" >&2; exit 1; }
stamp=$(sed -n 's/^# resolved \([0-9TZ]*\).*/\1/p' "$pins")
mkdir -p "$debs"
fetched=0 kept=0
while read -r pkg ver parch sum size pool; do
  case $pkg in '#'*|'') continue ;; esac
  case $parch in "$arch"|all) ;; *) continue ;; esac
  out=$debs/$(basename "$pool")
  if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --status; then kept=$((kept + 1)); continue; fi
  ok=
  for url in "$mirror/$pool" "https://snapshot.debian.org/archive/debian/$stamp/$pool"; do
    if curl -fsSL --retry 2 -o "$out.part" "$url" && echo "$sum  $out.part" | sha256sum -c --status; then
      mv "$out.part" "$out"; ok=1; break
    fi
  done
  if [ -z "$ok" ]; then
    rm -f "$out.part"
    echo "fetch-debs.sh: $pkg $ver ($parch): no copy with sha256 $sum at $mirror or snapshot.debian.org" >&2
    exit 1
  fi
  fetched=$((fetched + 1))
done < "$pins"
echo "$pins: fetched $fetched, kept $kept"
