#!/bin/sh
# Download Debian trixie (glibc 2.41) packages for the loader tests that need
# a glibc of 2.37 or later, checking each against its pinned sha256. Needs apt
# and network access to Debian's archive. Usage: fetch-trixie.sh DEST_DIR
# Each package lands as DEST_DIR/<arch>/<package>_<version>_<arch>.deb; files
# already present and matching their checksum are kept. Point the tests at
# DEST_DIR with CUDADEPS_TRIXIE_DEBS.
set -eu
dest=${1:?usage: fetch-trixie.sh DEST_DIR}
mkdir -p "$dest/amd64" "$dest/arm64"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
mkdir -p "$state/cache/archives/partial" "$state/etc"
touch "$state/status"
# arch  package=version  sha256
while read -r arch pkg sum; do
  out="$dest/$arch/$(echo "$pkg" | sed 's/=/_/')_$arch.deb"
  if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --status; then continue; fi
  opts="-qq -oAPT::Sandbox::User=root -oAPT::Architecture=$arch -oAPT::Architectures=$arch -oDir::State::Lists=$state/lists.$arch -oDir::Cache=$state/cache -oDir::Etc::SourceList=$state/etc/sources.list.$arch -oDir::Etc::SourceParts=/nonexistent -oDir::State::status=$state/status"
  if [ ! -d "$state/lists.$arch" ]; then
    mkdir -p "$state/lists.$arch/partial"
    echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" > "$state/etc/sources.list.$arch"
    apt-get $opts update
  fi
  tmp="$state/dl.$arch"
  rm -rf "$tmp" && mkdir -p "$tmp"
  (cd "$tmp" && apt-get $opts download "$pkg") >/dev/null
  mv "$tmp"/*.deb "$out"
  echo "$sum  $out" | sha256sum -c --quiet
done <<LIST
amd64 libc6=2.41-12+deb13u4 967aa62605721081c3eb2a17650611a792aa802d76a6511d1840242623d204c9
amd64 libc-bin=2.41-12+deb13u4 dc8c79647fe3a5f37f72a400414f70263d0212f010ff2c09f990e30d91e38d1c
arm64 libc6=2.41-12+deb13u4 8784eda966b189c777a384dac5ce009e8fc9b52d006926c5a013e7fa8aa688cc
arm64 libc-bin=2.41-12+deb13u4 3aba9182d6989d7c512178defdcb9d02b6906816bc8b2778a82a6c39582c880c
LIST
