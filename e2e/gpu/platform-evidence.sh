#!/usr/bin/env bash
# Captures, on a real GPU host, the files cudadeps reads to tell what kind of
# host it is, laid out as platform/testdata/hosts/NAME: root/ holds those
# files at their paths (what `cudadeps doctor --root` reads), SOURCES says
# where each comes from, and beside them the independent reports the test
# compares cudadeps with: nvidia-smi's summary and `cudadeps doctor --json`.
#
# Usage: bash e2e/gpu/platform-evidence.sh CUDADEPS
# Environment: OUT (default a new temporary directory), NAME (default
# x86_64-h100). Commit $OUT/platform-evidence/NAME as
# platform/testdata/hosts/NAME.
set -uo pipefail
CUDADEPS=$(readlink -f "${1:?usage: platform-evidence.sh CUDADEPS}")
OUT=${OUT:-$(mktemp -d)}
NAME=${NAME:-x86_64-h100}
D=$OUT/platform-evidence/$NAME
rm -rf "$D"
mkdir -p "$D/root"
GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
WHEN=$(date -u +%Y-%m-%d)
: > "$D/SOURCES"

# source FILE WHAT: one SOURCES line for a file under root/.
source_line() { printf '%s: %s, captured by e2e/gpu/platform-evidence.sh on a host with %s, %s.\n' "$1" "$2" "${GPU:-no GPU named by nvidia-smi}" "$WHEN" >> "$D/SOURCES"; }

# copy PATH FILTER WHAT: the file as this host shows it (at most 1 MiB; a
# /proc file is read, not stat'ed: its size is 0), through FILTER.
copy() {
  local p=$1 filter=${2:-cat}
  if [ ! -r "$p" ]; then
    echo "absent: $p"
    return
  fi
  mkdir -p "$D/root$(dirname "$p")"
  head -c 1048576 "$p" | $filter > "$D/root$p"
  source_line "${p#/}" "$3"
}
cpu_lines() { grep -E '^(processor|vendor_id|cpu family|model|model name|CPU implementer|CPU architecture|CPU variant|CPU part|CPU revision)[[:space:]]*:'; }

copy /etc/nv_tegra_release cat "the L4T release file"
copy /proc/device-tree/compatible cat "the device tree's compatible list"
copy /proc/driver/nvidia/version cat "the NVIDIA kernel module's version file"
copy /sys/class/dmi/id/product_name cat "the DMI product name"
copy /proc/cpuinfo cpu_lines "/proc/cpuinfo, only its processor, vendor and model lines"

# The NVIDIA PCI functions (vendor 0x10de): vendor, device and class ids.
for dev in /sys/bus/pci/devices/*; do
  [ "$(cat "$dev/vendor" 2>/dev/null)" = 0x10de ] || continue
  b=$(basename "$dev")
  for f in vendor device class subsystem_vendor subsystem_device; do
    [ -r "$dev/$f" ] || continue
    mkdir -p "$D/root/sys/bus/pci/devices/$b"
    cat "$dev/$f" > "$D/root/sys/bus/pci/devices/$b/$f"
    source_line "sys/bus/pci/devices/$b/$f" "the PCI $f id of NVIDIA function $b"
  done
done

# nvidia-smi's summary, without serial numbers and UUIDs.
nvidia-smi -q 2>&1 | grep -E 'Driver Version|CUDA Version|Attached GPUs|Product Name|Product Brand|Product Architecture|Bus Id|Device Id|Sub System Id|Addressing Mode|Persistence Mode|Compute Mode' > "$D/nvidia-smi-q.txt"

# What cudadeps makes of this host, and of the copy.
"$CUDADEPS" doctor --json > "$D/doctor.json" 2> "$D/doctor.stderr"
echo "doctor exit status: $?" >> "$D/doctor.stderr"
"$CUDADEPS" doctor --root "$D/root" --json > "$OUT/doctor-root.json" 2>&1

echo "captured in $D:"
(cd "$D" && find . -type f | sort)
echo
cat "$D/nvidia-smi-q.txt"
