#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run from bench/s8/call1.sh in the session; copied here next to its output)
# Session 8, device call 1 (build-dev carried; prepared by tests/device/prepare.sh,
# tests/device/hf_prepare.sh and `python3 bench/gemm_bars.py prepare --only small_`):
# the Hugging Face check, the device harness on sm_90a and sm_90, the small-M GEMM bars
# against F.linear and ncu on three of them.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out=${OUT:-/tmp/device-run}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
t() { echo "[$(( $(date +%s) - start )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
t "hf"
timeout 170 bash tests/device/hf_device.sh /tmp/s8-hf > "$out/hf.log" 2>&1; echo "hf rc $?"
grep -E "^(ok|FAIL)|hf_models" "$out/hf.log"
t "harness sm_90a"
HK_GPU_TARGET=sm_90a timeout 170 bash tests/device/run.sh /tmp/s8-h90a > "$out/harness_sm90a.log" 2>&1; echo "harness sm_90a rc $?"
echo "ok $(grep -c '^ok' "$out/harness_sm90a.log") FAIL $(grep -c '^FAIL' "$out/harness_sm90a.log")"; tail -n 2 "$out/harness_sm90a.log"
t "gemm small bars"
timeout 90 python3 bench/gemm_bars.py run --only small_ --out "$out/bars.jsonl" > "$out/bars.log" 2>&1; echo "bars rc $?"
tail -n 16 "$out/bars.log"
t "ncu"
for c in small_bf16_128x768x768 small_bf16_1024x768x3072 small_bf16_512x1024x4096; do
  timeout 40 /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --launch-count 1 \
    build-dev/hkc run --random-params "build-dev/bench/gemm/$c.hkpack" --batch 1 --runs 1 --warmup 0 > "$out/ncu_$c.txt" 2>&1
  echo "ncu $c rc $?"
done
left=$(( 560 - ($(date +%s) - start) ))
t "harness sm_90 (${left} s left)"
if [ $left -gt 60 ]; then
  HK_GPU_TARGET=sm_90 timeout $((left - 10)) bash tests/device/run.sh /tmp/s8-h90 > "$out/harness_sm90.log" 2>&1; echo "harness sm_90 rc $?"
  echo "ok $(grep -c '^ok' "$out/harness_sm90.log") FAIL $(grep -c '^FAIL' "$out/harness_sm90.log")"; tail -n 2 "$out/harness_sm90.log"
fi
t "done"
