#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s8/call3.sh from the repository root in the session; copied here next to its output)
# Session 8, device call 3 (build-dev carried; prepared by tests/device/prepare.sh,
# tests/device/hf_prepare.sh, bench/skv_prepare.sh, and build-dev/s8/: llama_block before
# (three projections, two ropes) and after (one q|k|v gemm, one packed rope) this session's
# change): the Llama HF check with the packed form, the harness on the packs with rope and
# the sm_90a packs call 1 did not reach, split-KV numerics again (the > 48 KiB opt-in fix),
# hkc tune of the new q|k|v GEMM, llama_block before/after, the whole-layer profiles. All
# output in $OUT/device-run.tar.gz (the device tool returns few files).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
out=/tmp/device-run
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
t() { echo "[$(( $(date +%s) - start )) s] $*"; }
finish() { tar -C /tmp -czf "$final/device-run.tar.gz" device-run; t "done"; }
trap finish EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
t "hf llama (packed q|k|v)"
HF_MODELS=llama,llama_mask timeout 150 bash tests/device/hf_device.sh /tmp/s8-hf > "$out/hf_llama.log" 2>&1; echo "hf rc $?"
grep -E "^(ok|FAIL)|hf_models" "$out/hf_llama.log"
t "harness sm_90a: rope packs and the rest"
HK_DEVICE_SPECS='^(llama_block|llama_small|op_rope|op_gqa|op_fused$|op_gemm|op_norms|op_rows|op_tanh|repeat_layers|arch_tiny)' \
  HK_GPU_TARGET=sm_90a timeout 200 bash tests/device/run.sh /tmp/s8-h90a > "$out/harness_sm90a.log" 2>&1; echo "rc $?"
echo "ok $(grep -c '^ok' "$out/harness_sm90a.log") FAIL $(grep -c '^FAIL' "$out/harness_sm90a.log")"
grep -E "^ok|^FAIL" "$out/harness_sm90a.log" | awk '{print $2}' | uniq -c | tr '\n' ' '; echo
t "split-KV"
OUT=$out/skv DEVICE_BUDGET_S=60 bash bench/skv_device.sh > "$out/skv.out" 2>&1; echo "skv rc $?"
grep -E "numerics:|ERROR|FAIL" "$out/skv.out" | head -8
t "tune the q|k|v gemm"
timeout 120 build-dev/hkc tune build-dev/s8/qkv_gemm.yaml --target sm_90a -o "$out/qkv.db" --top 16 --report "$out/tune_qkv.md" \
  > "$out/tune.log" 2>&1; echo "tune rc $?"
tail -n 8 "$out/tune_qkv.md"
build-dev/hkc tune --merge specs/tuning/h200.db "$out/qkv.db" -o "$out/h200.db" >> "$out/tune.log" 2>&1
timeout 60 build-dev/hkc build specs/llama_block.yaml --target sm_90a --tuning-db "$out/h200.db" -q -o build-dev/s8/llama_block_tuned.hkpack; echo "build rc $?"
t "llama_block before / after"
for b in 1 4 16; do
  for p in 3gemm model tuned; do
    r=$(timeout 40 build-dev/hkc run "build-dev/s8/llama_block_$p.hkpack" --batch $b --random-params --runs 300 --warmup 30 2>&1 | grep -E "median" | tail -n 1)
    echo "llama_block b$b $p: $r" | tee -a "$out/llama_before_after.txt"
  done
done
t "profiles"
for s in bert_layer:1,8,32,128 llama_block:1,4,16; do
  name=${s%%:*}
  pack=build-dev/packs/$name.hkpack
  [ $name = llama_block ] && pack=build-dev/s8/llama_block_tuned.hkpack
  for b in $(echo "${s#*:}" | tr , ' '); do
    timeout 40 build-dev/hkc run "$pack" --target sm_90a --batch "$b" --random-params --allow-unsigned-native \
      --runs 200 --warmup 20 --profile --repeats 50 > "$out/profile_${name}_b$b.txt" 2>&1
    echo "$name b$b rc $? $(grep -E 'sum of launches|bubbles' "$out/profile_${name}_b$b.txt" | tr '\n' ' ')"
  done
done
left=$(( 560 - ($(date +%s) - start) ))
t "harness sm_90 rope packs (${left} s left)"
if [ $left -gt 40 ]; then
  HK_DEVICE_SPECS='^(llama_block|llama_small|op_rope|op_gqa)' HK_GPU_TARGET=sm_90 timeout $((left - 10)) \
    bash tests/device/run.sh /tmp/s8-h90 > "$out/harness_sm90.log" 2>&1; echo "rc $?"
  echo "ok $(grep -c '^ok' "$out/harness_sm90.log") FAIL $(grep -c '^FAIL' "$out/harness_sm90.log")"
fi
