#!/usr/bin/env bash
# Build a foreign tree from a pin list (pin.py's output): download every
# .deb it names, check each against its pinned sha256, unpack them (as
# dpkg-deb -x does) into a merged-/usr sysroot, make the library alternatives
# Debian's maintainer scripts would make, and build the tree's own
# ld.so.cache with the tree's own ldconfig run inside it with chroot (the
# arm64 one under qemu-aarch64-static). Needs root (chroot), dpkg-deb, curl,
# and for arm64 qemu-aarch64-static.
#
# Usage: build-tree.sh PINS TREE [DEBS]
#   PINS  a pin list (pins-trixie-amd64.txt)
#   TREE  the tree to build (removed first when it exists)
#   DEBS  where the .deb files are kept between runs (default TREE.debs)
# The older libstdc++ of pins-old-libstdc++.txt is unpacked beside the tree,
# in TREE.old, for compare's old_libstdc++ variant.
# Environment: MIRROR (default http://deb.debian.org/debian); when a file is
# gone from it, the snapshot.debian.org archive at the pin list's
# "resolved" timestamp is tried (fetch-debs.sh).
set -euo pipefail
pins=${1:?usage: build-tree.sh PINS TREE [DEBS]}
tree=${2:?usage: build-tree.sh PINS TREE [DEBS]}
debs=${3:-$tree.debs}
old=$(dirname "$0")/pins-old-libstdc++.txt
arch=$(sed -n '1s/^# [a-z]* \([a-z0-9]*\):.*/\1/p' "$pins")
case $arch in
  amd64) triplet=x86_64-linux-gnu ;;
  arm64) triplet=aarch64-linux-gnu ;;
  *) echo "build-tree.sh: $pins: no architecture on its first line" >&2; exit 1 ;;
esac
mkdir -p "$debs"

# debs_of PINS: the .deb files of a pin list for this architecture.
debs_of() {
  while read -r pkg ver parch sum size pool; do
    case $pkg in '#'*|'') continue ;; esac
    case $parch in "$arch"|all) echo "$debs/$(basename "$pool")" ;; esac
  done < "$1"
}

echo "== downloading into $debs"
"$(dirname "$0")/fetch-debs.sh" "$pins" "$debs" "$arch"
"$(dirname "$0")/fetch-debs.sh" "$old" "$debs" "$arch"

echo "== unpacking into $tree"
rm -rf "$tree"
for d in usr/lib usr/lib64 usr/bin usr/sbin etc/ld.so.conf.d etc/alternatives; do mkdir -p "$tree/$d"; done
for l in lib lib64 bin sbin; do ln -s "usr/$l" "$tree/$l"; done
# As dpkg-deb -x, but keeping the merged-/usr links: packages that still
# ship /lib/... (bookworm) unpack through them, as dpkg installs them.
for deb in $(debs_of "$pins"); do
  dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink -C "$tree"
done
rm -rf "$tree.old"
for deb in $(debs_of "$old"); do dpkg-deb -x "$deb" "$tree.old"; done
for l in lib lib64 bin sbin; do
  [ -L "$tree/$l" ] || { echo "build-tree.sh: a package replaced the /$l link with a directory" >&2; exit 1; }
done
printf 'include /etc/ld.so.conf.d/*.conf\n' > "$tree/etc/ld.so.conf"

# The alternatives the maintainer scripts of the BLAS/LAPACK packages make:
# libblas.so.3 -> /etc/alternatives/libblas.so.3-TRIPLET -> blas/libblas.so.3
# (absolute links, resolved inside the tree by its loader).
for f in "$tree/usr/lib/$triplet"/*/lib{blas,lapack}.so.3; do
  [ -f "$f" ] || continue
  name=$(basename "$f")
  [ -e "$tree/usr/lib/$triplet/$name" ] && continue
  ln -s "/usr/lib/$triplet/${f#"$tree/usr/lib/$triplet/"}" "$tree/etc/alternatives/$name-$triplet"
  ln -s "/etc/alternatives/$name-$triplet" "$tree/usr/lib/$triplet/$name"
done

echo "== ld.so.cache by the tree's own ldconfig"
case $arch in
  amd64) chroot "$tree" /usr/sbin/ldconfig ;;
  arm64)
    qemu=$(command -v qemu-aarch64-static)
    cp "$qemu" "$tree/.qemu-aarch64-static"
    chroot "$tree" /.qemu-aarch64-static /usr/sbin/ldconfig ;;
esac
n=$(find "$tree" -type f | wc -l)
echo "$tree: $n files, $(du -sh "$tree" | cut -f1), cache $(stat -c %s "$tree/etc/ld.so.cache") bytes"
