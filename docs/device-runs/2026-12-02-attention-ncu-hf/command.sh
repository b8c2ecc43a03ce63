#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s8/call2.sh from the repository root in the session; copied here next to its output)
# Session 8, device call 2 (build-dev carried; prepared by tests/device/prepare.sh,
# tests/device/hf_prepare.sh, bench/skv_prepare.sh and bench/attn_bars.py prepare --only the
# five cases below): split-KV attention (bench/skv_device.sh), the Hugging Face check again
# (BERT's q|k|v now one gemm over `parts:`; self-contained packs built here with hkc build
# --weights), op_attention128 in the harness (its decode nodes now split), the whole-layer
# per-launch profiles (graph time against the sum of the launches), and ncu of the
# attention cases below their bars.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out=${OUT:-/tmp/device-run}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
t() { echo "[$(( $(date +%s) - start )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
t "split-KV"
OUT=$out/skv DEVICE_BUDGET_S=225 bash bench/skv_device.sh > "$out/skv.out" 2>&1; echo "skv rc $?"
tail -n 30 "$out/skv.out"
t "harness op_attention128 (sm_90a, sm_90)"
for g in sm_90a sm_90; do
  HK_DEVICE_SPECS='^op_attention128$' HK_GPU_TARGET=$g timeout 60 bash tests/device/run.sh /tmp/s8-a128 \
    > "$out/harness_attention128_$g.log" 2>&1; echo "$g rc $? ok $(grep -c '^ok' "$out/harness_attention128_$g.log") FAIL $(grep -c '^FAIL' "$out/harness_attention128_$g.log")"
done
t "hf"
timeout 200 bash tests/device/hf_device.sh /tmp/s8-hf > "$out/hf.log" 2>&1; echo "hf rc $?"
grep -E "^(ok|FAIL)|hf_models" "$out/hf.log"
t "profiles"
for s in bert_layer:1,8,32,128 llama_block:1,4,16; do
  name=${s%%:*}
  for b in $(echo "${s#*:}" | tr , ' '); do
    timeout 60 build-dev/hkc run "build-dev/packs/$name.hkpack" --target sm_90a --batch "$b" --random-params \
      --runs 200 --warmup 20 --profile --repeats 50 > "$out/profile_${name}_b$b.txt" 2>&1
    echo "$name b$b rc $? $(grep -iE 'graph|sum' "$out/profile_${name}_b$b.txt" | tail -n 3 | tr '\n' ' ')"
  done
done
t "attention ncu"
for c in bar_s1024_d64_full bar_s1024_d128_full bert_b128 llama_b16 bar_s4096_d128_full_f16; do
  timeout -s KILL 50 /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active \
    --launch-count 1 \
    build-dev/hkc run --random-params "build-dev/bench/attn/${c}__default.hkpack" --batch 1 --runs 1 --warmup 0 > "$out/ncu_attn_$c.txt" 2>&1
  echo "ncu $c rc $?"
done
t "done"
