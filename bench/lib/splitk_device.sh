#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device half of `bench/run.py splitk`. Split-K (gemm_mma, sm_90 packs; sm_80 packs must be refused on an sm_90 GPU) and stream-K
# (gemm_tma, sm_90a) on the H200, one device call with build-dev carried (prepared by
# bench/run.py splitk --prepare): numerics of every configuration against a float64 torch
# reference on odd shapes, the same bytes from two runs, and the small-M bars against
# F.linear (bench/lib/splitk.py run; its docstring has the protocol); then bert_layer and
# llama_block with every GEMM split, on sm_90 and sm_90a, through tests/device/check.py.
# Logs under $OUT (default /tmp/hk-splitk): gpu.txt, run.log, numerics.jsonl, timing.jsonl,
# summary.txt, models.log. DEVICE_BUDGET_S (default 420 s): splitk.py skips the timing cases
# past 300 s of it (and says so), the layers get what is left, each check at most 60 s.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev (scripts/carry_libs.sh)
out=${OUT:-/tmp/hk-splitk}
budget=${DEVICE_BUDGET_S:-420}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
[ -x build-dev/hkc ] && [ -e build-dev/libhkrt.so ] && [ -d build-dev/splitk ] ||
  { echo "splitk_device: no build-dev/splitk: run bench/run.py splitk --prepare first and carry build-dev" >&2; exit 2; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >"$out/gpu.txt" 2>&1
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
timeout $((budget - 60)) python3 bench/lib/splitk.py run --out "$out" --budget $((budget - 120)) "$@" >"$out/run.log" 2>&1
rc=$?
grep -E 'FAIL|SKIPPED|Error|error' "$out/run.log" | head -n 20
tail -n 30 "$out/run.log"
for spec in bert_layer llama_block; do
  for target in sm_90 sm_90a; do
    [ "$(left)" -gt 70 ] || { echo "SKIPPED $spec $target: $(left) s left" | tee -a "$out/models.log"; continue; }
    timeout 200 python3 tests/device/check.py build-dev/hkc "specs/$spec.yaml" "build-dev/splitk/model_$spec.hkpack" \
      "/tmp/splitk-$spec-$target" --gpu-target "$target" >>"$out/models.log" 2>&1 || { rc=1; echo "FAIL $spec $target" >>"$out/models.log"; }
  done
done
echo "layers: $(grep -c '^ok' "$out/models.log") ok, $(grep -c '^FAIL' "$out/models.log") FAIL"
echo "splitk_device: $(($(date +%s) - start)) s, exit $rc"
exit $rc
