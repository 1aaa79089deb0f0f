# Shell functions of the GPU proofs.
#
# clean_host WORK: make this host clean for CUDA inside the current private
# mount namespace (run under `unshare -m`): the CUDA toolkit's library
# directory becomes an empty tmpfs, the system cuDNN is hidden by overlay
# whiteouts, and ld.so.cache is rebuilt without them and bound over
# /etc/ld.so.cache. WORK holds the overlay and the new cache.
clean_host() {
  local work=$1 tk libdir
  mount --make-rprivate /
  tk=$(readlink -f /usr/local/cuda/targets/x86_64-linux/lib)
  libdir=$(readlink -f /lib/x86_64-linux-gnu)
  mount -t tmpfs none "$tk" || return 1
  mkdir -p "$work/ov/upper" "$work/ov/work"
  for f in "$libdir"/libcudnn*; do mknod "$work/ov/upper/$(basename "$f")" c 0 0; done
  mount -t overlay overlay -o "lowerdir=$libdir,upperdir=$work/ov/upper,workdir=$work/ov/work" "$libdir" || return 1
  ldconfig -C "$work/ld.so.cache" || return 1
  mount --bind "$work/ld.so.cache" /etc/ld.so.cache || return 1
  echo "toolkit directory $tk: $(ls "$tk" | wc -l) files; system cuDNN files: $(ls "$libdir"/libcudnn* 2>/dev/null | wc -l)"
  echo "ld.so.cache entries for cudnn/cublas/cudart/nvrtc: $(ldconfig -p | grep -cE 'libcudnn|libcublas|libcudart|libnvrtc')"
}

# hide_dirs SITE WORK DIR...: move each DIR (relative to SITE) under
# WORK/hidden, and set MOVED to "NOW:DIR" pairs for the packers.
hide_dirs() {
  local site=$1 work=$2 d k
  shift 2
  mkdir -p "$work/hidden"
  MOVED=()
  for d in "$@"; do
    k=$(echo "$d" | tr / _)
    mv "$site/$d" "$work/hidden/$k" || return 1
    MOVED+=("$work/hidden/$k:$d")
  done
}

# restore_dirs SITE WORK DIR...: put back what hide_dirs moved, unless
# something took its place.
restore_dirs() {
  local site=$1 work=$2 d k
  shift 2
  for d in "$@"; do
    k=$(echo "$d" | tr / _)
    [ -d "$work/hidden/$k" ] && [ ! -e "$site/$d" ] && mv "$work/hidden/$k" "$site/$d"
  done
  return 0
}
