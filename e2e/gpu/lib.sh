# Shell functions of the GPU proofs.
#
# proof_setup CUDADEPS [--clean]: the proofs' common start. With --clean it
# runs the calling script again in a private mount namespace (clean_host
# then hides the system's CUDA there). Sets CUDADEPS, MODE (stock or
# clean), PYTHON, OUT, WORK, PREFIX, SITE and HIDE (default:
# nvidia/cu13/lib nvidia/cudnn/lib nvidia/cusparselt/lib), and a download
# cache under WORK.
proof_setup() {
  CUDADEPS=$(readlink -f "$1")
  MODE=${2:-stock}
  if [ "$MODE" = --clean ] && [ -z "${CUDADEPS_CLEAN_NS:-}" ]; then
    exec unshare -m env CUDADEPS_CLEAN_NS=1 bash "$0" "$CUDADEPS" --clean
  fi
  MODE=${MODE#--} # "stock" or "clean": part of the names of the logs
  PYTHON=${PYTHON:-$(command -v python3)}
  OUT=${OUT:-$(mktemp -d)}
  mkdir -p "$OUT"
  WORK=$(mktemp -d)
  PREFIX=$WORK/prefix
  export XDG_CACHE_HOME=$WORK/cache
  SITE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
  HIDE=${HIDE:-nvidia/cu13/lib nvidia/cudnn/lib nvidia/cusparselt/lib}
}

log() { printf '\n=== %s\n' "$*"; }

# port: a free TCP port on 127.0.0.1, for a local index or mirror.
port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# nvsnap: a digest of the NVIDIA distributions under SITE (the nvidia* and
# cuda_toolkit* entries at its top, and every path under nvidia/ with its
# kind, size and link target; byte-code caches left out), to compare the
# tree before and after.
nvsnap() { (cd "$SITE" && find . -maxdepth 1 \( -name 'nvidia*' -o -name 'cuda_toolkit*' \) | sort; find nvidia -name __pycache__ -prune -o -printf '%p %y %s %l\n' 2>/dev/null | sort) | sha256sum | cut -c1-16; }

# snapshot: a digest of the packages' files under SITE (names, kinds,
# sizes, link targets), to compare the tree before and after.
snapshot() { (cd "$SITE" && find nvidia torch cupy jax_plugins -name __pycache__ -prune -o -printf '%p %y %s %l\n' 2>/dev/null | sort | sha256sum | cut -c1-16); }

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
