#!/usr/bin/env bash
# The GPU host's evidence for the import model (docs/python-imports.md):
#
#   1. `cudadeps scan` of torch, torchvision and torchaudio exits 0, and
#      names the objects that load only in their import (libtorch_nvshmem.so
#      among them, with the symbols of libc10_cuda.so it binds);
#   2. the real loader agrees: `ldd -r` of libtorch_nvshmem.so alone lists
#      undefined symbols, and none with libc10_cuda.so (which torch._C
#      loads first) in LD_PRELOAD;
#   3. the frameworks' own loaders as installed here: torch's
#      _load_global_deps and _preload_cuda_deps (is the load by path a
#      fallback only, or also done after a successful load?), JAX's _load,
#      CUDA Python's site search; and which process loaded each CUDA library
#      at `import torch` (LD_DEBUG=files: torch's Python code by path, or
#      the loader for a NEEDED entry);
#   4. `cudadeps scan` of the whole site-packages, for the record.
#
# Usage: e2e/gpu/pyimport.sh CUDADEPS
# Environment: PYTHON (default python3), OUT (logs).
# Look at: $OUT/summary.txt (one line per check, PASS or FAIL), then the
# files it names.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
proof_setup "$@"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
check() { # label status detail
  local verdict=FAIL
  [ "$2" = 0 ] && verdict=PASS
  printf '%s %s: %s\n' "$verdict" "$1" "$3" | tee -a "$SUMMARY"
}

log "1. scan torch, torchvision, torchaudio"
"$CUDADEPS" scan "$SITE/torch" "$SITE/torchvision" "$SITE/torchaudio" --python "$PYTHON" > "$OUT/scan-torch.txt" 2>&1
code=$?
"$CUDADEPS" scan "$SITE/torch" "$SITE/torchvision" "$SITE/torchaudio" --python "$PYTHON" --json > "$OUT/scan-torch.json" 2> "$OUT/scan-torch.err"
check "scan torch torchvision torchaudio exits 0" "$code" "exit $code (scan-torch.txt)"
"$PYTHON" - "$OUT/scan-torch.json" > "$OUT/only-in-import.txt" <<'EOF'
import json, sys
rep = json.load(open(sys.argv[1]))
for r in rep["roots"]:
    imp = r.get("import") or {}
    if imp.get("only_in_import"):
        print(r["path"], json.dumps(imp.get("alone")))
EOF
grep -q libtorch_nvshmem.so "$OUT/only-in-import.txt"
check "libtorch_nvshmem.so loads only in its import" "$?" "$(wc -l < "$OUT/only-in-import.txt") object(s) in only-in-import.txt"

log "2. the real loader on libtorch_nvshmem.so"
NVSHMEM=$SITE/torch/lib/libtorch_nvshmem.so
C10=$SITE/torch/lib/libc10_cuda.so
ldd -r "$NVSHMEM" > "$OUT/ldd-r-nvshmem-alone.txt" 2>&1
alone=$(grep -c 'undefined symbol' "$OUT/ldd-r-nvshmem-alone.txt")
# torch._C's closure, which loads libc10_cuda.so, cannot be preloaded into
# ldd's own shell (it needs the interpreter's symbols): libc10_cuda.so, what
# the symbols come from, is, and the traced process inherits it.
LD_PRELOAD="$C10" ldd -r "$NVSHMEM" > "$OUT/ldd-r-nvshmem-after-c10.txt" 2>&1
ran=$?
after=$(grep -c 'undefined symbol' "$OUT/ldd-r-nvshmem-after-c10.txt")
[ "$alone" -gt 0 ] && [ "$ran" = 0 ] && [ "$after" = 0 ]
check "ldd -r libtorch_nvshmem.so: undefined alone, none after libc10_cuda.so (torch._C loads it first)" "$?" "$alone alone, $after after, ldd exit $ran (ldd-r-nvshmem-*.txt)"

log "3. the frameworks' own loaders"
"$PYTHON" - > "$OUT/torch-loaders.py.txt" 2>&1 <<'EOF'
import inspect, torch
print("torch", torch.__version__)
for name in ("_load_global_deps", "_preload_cuda_deps", "_preload_cuda_lib", "_get_cuda_dep_paths"):
    f = getattr(torch, name, None)
    print("#", name, "absent" if f is None else "")
    if f is not None:
        print(inspect.getsource(f))
EOF
check "torch's loader source saved" "$?" "torch-loaders.py.txt: is the load by path only in 'except OSError'?"
LD_DEBUG=files "$PYTHON" -c 'import torch' 2> "$OUT/ld-debug-import-torch.txt"
grep -E 'file=lib(cublas|cudart|cudnn|nvrtc|nccl|cusparseLt|nvshmem_host)[^;]*;  dynamically loaded by|file=.*nvidia/.*/lib/lib[^;]*;  dynamically loaded by' "$OUT/ld-debug-import-torch.txt" | sed 's/^ *[0-9]*: *//' | sort -u > "$OUT/import-torch-by-path.txt"
check "LD_DEBUG of import torch saved" 0 "import-torch-by-path.txt: 'dynamically loaded by' lines (empty: no load by path on this healthy host)"
"$PYTHON" - > "$OUT/jax-pathfinder-loaders.txt" 2>&1 <<'EOF'
import inspect, importlib
for mod, names in (("jax_plugins.xla_cuda13", ("_load", "_load_nvidia_libraries")),
                   ("cuda.pathfinder._utils.find_sub_dirs", ("find_sub_dirs_all_sitepackages",))):
    try:
        m = importlib.import_module(mod)
    except Exception as e:
        print("#", mod, "not importable:", e)
        continue
    for n in names:
        f = getattr(m, n, None)
        print("#", mod, n, "absent" if f is None else "")
        if f is not None:
            print(inspect.getsource(f))
import site, sys
print("# site.ENABLE_USER_SITE", site.ENABLE_USER_SITE, site.getusersitepackages())
print("# sys.path", sys.path)
try:
    import nvidia.cu13
    print("# nvidia.cu13.__path__", list(nvidia.cu13.__path__))
except Exception as e:
    print("# nvidia.cu13 not importable:", e)
EOF
check "JAX's and pathfinder's loader source saved" "$?" "jax-pathfinder-loaders.txt"

log "4. scan of the whole site-packages"
"$CUDADEPS" scan "$SITE" --python "$PYTHON" > "$OUT/scan-site.txt" 2>&1
code=$?
check "scan of site-packages (for the record)" 0 "exit $code; summary: $(tail -n 2 "$OUT/scan-site.txt" | head -n 1)"

rm -rf "$WORK"
grep -q '^FAIL' "$SUMMARY" && exit 1
exit 0
