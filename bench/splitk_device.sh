#!/usr/bin/env bash
# Split-K (gemm_mma, sm_90 packs; sm_80 packs must be refused on an sm_90 GPU) and stream-K
# (gemm_tma, sm_90a) on the H200, one device call with build-dev carried (prepared by
# bench/splitk_prepare.sh): numerics of every configuration against a float64 torch
# reference on odd shapes, the same bytes from two runs, and the small-M bars against
# F.linear (bench/splitk.py run; its docstring has the protocol). Logs under $OUT (default
# /tmp/hk-splitk): gpu.txt, run.log, numerics.jsonl, timing.jsonl, summary.txt. Stays within
# DEVICE_BUDGET_S (default 420 s; timing cases past it are skipped and say so).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/hk-splitk}
budget=${DEVICE_BUDGET_S:-420}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
[ -x build-dev/hkc ] && [ -e build-dev/libhkrt.so ] && [ -d build-dev/splitk ] ||
  { echo "splitk_device: no build-dev/splitk: run bench/splitk_prepare.sh first and carry build-dev" >&2; exit 2; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >"$out/gpu.txt" 2>&1
start=$(date +%s)
timeout $((budget + 60)) python3 bench/splitk.py run --out "$out" --budget "$budget" "$@" >"$out/run.log" 2>&1
rc=$?
grep -E 'FAIL|SKIPPED|Error|error' "$out/run.log" | head -n 20
tail -n 30 "$out/run.log"
echo "splitk_device: $(($(date +%s) - start)) s, exit $rc"
exit $rc
