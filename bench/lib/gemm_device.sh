#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device half of `bench/run.py gemm`, one device call (build-dev carried, prepared by
# `bench/run.py gemm --prepare`): the dual-gemm packs' numerics, the bars (bench/lib/gemm_bars.py run),
# ncu on three short GEMMs, and bert_layer / llama_block against PyTorch eager and eager
# under a CUDA graph.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev (scripts/carry_libs.sh)
out=${OUT:-/tmp/hk-final}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
budget=${DEVICE_BUDGET_S:-560}
left() { echo $((budget - ($(date +%s) - start))); }
rc=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader > "$out/gpu.txt" 2>&1
# sm_90a-only packs (bench/run.py gemm --prepare): there fusion makes SwiGLU a dual gemm, which the
# harness's multi-target packs (sm_90 has no dual kernel) never run
for p in build-dev/dual/*.hkpack; do
  n=$(basename "$p" .hkpack)
  spec=specs/$n.yaml; [ -f "$spec" ] || spec=tests/specs/$n.yaml
  python3 tests/device/check.py build-dev/hkc "$spec" "$p" "/tmp/dual-$n" --gpu-target sm_90a >> "$out/check_dual.log" 2>&1 || rc=1
done
echo "dual packs: $(grep -c '^ok' "$out/check_dual.log") ok, $(grep -c '^FAIL' "$out/check_dual.log") FAIL"
python3 bench/lib/gemm_bars.py run --out "$out/bars.jsonl" > "$out/bars.log" 2>&1 || rc=1
echo "bars: $(grep -c 'NUMERICS FAIL' "$out/bars.log") numerics failures ($(( $(date +%s) - start )) s)"
for c in small_bf16_128x768x768 small_bf16_1024x768x768 small_bf16_512x1024x4096; do
  [ "$(left)" -gt 300 ] || break
  timeout 60 /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --launch-count 1 \
    build-dev/hkc run --random-params "build-dev/bench/gemm/$c.hkpack" --batch 1 --runs 1 --warmup 0 > "$out/ncu_$c.txt" 2>&1 || true
done
echo "ncu done ($(( $(date +%s) - start )) s)"
for part in bert llama; do
  b=$(( ($(left) - 20) / 2 ))
  [ "$part" = llama ] && b=$(( $(left) - 20 ))
  [ "$b" -gt 60 ] || { echo "peers $part: SKIPPED, $(left) s left"; continue; }
  OUT=$out PEERS_BUDGET_S=$b PEERS_DEVICE_BUILD=0 bash bench/lib/peers_device.sh $part --systems eager,cudagraph,hkc \
    --cold-runs 0 --no-torch-cold > "$out/peers_$part.out" 2>&1 || rc=1
  tail -n 12 "$out/peers_$part.out"
done
echo "gemm_final_device: $(( $(date +%s) - start )) s, exit $rc"
exit $rc
