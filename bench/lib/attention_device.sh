#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device half of `bench/run.py attention` (H200; build-dev carried, prepared by
# `bench/run.py attention --prepare`), under 8 minutes:
#   1. attention numerics of every pack of bench/lib/attn_bars.py (attention_tma in each schedule --
#      simple, ov, pp, full -- and tile, and the old kernels) against a float64 reference; a pack
#      that hangs ends the step with "HANG <case>__<tag>", and the step runs again without that
#      tag (at most 5 times; likewise "FAULT <case>__<tag>" for a run that broke the CUDA context);
#   2. the device harness (tests/device/check.py) on the specs with attention, sm_90a: every op
#      and spec against PyTorch at every batch size (odd sequence lengths, GQA, packed qkv);
#   3. timings (attn_bars.py timing): the bar cases, hkc's packs against SDPA, both in CUDA
#      graphs, inputs rotated past L2; the tags that failed, hung or faulted in step 1 are skipped;
#   4. time left: ncu on the default pack of two bar cases.
# Logs in $OUT (8 files at most, no '@' or ',' in names): gpu.txt check.log numerics.log
# numerics.jsonl bars.log bars.jsonl bad.json ncu.txt
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev (scripts/carry_libs.sh)
out=${OUT:-/tmp/hk-attn}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
budget=${DEVICE_BUDGET_S:-450}
left() { echo $((budget - ($(date +%s) - start))); }
rc=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader \
  > "$out/gpu.txt" 2>&1

# 1. numerics, hang-proof
skip=""
for attempt in 1 2 3 4 5; do
  t=$(( $(left) - 240 )); [ "$t" -gt 30 ] || { echo "numerics: out of time"; break; }
  timeout -s KILL "$t" python3 bench/lib/attn_bars.py numerics --out "$out/numerics.jsonl" --bad "$out/bad.json" \
    --skip-tags "$skip" --hang-s 20 >> "$out/numerics.log" 2>&1
  r=$?
  hung=$(grep -E "^(HANG|FAULT) " "$out/numerics.log" | tail -n 1 | grep -oE "__[A-Za-z0-9_]+" | sed 's/^__//')
  if { [ $r -eq 3 ] || [ $r -eq 4 ]; } && [ -n "$hung" ] && ! grep -qx "$hung" <<<"${skip//,/$'\n'}"; then
    echo "numerics: tag $hung hung or faulted; again without it"
    skip="$skip${skip:+,}$hung"
    continue
  fi
  [ $r -eq 0 ] || rc=1
  break
done
echo "numerics: $(grep -c ' ok$' "$out/numerics.log") ok, $(grep -c 'NUMERICS FAIL' "$out/numerics.log") FAIL, $(grep -c ' ERROR ' "$out/numerics.log") ERROR, hung/faulted: ${skip:-none} ($(( $(date +%s) - start )) s)"
grep -E "NUMERICS FAIL| ERROR |^HANG|^FAULT" "$out/numerics.log" | head -n 20

# 2. the harness on the specs with attention (sm_90a code of the host+sm_90+sm_90a packs; their
#    kernels are the `default` tag's configurations: skipped when that tag hung or faulted)
grep -qx default <<<"${skip//,/$'\n'}" && echo "harness: SKIPPED (the default configuration hung or faulted)"
grep -qx default <<<"${skip//,/$'\n'}" || for s in tests/specs/op_attention.yaml tests/specs/op_attention128.yaml \
  specs/bert_layer.yaml specs/llama_block.yaml; do
  n=$(basename "$s" .yaml)
  echo "== $n" >> "$out/check.log"
  timeout -s KILL 200 python3 tests/device/check.py build-dev/hkc "$s" "build-dev/packs-attn/$n.hkpack" "/tmp/attn-check-$n" \
    --gpu-target sm_90a >> "$out/check.log" 2>&1 || { rc=1; echo "check $n: FAILED or timed out" >> "$out/check.log"; }
done
echo "harness: $(grep -c '^ok' "$out/check.log") ok, $(grep -c 'FAIL' "$out/check.log") FAIL ($(( $(date +%s) - start )) s)"

# 3. timings (hang-proof the same way)
for attempt in 1 2 3; do
  t=$(( $(left) - 40 )); [ "$t" -gt 30 ] || { echo "timing: out of time"; break; }
  timeout -s KILL "$t" python3 bench/lib/attn_bars.py timing --out "$out/bars.jsonl" --bad "$out/bad.json" \
    --skip-tags "$skip" --hang-s 30 >> "$out/bars.log" 2>&1
  r=$?
  hung=$(grep -E "^(HANG|FAULT) " "$out/bars.log" | tail -n 1 | grep -oE "__[A-Za-z0-9_]+" | sed 's/^__//')
  if { [ $r -eq 3 ] || [ $r -eq 4 ]; } && [ -n "$hung" ] && ! grep -qx "$hung" <<<"${skip//,/$'\n'}"; then
    echo "timing: tag $hung hung or faulted; again without it"; skip="$skip${skip:+,}$hung"; continue
  fi
  [ $r -eq 0 ] || rc=1
  break
done
sed -n '/^case .*best tag/,$p' "$out/bars.log"

# 4. ncu on three bar cases' default packs, if time is left: the sections, then the stall
#    reasons (warps stalled per issued instruction, by reason)
for c in bar_s4096_d128_full bar_s4096_d64_full bert_b128; do
  [ "$(left)" -gt 60 ] || break
  timeout -s KILL 50 /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active \
    --launch-count 1 \
    build-dev/hkc run --random-params "build-dev/bench/attn/${c}__default.hkpack" --batch 1 --runs 1 --warmup 0 >> "$out/ncu.txt" 2>&1 || true
done
echo "attn_device: $(( $(date +%s) - start )) s, exit $rc"
exit $rc
