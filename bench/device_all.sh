#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Everything the GPU machine proves, in one call (run from the repository root after
# tests/device/prepare.sh and bench/ops_prepare.sh on the CPU machine):
#   1. the numerics harness on sm_90 and on sm_90a (every spec and op vs PyTorch)
#   2. the op benchmark (bench/ops.py) on build-dev/bench/ops
#   3. every tuning sweep directory build-dev/bench/t_* (same cases, other tile configs)
#   4. the launch-overhead benchmark
# Logs go to $OUT (or the first argument); the summary goes to stdout.
set -uo pipefail
out=${1:-${OUT:-/tmp/hk-device-all}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
rc=0
bash tests/device/run.sh /tmp/hk-d90 > "$out/check90.log" 2>&1 || rc=1
echo "numerics sm_90:  $(tail -n1 "$out/check90.log")"
HK_GPU_TARGET=sm_90a bash tests/device/run.sh /tmp/hk-d90a > "$out/check90a.log" 2>&1 || rc=1
echo "numerics sm_90a: $(tail -n1 "$out/check90a.log")"
grep -hE "^FAIL" "$out/check90.log" "$out/check90a.log" | cut -c1-200 | head -20
python3 bench/ops.py --out "$out/ops.jsonl" > "$out/ops.log" 2>&1 || rc=1
cut -c1-130 "$out/ops.log"
for d in build-dev/bench/t_*; do
  [ -d "$d" ] || continue
  echo "=== sweep $(basename "$d")"
  python3 bench/ops.py --dir "$d" 2>&1 | grep -vE "^ratio|^case|^GPU" | cut -c1-130
done > "$out/sweeps.log" 2>&1
cat "$out/sweeps.log"
build-dev/hk_bench_launch build-dev/bench/chain200.hkpack > "$out/launch.log" 2>&1 || rc=1
cat "$out/launch.log"
exit $rc
