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
