#!/usr/bin/env bash
# One device call for the GEMM issue (after `bash tests/device/prepare.sh` and
# `python3 bench/gemm_bars.py prepare --configs ...` on the CPU machine, build-dev carried):
#   1. gemm_bars.py run: every case and pack, numerics then hkc vs torch (OUT/bars.jsonl);
#   2. ncu (--clock-control none) over the small-M cases' default packs (OUT/ncu_*.txt), when
#      GEMM_NCU=1 and time is left.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/hk-gemm}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
budget=${DEVICE_BUDGET_S:-540}
left() { echo $((budget - ($(date +%s) - start))); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
rc=0
python3 bench/gemm_bars.py run --out "$out/bars.jsonl" ${GEMM_ONLY:+--only "$GEMM_ONLY"} > "$out/bars.log" 2>&1 || rc=1
echo "bars done ($(( $(date +%s) - start )) s, rc $rc)"
grep -c "NUMERICS FAIL" "$out/bars.log" || true
if [ "${GEMM_NCU:-0}" = 1 ] && [ "$(left)" -gt 120 ]; then
  for p in build-dev/bench/gemm/small_bf16_128x768x3072.hkpack build-dev/bench/gemm/small_bf16_512x4096x4096.hkpack; do
    [ -f "$p" ] || continue
    timeout $(( $(left) - 30 )) /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section SchedulerStats build-dev/hkc run "$p" --batch 1 --runs 1 \
      > "$out/ncu_$(basename "$p" .hkpack).txt" 2>&1 || true
  done
fi
exit $rc
