#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The device harness (issue: NVIDIA target proven on the H200). Run on the GPU machine
# from the repository root, with a build made on the CPU machine carried along:
#
#   on the CPU machine:  bash tests/device/prepare.sh         (builds build-dev/ and packs)
#   on the GPU machine:  bash tests/device/run.sh [OUTDIR]
#
# For every pack in build-dev/packs/ (every spec in specs/ and tests/specs/, built for
# host + sm_90): runs every op and spec at every batch size on the GPU and on the host
# target (host only at batch <= HK_HOST_MAX_BATCH, default 1: CI checks the host target;
# here it is a cross-check) and at one batch size between buckets (padded), compares both
# with PyTorch (check.py), prints a table, exits 1 on any mismatch. HK_DEVICE_SPECS (an
# extended regex over the pack names) runs only the packs it matches.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev (scripts/carry_libs.sh)
out=${1:-${OUT:-/tmp/hk-device}}
mkdir -p "$out"
HKC=build-dev/hkc
GPU_TARGET=${HK_GPU_TARGET:-sm_90}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$HKC" --version
fail=0
for pack in build-dev/packs/*.hkpack; do
  name=$(basename "$pack" .hkpack)
  [[ -z ${HK_DEVICE_SPECS:-} || $name =~ $HK_DEVICE_SPECS ]] || continue
  spec=specs/$name.yaml
  [ -f "$spec" ] || spec=tests/specs/$name.yaml
  python3 tests/device/check.py "$HKC" "$spec" "$pack" "$out/$name" --gpu-target "$GPU_TARGET" \
    --host-target "$("$HKC" inspect "$pack" | awk '/^  host-/{print $1; exit}')" \
    --host-max-batch "${HK_HOST_MAX_BATCH:-1}" || fail=1
done
if [ $fail -ne 0 ]; then echo "DEVICE CHECK: MISMATCHES (see FAIL rows)"; else echo "DEVICE CHECK: all specs and ops match PyTorch"; fi
exit $fail
