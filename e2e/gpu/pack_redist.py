"""Pack library directories taken out of a Python environment as NVIDIA
redistributable archives, with manifests in NVIDIA's redistrib_*.json
format, so that a mirror on 127.0.0.1 serves them as NVIDIA would
(MIRROR/RELATIVE_PATH, with the manifests in MIRROR/manifests/).

Each file goes to the archive of the redist component whose wheel owns it
(by that wheel's RECORD): nvidia-cublas's files to libcublas, and so on,
at the version of the owning wheel, or at the catalog's full version of it
when the wheel shortens it (nvidia-cusparselt-cu13 0.8.0 is cuSPARSELt
0.8.0.4), so the archive stands for that very release.

Usage: pack_redist.py CUDADEPS SITE MIRROR HIDDEN_DIR:RELATIVE_PATH...
"""
import csv
import hashlib
import json
import os
import subprocess
import sys
import tarfile

cudadeps, site, mirror = sys.argv[1:4]
hidden = dict(arg.split(":", 1) for arg in sys.argv[4:])  # where the files are now → their RECORD directory

# wheel → (product, redist component, variant per archive or None). The
# component names are NVIDIA's manifest keys.
WHEELS = {
    "nvidia-cublas": ("cuda", "libcublas"),
    "nvidia-cuda-runtime": ("cuda", "cuda_cudart"),
    "nvidia-cuda-nvrtc": ("cuda", "cuda_nvrtc"),
    "nvidia-cuda-cupti": ("cuda", "cuda_cupti"),
    "nvidia-cufft": ("cuda", "libcufft"),
    "nvidia-cufile": ("cuda", "libcufile"),
    "nvidia-curand": ("cuda", "libcurand"),
    "nvidia-cusolver": ("cuda", "libcusolver"),
    "nvidia-cusparse": ("cuda", "libcusparse"),
    "nvidia-nvjitlink": ("cuda", "libnvjitlink"),
    "nvidia-nvtx": ("cuda", "cuda_nvtx"),
    "nvidia-cudnn-cu13": ("cudnn", "cudnn"),
    "nvidia-cusparselt-cu13": ("cusparselt", "libcusparse_lt"),
}


def norm(n):
    return n.lower().replace("_", "-").replace(".", "-")


owners = {}  # RECORD path → (wheel, version)
for d in os.listdir(site):
    if not d.endswith(".dist-info"):
        continue
    name, version = d[: -len(".dist-info")].split("-", 1)
    rec = os.path.join(site, d, "RECORD")
    if not os.path.exists(rec):
        continue
    with open(rec, newline="") as f:
        for row in csv.reader(f):
            if row:
                owners[os.path.normpath(row[0])] = (norm(name), version)


def catalog_version(component, version):
    out = subprocess.run([cudadeps, "catalog", "show", component, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        return version
    for r in json.loads(out.stdout).get("releases", []):
        v = r["version"]
        if v == version or v.startswith(version + "."):
            return v
    return version


groups = {}  # (product, component, version) → [(path on disk, name in archive)]
for now, rel in hidden.items():
    for name in sorted(os.listdir(now)):
        owner = owners.get(os.path.normpath(os.path.join(rel, name)))
        if owner is None or owner[0] not in WHEELS:
            print(f"  {rel}/{name}: no wheel of the table owns it; left out")
            continue
        product, component = WHEELS[owner[0]]
        groups.setdefault((product, component, owner[1]), []).append(os.path.join(now, name))

manifests = {}
for (product, component, wheel_version), files in sorted(groups.items()):
    version = catalog_version(component, wheel_version)
    variant = "_cuda13" if product != "cuda" else ""
    stem = f"{component}-linux-x86_64-{version}{variant}-archive"
    relpath = f"{component}/linux-x86_64/{stem}.tar.xz"
    out = os.path.join(mirror, relpath)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tarpath = out[: -len(".xz")]
    with tarfile.open(tarpath, "w") as tar:
        for p in files:
            tar.add(p, arcname=f"{stem}/lib/{os.path.basename(p)}", recursive=False)
        lic = os.path.join(os.path.dirname(tarpath), "LICENSE")
        with open(lic, "w") as f:
            f.write("packed for a test from the installed wheel\n")
        tar.add(lic, arcname=f"{stem}/LICENSE")
        os.remove(lic)
    subprocess.run(["xz", "-0", "-T0", "-f", tarpath], check=True)
    data_sha = hashlib.sha256()
    with open(out, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            data_sha.update(chunk)
    entry = {"relative_path": relpath, "sha256": data_sha.hexdigest(), "md5": "0" * 32, "size": str(os.path.getsize(out))}
    m = manifests.setdefault(product, {"release_date": "2026-01-01", "release_label": wheel_version, "release_product": product})
    comp = {"name": component, "license": "test", "version": version}
    if product == "cuda":
        comp["linux-x86_64"] = entry
        m["release_label"] = "13.0.2"
    else:
        comp["linux-x86_64"] = {"cuda13": entry}
        comp["cuda_variant"] = ["13"]
    m[component] = comp
    print(f"  {component} {version} (wheel {wheel_version}): {len(files)} file(s), {os.path.getsize(out) >> 20} MiB")

for product, m in manifests.items():
    os.makedirs(os.path.join(mirror, "manifests"), exist_ok=True)
    p = os.path.join(mirror, "manifests", f"redistrib_{product}_{m['release_label']}.json")
    with open(p, "w") as f:
        json.dump(m, f, indent=2)
    print(p)
