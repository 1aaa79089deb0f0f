#!/usr/bin/env bash
# The GPU proof of cudadeps' GPU code coverage (docs/coverage.md), on a
# machine with an NVIDIA GPU, nvcc and cuobjdump in /usr/local/cuda/bin and
# a Python environment with torch, JAX and CuPy:
#
#   1. the device: nvidia-smi's compute_cap against what cudadeps reads from
#      NVML and from its PCI-ID table (both must give nvidia-smi's value);
#   2. five tiny shared libraries built by nvcc (sm_80 only; sm_80 with
#      PTX; sm_90; sm_90a with PTX; sm_100f with PTX): cudadeps' verdict for
#      each, against what really happens when each launches its kernel, and
#      the raw fat binary entry headers (the evidence for where a header
#      keeps the arch- and family-specific suffix);
#   3. the whole environment (python3's platlib): coverage of every object,
#      compared library by library with cuobjdump --list-elf and --list-ptx
#      (coverage_compare.py), and the verdicts of torch's, JAX's and CuPy's
#      libraries;
#   4. how long the whole environment's coverage takes (the "coverage" log
#      line, 5 runs), and what --coverage adds to a default scan;
#   5. libcuda.so.1 opening libnvidia-ptxjitcompiler.so.1 in the scan, and
#      doctor's coverage check for torch.
#
# Usage: e2e/gpu/coverage.sh CUDADEPS
# Environment: PYTHON (default python3), OUT (logs; default a temporary
# directory), CUDA_HOME (default /usr/local/cuda). Runs unattended in a few
# minutes; every step is bounded by a timeout and the script goes on after
# a failure, printing PASS/FAIL lines at the end.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
proof_setup "${1:?usage: coverage.sh CUDADEPS}"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=$CUDA_HOME/bin/nvcc
CUOBJDUMP=$CUDA_HOME/bin/cuobjdump
RESULTS=()
result() { RESULTS+=("$1"); echo "$1"; }
exec > >(tee "$OUT/coverage.log") 2>&1

log "environment: $PYTHON, site-packages $SITE, OUT $OUT"
"$CUDADEPS" --version
"$NVCC" --version | tail -n 2
"$CUOBJDUMP" --version | tail -n 1

log "1. the device: nvidia-smi, then cudadeps (NVML and the PCI table)"
SMI_CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')
nvidia-smi --query-gpu=index,name,compute_cap,pci.device_id,driver_version --format=csv 2>&1 | tee "$OUT/nvidia-smi.txt"
timeout 120 "$CUDADEPS" doctor --json > "$OUT/doctor.json" 2>"$OUT/doctor.stderr"
"$PYTHON" - "$OUT/doctor.json" "$SMI_CC" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1])); smi = sys.argv[2]
dev = doc["summary"].get("coverage", {}).get("device", {})
print("cudadeps device:", dev.get("cc"), dev.get("name"), "from", dev.get("source"), "driver CUDA", dev.get("driver_cuda"))
seen = {}
for s in dev.get("sources", []):
    gpus = s.get("gpus") or []
    print(f"  {s['source']:<12} {'via ' + s['via'] if s.get('via') else '':<22} " +
          (", ".join(f"GPU {g['index']}: {g['cc']} {g.get('name', '')} {g.get('pci_id', '')}" for g in gpus) or "nothing: " + s.get("error", "")))
    if gpus:
        seen[s["source"]] = gpus[0]["cc"]
for c in doc["checks"]:
    if c["id"] == "coverage":
        print(f"  doctor coverage check: {c['status']}: {c['evidence']}")
for src in ("nvml", "pci"):
    v = seen.get(src)
    print(("PASS" if v == smi else "FAIL") + f": {src} gives {v}, nvidia-smi {smi}")
PY
for src in nvml pci; do
  "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1]))["summary"]["coverage"]["device"]; s=[x for x in d["sources"] if x["source"]==sys.argv[2] and x.get("gpus")]; sys.exit(0 if s and s[0]["gpus"][0]["cc"]==sys.argv[3] else 1)' \
    "$OUT/doctor.json" "$src" "$SMI_CC" 2>/dev/null && result "PASS device: $src gives $SMI_CC" || result "FAIL device: $src does not give nvidia-smi's $SMI_CC"
done

log "2. nvcc fixtures: verdicts against real kernel launches"
FIX=$WORK/fixtures
mkdir -p "$FIX"
cat > "$FIX/kernel.cu" <<'CU'
#include <cuda_runtime.h>
__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }
extern "C" int run_kernel(void) {
  float *d = 0;
  cudaError_t e = cudaMalloc(&d, 32 * sizeof(float));
  if (e) return e;
  twice<<<1, 32>>>(d);
  e = cudaGetLastError();
  if (!e) e = cudaDeviceSynchronize();
  cudaFree(d);
  return e;
}
CU
declare -A GENCODE=(
  [sm80]="-gencode arch=compute_80,code=sm_80"
  [sm80ptx]="-gencode arch=compute_80,code=[sm_80,compute_80]"
  [sm90]="-gencode arch=compute_90,code=sm_90"
  [sm90a]="-gencode arch=compute_90a,code=[sm_90a,compute_90a]"
  [sm100f]="-gencode arch=compute_100f,code=[sm_100f,compute_100f]"
)
for name in sm80 sm80ptx sm90 sm90a sm100f; do
  # shellcheck disable=SC2086
  if timeout 180 "$NVCC" -shared -Xcompiler -fPIC ${GENCODE[$name]} -o "$FIX/lib$name.so" "$FIX/kernel.cu" > "$FIX/$name.nvcc.log" 2>&1; then
    echo "built lib$name.so (${GENCODE[$name]})"
  else
    echo "nvcc could not build lib$name.so: $(tail -n 1 "$FIX/$name.nvcc.log")"
  fi
done
rm -f "$FIX/kernel.cu"
timeout 120 "$CUDADEPS" scan "$FIX" --coverage --json > "$OUT/fixtures.json" 2>"$OUT/fixtures.stderr"
echo "scan --coverage of the fixtures: exit $?"
"$PYTHON" - "$OUT/fixtures.json" "$FIX" "$SMI_CC" <<'PY' | tee "$OUT/fixtures.txt"
import ctypes, json, os, subprocess, sys
doc, fix, cc = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
# What the brief expects on a 9.0 device.
expected = {"libsm80.so": "none", "libsm80ptx.so": "jit", "libsm90.so": "native", "libsm90a.so": "native", "libsm100f.so": "none"}
launch = "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).run_kernel())"
for o in sorted(doc["coverage"]["objects"], key=lambda o: o["path"]):
    name = os.path.basename(o["path"])
    if not name.startswith("libsm"):
        continue
    r = subprocess.run([sys.executable, "-c", launch, o["path"]], capture_output=True, text=True, timeout=120)
    code = r.stdout.strip() or "crash: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    runs = code == "0"
    verdict = o.get("verdict")
    real_ok = (verdict in ("native", "jit")) == runs
    exp = expected.get(name) if cc == "9.0" else None
    exp_ok = exp is None or exp == verdict
    print(f"{'PASS' if real_ok and exp_ok else 'FAIL'} fixture {name}: cudadeps {verdict} ({o.get('reason')}); "
          f"the kernel launch returns {code}{'' if exp is None else '; expected ' + exp}")
    print(f"     sass {[(c['arch'], c['entries'], c['variant_known']) for c in o['sass']]} ptx {[(c['arch'], c.get('ptx_isa'), c['variant_known']) for c in o['ptx']]}")
PY
while read -r line; do case "$line" in PASS*|FAIL*) RESULTS+=("$line");; esac; done < "$OUT/fixtures.txt"

log "2b. the fixtures' fat binary entry headers, raw (where the arch- and family-specific suffix lives)"
"$PYTHON" - "$FIX" <<'PY' | tee "$OUT/fatbin-headers.txt"
import os, struct, sys
d = sys.argv[1]
def sections(b):
    shoff, = struct.unpack_from("<Q", b, 0x28); shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
    hdr = lambda i: struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize)
    stro = hdr(shstrndx)[4]
    for i in range(shnum):
        h = hdr(i)
        name = b[stro + h[0]: b.index(b"\0", stro + h[0])].decode()
        yield name, h[4], h[5]
for f in sorted(os.listdir(d)):
    if not f.endswith(".so"):
        continue
    b = open(os.path.join(d, f), "rb").read()
    for name, off, size in sections(b):
        if name != ".nv_fatbin":
            continue
        p, end = off, off + size
        while p + 16 <= end:
            magic, ver, hs, fs = struct.unpack_from("<IHHQ", b, p)
            if magic != 0xBA55ED50:
                p += 8
                continue
            q, cend = p + hs, p + hs + fs
            print(f"{f}: container at {p:#x}, {fs} bytes")
            while q + 64 <= cend:
                kind, hver, ehs, psize, csize, opt, mi, ma, arch, ido, idl, flags, res, usize = struct.unpack_from("<HHIQIIHHIIIQQQ", b, q)
                print(f"  entry kind {kind} hver {hver:#x} hsize {ehs} payload {psize} csize {csize} opt@{opt} code {ma}.{mi} arch {arch:#x} ({arch}) id@{ido}+{idl} flags {flags:#x} reserved {res:#x} usize {usize}")
                print(f"    header hex: {b[q:q + 64].hex()}")
                if ehs > 64:
                    ext = b[q + 64:q + ehs]
                    print(f"    extension hex: {ext.hex()}")
                    print(f"    extension text: {ext.decode('latin-1')!r}")
                q += ehs + psize
            p = cend
PY

log "3. the whole environment: coverage, and cuobjdump library by library"
timeout 600 "$CUDADEPS" scan "$SITE" --coverage --json > "$OUT/env-coverage.json" 2>"$OUT/env-coverage.stderr"
echo "scan --coverage of $SITE: exit $?"
"$PYTHON" - "$OUT/env-coverage.json" "$SITE" <<'PY' | tee "$OUT/env-verdicts.txt"
import collections, json, os, sys
doc, site = json.load(open(sys.argv[1])), sys.argv[2]
cov = doc["coverage"]
print("device:", cov["device"].get("cc"), cov["device"].get("name"), "from", cov["device"].get("source"))
print("summary:", json.dumps(cov["summary"]))
by = collections.Counter(o.get("verdict", "error") for o in cov["objects"])
print("verdicts:", dict(by))
keys = ("torch/lib/", "jaxlib/", "jax_plugins/", "jax_cuda13_plugin/", "cupy/", "cupy_backends/", "nvidia/")
fams = collections.defaultdict(collections.Counter)
for o in cov["objects"]:
    rel = os.path.relpath(o["path"], site)
    fam = next((k for k in keys if rel.startswith(k)), "other" if not rel.startswith("..") else "outside site-packages")
    fams[fam][o.get("verdict", "error")] += 1
for fam, c in sorted(fams.items()):
    print(f"  {fam:<24} {dict(c)}")
for o in cov["objects"]:
    if o.get("verdict") in ("none", "jit", "runtime-compiled") or o.get("containers", 0) > 1000:
        print(f"  {o.get('verdict', 'error'):<17} {os.path.relpath(o['path'], site)}: {o.get('reason', o.get('error'))}")
for lib in ("torch/lib/libtorch_cuda.so",):
    for o in cov["objects"]:
        if o["path"].endswith(lib):
            print(f"  {lib}: {[c['arch'] for c in o['sass']]} PTX {[c['arch'] for c in o['ptx']]}")
missing = [k for k in ("torch/lib/libtorch_cuda.so", "xla_cuda_plugin.so", "cupy") if not any(k in o["path"] for o in cov["objects"])]
print(("PASS" if not missing else "FAIL") + f" environment: torch, JAX and CuPy libraries reported" + (f" (missing: {missing})" if missing else ""))
none = [o for o in cov["objects"] if o.get("verdict") == "none"]
print(f"NOTE environment: {len(none)} libraries with nothing that runs on {cov['device'].get('cc')} (listed above)")
PY
while read -r line; do case "$line" in PASS*|FAIL*) RESULTS+=("$line");; esac; done < "$OUT/env-verdicts.txt"
timeout 480 "$PYTHON" "$HERE/coverage_compare.py" "$OUT/env-coverage.json" "$CUOBJDUMP" "$OUT/cuobjdump" | tee "$OUT/compare-summary.txt"
[ "${PIPESTATUS[0]}" = 0 ] && result "PASS cuobjdump: every library agrees, architectures and names" || result "FAIL cuobjdump: disagreements (see $OUT/cuobjdump/compare.txt)"

log "4. timing: the whole environment's coverage, and what --coverage adds to a scan"
"$PYTHON" - "$CUDADEPS" "$SITE" <<'PY' | tee "$OUT/timing.txt"
import json, statistics, subprocess, sys, time
exe, site = sys.argv[1], sys.argv[2]
cov, objs, ents = [], "?", "?"
for _ in range(5):
    r = subprocess.run([exe, "scan", site, "--coverage", "--symbols=false", "--json", "-v", "--log-format", "json"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    for line in r.stderr.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("msg") == "coverage":
            cov.append(rec["seconds"])
            objs, ents = rec.get("objects"), rec.get("entries")
if cov:
    print(f"coverage of {objs} objects, {ents} fat binary entries: median {statistics.median(cov):.3f} s, max {max(cov):.3f} s over {len(cov)} runs")
    print(("PASS" if max(cov) < 1.0 else "FAIL") + f" timing: the whole environment's coverage in {max(cov):.3f} s (under 1 s)")
else:
    print("FAIL timing: no coverage log line")
for args in (["scan", site, "--json"], ["scan", site, "--json", "--coverage"]):
    t = []
    for _ in range(2):
        s = time.perf_counter()
        subprocess.run([exe] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        t.append(time.perf_counter() - s)
    print(f"cudadeps scan {' '.join(args[2:])}: best {min(t):.3f} s of 2 runs")
PY
while read -r line; do case "$line" in PASS*|FAIL*) RESULTS+=("$line");; esac; done < "$OUT/timing.txt"

log "5. libcuda.so.1 opens libnvidia-ptxjitcompiler.so.1; doctor torch"
timeout 300 "$CUDADEPS" scan "$SITE/torch/lib/libtorch_cuda.so" --json > "$OUT/torch-cuda-scan.json" 2>/dev/null
"$PYTHON" - "$OUT/torch-cuda-scan.json" <<'PY' | tee "$OUT/ptxjit.txt"
import json, sys
doc = json.load(open(sys.argv[1]))
opens = [o for r in doc["roots"] for o in r.get("runtime_opens", []) if o["soname"] == "libnvidia-ptxjitcompiler.so.1"]
for o in opens:
    print(f"  {o['opener']} opens {o['soname']} => {o['path']} [{o.get('how')}]")
print(("PASS" if any(o["path"] for o in opens) else "FAIL") + " runtime opens: libcuda.so.1 opens libnvidia-ptxjitcompiler.so.1, found")
PY
while read -r line; do case "$line" in PASS*|FAIL*) RESULTS+=("$line");; esac; done < "$OUT/ptxjit.txt"
"$PYTHON" -c 'import torch; torch.zeros(1, device="cuda"); print("".join(l for l in open("/proc/self/maps") if "ptxjitcompiler" in l) or "libnvidia-ptxjitcompiler not mapped")' 2>&1 | tail -n 3
timeout 300 "$CUDADEPS" doctor torch --python "$PYTHON" 2>&1 | tee "$OUT/doctor-torch.txt" | grep -E '^(ok|warn|FAIL) +coverage' -A1

log "results"
printf '%s\n' "${RESULTS[@]}" | tee "$OUT/results.txt"
echo "logs in $OUT"
